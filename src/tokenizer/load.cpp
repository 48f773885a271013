// Loading tokenizer.json + tokenizer_config.json into a TokenizerImpl.
#include <limits>

#include "core/file_read.h"
#include "core/json_bounded.h"
#include "core/status.h"
#include "tokenizer/impl.h"
#include "tokenizer/json_sax.h"
#include "tokenizer/tokenizer.h"

namespace ceiling {

namespace tok {

namespace {

Json parse_json(std::string_view text, const std::string& origin) {
  return parse_json_or_fail(text, origin);
}

// A special-token entry of tokenizer_config.json: "text", null, or {"content": "text", ...}.
std::optional<std::string> token_string(const Json& root, const char* key, const JsonPath& p) {
  const Json* j = json_find(root, key, p);
  if (j == nullptr) return std::nullopt;
  if (j->is_object()) return json_string(json_require(*j, "content", p / key), p / key / "content");
  return json_string(*j, p / key);
}

std::optional<bool> opt_bool(const Json& root, const char* key, const JsonPath& p) {
  const Json* j = json_find(root, key, p);
  if (j == nullptr) return std::nullopt;
  return json_bool(*j, p / key);
}

}  // namespace

TokenizerConfig parse_tokenizer_config(std::string_view text, const std::string& origin) {
  const Json root = parse_json(text, origin);
  const JsonPath p{origin, ""};
  if (!root.is_object()) json_fail(p, fmt::format("expected an object, got {}", root.type_name()));
  TokenizerConfig c;
  c.add_bos_token = opt_bool(root, "add_bos_token", p);
  c.add_eos_token = opt_bool(root, "add_eos_token", p);
  c.bos_token = token_string(root, "bos_token", p);
  c.eos_token = token_string(root, "eos_token", p);
  c.pad_token = token_string(root, "pad_token", p);
  c.unk_token = token_string(root, "unk_token", p);
  if (const Json* t = json_find(root, "chat_template", p)) {
    const JsonPath tp = p / "chat_template";
    if (t->is_string()) {
      c.chat_template = t->get<std::string>();
      c.chat_templates["default"] = c.chat_template;
    } else if (t->is_array()) {
      for (std::size_t i = 0; i < t->size(); ++i) {
        const JsonPath ip = tp.at(i);
        const std::string name = json_string(json_require((*t)[i], "name", ip), ip / "name");
        c.chat_templates[name] =
            json_string(json_require((*t)[i], "template", ip), ip / "template");
        if (i == 0 || name == "default") c.chat_template = c.chat_templates[name];
      }
    } else {
      json_fail(tp, fmt::format("expected a string or a list of named templates, got {}",
                                t->type_name()));
    }
  }
  if (const Json* m = json_find(root, "model_max_length", p)) {
    const JsonPath mp = p / "model_max_length";
    if (!m->is_number()) json_fail(mp, fmt::format("expected a number, got {}", m->type_name()));
    if (m->is_number_unsigned() || m->is_number_integer()) {
      c.model_max_length = json_int(*m, mp, 0, std::numeric_limits<int64_t>::max());
    } else {
      const double d = m->get<double>();
      if (!(d >= 0)) json_fail(mp, fmt::format("{} is negative", d));
      c.model_max_length =
          d >= 9.2e18 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(d);
    }
  }
  return c;
}

std::shared_ptr<TokenizerImpl> parse_tokenizer_json(std::string_view text,
                                                    const std::string& origin) {
  const ParsedTokenizerJson parsed = parse_tokenizer_json_text(text, origin);
  const Json& root = parsed.dom;
  const JsonPath p{origin, ""};
  if (!root.is_object()) json_fail(p, fmt::format("expected an object, got {}", root.type_name()));
  auto impl = std::make_shared<TokenizerImpl>();
  impl->source = origin;
  if (const Json* n = json_find(root, "normalizer", p)) {
    impl->normalizer = parse_normalizer(*n, p / "normalizer");
  }
  if (const Json* pt = json_find(root, "pre_tokenizer", p)) {
    impl->pre_tokenizer = parse_pre_tokenizer(*pt, p / "pre_tokenizer");
  }
  impl->model = Bpe::parse(json_require(root, "model", p), p / "model", parsed.bpe);
  impl->added = AddedVocab::parse(json_find(root, "added_tokens", p), p / "added_tokens",
                                  *impl->model, impl->normalizer.get());
  impl->post = PostProcessor::parse(json_find(root, "post_processor", p), p / "post_processor");
  impl->decoder = DecoderChain::parse(json_find(root, "decoder", p), p / "decoder");
  int64_t max_id = impl->model->max_id();
  for (const AddedToken& t : impl->added.tokens()) max_id = std::max<int64_t>(max_id, t.id);
  impl->vocab_size = static_cast<int32_t>(max_id + 1);
  for (int32_t id : impl->post.process({})) {
    if (!impl->token_of(id)) {
      json_fail(p / "post_processor", fmt::format("special token id {} names no token", id));
    }
  }
  return impl;
}

void resolve_special_ids(TokenizerImpl& impl, bool have_config) {
  auto lookup = [&](const std::optional<std::string>& s) -> std::optional<int32_t> {
    if (!s) return std::nullopt;
    if (auto id = impl.added.token_to_id(*s)) return id;
    return impl.model->token_to_id(*s);
  };
  impl.bos = lookup(impl.config.bos_token);
  impl.eos = lookup(impl.config.eos_token);
  impl.pad = lookup(impl.config.pad_token);
  // Where the config names none, take the post-processor's leading token as BOS and a special
  // token with a conventional end-of-text name as EOS.
  if (!impl.bos && !(have_config && impl.config.bos_token)) impl.bos = impl.post.leading_id();
  if (!impl.eos) {
    for (const char* name : {"</s>", "<|endoftext|>", "<|end_of_text|>"}) {
      if (impl.eos) break;
      if (impl.added.is_special_content(name)) impl.eos = impl.added.token_to_id(name);
    }
  }
}

}  // namespace tok

Tokenizer Tokenizer::from_file(const std::filesystem::path& tokenizer_json,
                               const std::filesystem::path& tokenizer_config_json) {
  auto impl = tok::parse_tokenizer_json(read_regular_file(tokenizer_json, kMaxTokenizerJsonBytes),
                                        tokenizer_json.string());
  const bool have_config = !tokenizer_config_json.empty();
  if (have_config) {
    impl->config = tok::parse_tokenizer_config(
        read_regular_file(tokenizer_config_json, kMaxTokenizerConfigBytes),
        tokenizer_config_json.string());
  }
  tok::resolve_special_ids(*impl, have_config);
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_json(std::string_view tokenizer_json,
                               std::string_view tokenizer_config_json, const std::string& origin) {
  auto impl = tok::parse_tokenizer_json(tokenizer_json, origin);
  const bool have_config = !tokenizer_config_json.empty();
  if (have_config) {
    impl->config = tok::parse_tokenizer_config(tokenizer_config_json, "tokenizer_config.json");
  }
  tok::resolve_special_ids(*impl, have_config);
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_dir(const std::filesystem::path& dir) {
  // A file named directly is the caller's choice; files found in a directory must resolve
  // inside it (core/file_read.h).
  constexpr const char* kConfig = "tokenizer_config.json";
  std::error_code ec;
  if (std::filesystem::is_regular_file(dir, ec)) {
    const auto parent = dir.parent_path().empty() ? std::filesystem::path(".") : dir.parent_path();
    return from_file(dir, dir_entry_present(parent, kConfig)
                              ? contained_file(parent, kConfig, "tokenizer config")
                              : std::filesystem::path());
  }
  if (!std::filesystem::is_directory(dir, ec)) fail("{}: no such file or directory", dir.string());
  if (!dir_entry_present(dir, "tokenizer.json"))
    fail("{}: no tokenizer.json in this directory", dir.string());
  return from_file(contained_file(dir, "tokenizer.json", "tokenizer"),
                   dir_entry_present(dir, kConfig)
                       ? contained_file(dir, kConfig, "tokenizer config")
                       : std::filesystem::path());
}

}  // namespace ceiling
