#include "test_util.h"

#include <map>
#include <memory>
#include <mutex>

namespace ceiling::test {

using nlohmann::json;

const Tokenizer& real_tokenizer(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  std::lock_guard lock(mu);
  auto& slot = cache[name];
  if (!slot) slot = std::make_unique<Tokenizer>(Tokenizer::from_dir(tokenizer_dir(name)));
  return *slot;
}

namespace {

json added(const std::string& content, int id, bool special) {
  return {{"id", id},        {"content", content},     {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", !special}, {"special", special}};
}

std::string byte_symbol(int b) {
  // GPT-2's byte -> printable symbol map.
  static const std::vector<int> cs = [] {
    std::vector<int> map(256, -1);
    int next = 256;
    for (int i = 0; i < 256; ++i) {
      const bool printable = (i >= 0x21 && i <= 0x7E) || (i >= 0xA1 && i <= 0xAC) || i >= 0xAE;
      map[i] = printable ? i : next++;
    }
    return map;
  }();
  std::string out;
  const int c = cs[b];
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
  return out;
}

}  // namespace

json tiny_bytelevel() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_symbol(b)] = b;
  json merges = json::array();
  for (auto [a, b] : {std::pair{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {"Ġ", "t"}}) {
    vocab[std::string(a) + b] = static_cast<int>(vocab.size());
    merges.push_back(std::string(a) + " " + b);
  }
  const int end_id = static_cast<int>(vocab.size());
  return {
      {"version", "1.0"},
      {"added_tokens", json::array({added("<|end|>", end_id, true)})},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"vocab", vocab}, {"merges", merges}}}};
}

json tiny_sentencepiece() {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    vocab[name] = static_cast<int>(vocab.size());
  }
  for (const char* t : {"\u2581", "a", "b", "c", "d", "e", "\u2581a", "ab", "\u2581ab"}) {
    vocab[t] = static_cast<int>(vocab.size());
  }
  const json meta = {{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}};
  return {{"added_tokens",
           json::array({added("<unk>", 0, true), added("<s>", 1, true), added("</s>", 2, true)})},
          {"pre_tokenizer",
           {{"type", "Metaspace"},
            {"replacement", "\u2581"},
            {"prepend_scheme", "first"},
            {"split", false}}},
          {"post_processor",
           {{"type", "TemplateProcessing"},
            {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                    {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
            {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
          {"decoder",
           {{"type", "Sequence"},
            {"decoders",
             json::array({meta,
                          {{"type", "ByteFallback"}},
                          {{"type", "Fuse"}},
                          {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}}},
          {"model",
           {{"type", "BPE"},
            {"unk_token", "<unk>"},
            {"fuse_unk", true},
            {"byte_fallback", true},
            {"vocab", vocab},
            {"merges", json::array({json::array({"\u2581", "a"}), json::array({"a", "b"}),
                                    json::array({"\u2581a", "b"})})}}}};
}

}  // namespace ceiling::test
