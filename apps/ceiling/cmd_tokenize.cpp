// `ceiling tokenize` and `ceiling detokenize`: text <-> ids with a model's tokenizer.json, the
// same ids as Hugging Face's tokenizers (encode(text, add_special_tokens=True) unless
// --no-special; decode(ids, skip_special_tokens)).
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ceiling/command.h"
#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace ceiling::cli {
namespace {

struct Source {
  std::string model, tokenizer;
};

void add_source(CLI::App& sub, Source& s) {
  auto* m = sub.add_option("--model", s.model, "model directory holding tokenizer.json");
  auto* t = sub.add_option("--tokenizer", s.tokenizer,
                           "tokenizer.json, or a directory holding it (and tokenizer_config.json)");
  m->excludes(t);
}

Tokenizer load(const Source& s) {
  if (s.model.empty() && s.tokenizer.empty()) fail("give --model DIR or --tokenizer PATH");
  return Tokenizer::from_dir(s.model.empty() ? s.tokenizer : s.model);
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return std::move(ss).str();
}

// Writes `text` exactly; a newline follows only on a terminal.
void print_text(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (isatty(fileno(stdout))) std::fputc('\n', stdout);
}

std::vector<int32_t> parse_ids(const std::string& json_text, const std::string& origin,
                               const Tokenizer& tok) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not a JSON array of ids: {}", origin, e.what());
  }
  if (!j.is_array()) fail("{}: expected a JSON array of ids, got {}", origin, j.type_name());
  std::vector<int32_t> ids;
  for (std::size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_number_integer()) {
      fail("{}: element {} is {}, expected an integer id", origin, i, j[i].dump());
    }
    const int64_t id = j[i].get<int64_t>();
    if (id < 0 || id >= tok.vocab_size() || tok.id_to_token(static_cast<int32_t>(id)).empty()) {
      fail("{}: id {} (element {}) names no token (vocab size {})", origin, id, i,
           tok.vocab_size());
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

std::function<int()> setup_tokenize(CLI::App& sub) {
  struct Args {
    Source src;
    std::string text, text_file;
    bool no_special = false;
  };
  auto a = std::make_shared<Args>();
  add_source(sub, a->src);
  auto* t = sub.add_option("--text", a->text, "the text to encode");
  auto* f = sub.add_option("--text-file", a->text_file, "encode this file's bytes (UTF-8)");
  t->excludes(f);
  sub.add_flag("--no-special", a->no_special,
               "do not add the post-processor's special tokens (e.g. BOS)");
  return [a, t, f] {
    if (t->count() == 0 && f->count() == 0) fail("give --text TEXT or --text-file FILE");
    const Tokenizer tok = load(a->src);
    const std::string text = f->count() ? read_all(a->text_file) : a->text;
    const std::vector<int32_t> ids = tok.encode(text, !a->no_special);
    fmt::print("{}\n", nlohmann::json(ids).dump());
    return 0;
  };
}

std::function<int()> setup_detokenize(CLI::App& sub) {
  struct Args {
    Source src;
    std::string ids, ids_file;
    bool skip_special = false;
  };
  auto a = std::make_shared<Args>();
  add_source(sub, a->src);
  auto* i = sub.add_option("--ids", a->ids, "a JSON array of ids, e.g. '[1, 15043]'");
  auto* f = sub.add_option("--ids-file", a->ids_file, "a file holding a JSON array of ids");
  i->excludes(f);
  sub.add_flag("--skip-special", a->skip_special, "leave special tokens out of the text");
  return [a, i, f] {
    if (i->count() == 0 && f->count() == 0) fail("give --ids '[...]' or --ids-file FILE");
    const Tokenizer tok = load(a->src);
    const std::vector<int32_t> ids = f->count() ? parse_ids(read_all(a->ids_file), a->ids_file, tok)
                                                : parse_ids(a->ids, "--ids", tok);
    print_text(tok.decode(ids, a->skip_special));
    return 0;
  };
}

CEILING_COMMAND("tokenize", "encode text to token ids with a model's tokenizer (HF-compatible)",
                setup_tokenize, 60);
CEILING_COMMAND("detokenize", "decode token ids to text with a model's tokenizer", setup_detokenize,
                61);

}  // namespace
}  // namespace ceiling::cli
