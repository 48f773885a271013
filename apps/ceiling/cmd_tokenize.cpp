// `ceiling tokenize` and `ceiling detokenize`: text <-> ids with a model's tokenizer.json, the
// same ids as Hugging Face's tokenizers (encode(text, add_special_tokens=True) unless
// --no-special; decode(ids, skip_special_tokens)).
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "ceiling/command.h"
#include "core/file_read.h"
#include "core/json_bounded.h"
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

// --text-file and --ids-file: regular files only, at most this many bytes.
constexpr uint64_t kMaxInputFileBytes = 256ull << 20;

// Writes `text` exactly; a newline follows only on a terminal.
void print_text(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (isatty(fileno(stdout))) std::fputc('\n', stdout);
}

// Accepts only a flat JSON array of integers: one linear pass, depth 1, no DOM.
class IdsSax final : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::vector<int64_t> ids;
  std::string error;

  bool null() override { return refuse("null"); }
  bool boolean(bool) override { return refuse("a boolean"); }
  bool number_integer(number_integer_t v) override { return id(v); }
  bool number_unsigned(number_unsigned_t v) override {
    return id(v > uint64_t{INT64_MAX} ? INT64_MAX : static_cast<int64_t>(v));
  }
  bool number_float(number_float_t, const string_t&) override { return refuse("a number"); }
  bool string(string_t&) override { return refuse("a string"); }
  bool binary(binary_t&) override { return refuse("binary"); }
  bool key(string_t&) override { return refuse("an object"); }
  bool start_object(std::size_t) override { return refuse("an object"); }
  bool end_object() override { return refuse("an object"); }
  bool start_array(std::size_t) override {
    if (open_) return refuse("a list");
    open_ = true;
    return true;
  }
  bool end_array() override { return true; }
  bool parse_error(std::size_t byte, const std::string&,
                   const nlohmann::detail::exception& e) override {
    if (error.empty())
      error = fmt::format("not a JSON array of ids (syntax error at byte {}: {})", byte,
                          json_error_rule(e));
    return false;
  }

 private:
  bool refuse(const char* what) {
    error = open_ ? fmt::format("element {} is {}, expected an integer id", ids.size(), what)
                  : fmt::format("expected a JSON array of ids, got {}", what);
    return false;
  }
  bool id(int64_t v) {
    if (!open_) return refuse("a number");
    ids.push_back(v);
    return true;
  }
  bool open_ = false;
};

std::vector<int32_t> parse_ids(const std::string& json_text, const std::string& origin,
                               const Tokenizer& tok) {
  if (const size_t nul = json_text.find('\0'); nul != std::string::npos)
    fail("{}: not a JSON array of ids (NUL byte at byte {})", origin, nul);
  IdsSax sax;
  bool ok = false;
  try {
    ok = nlohmann::json::sax_parse(json_text, &sax);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not a JSON array of ids ({})", origin, json_error_rule(e));
  }
  if (!ok) fail("{}: {}", origin, sax.error.empty() ? "not a JSON array of ids" : sax.error);
  std::vector<int32_t> ids;
  ids.reserve(sax.ids.size());
  for (std::size_t i = 0; i < sax.ids.size(); ++i) {
    const int64_t id = sax.ids[i];
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
    const std::string text =
        f->count() ? read_regular_file(a->text_file, kMaxInputFileBytes) : a->text;
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
    const std::vector<int32_t> ids =
        f->count() ? parse_ids(read_regular_file(a->ids_file, kMaxInputFileBytes), a->ids_file, tok)
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
