// Added tokens ("added_tokens" of tokenizer.json): matched in the input before anything else
// (leftmost-longest), with HF's lstrip / rstrip / single_word / normalized rules, and never
// passed through BPE. Ids follow HF's assignment: a token already in the model's vocab keeps
// that id, a new one gets the next id past the vocab.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/json_util.h"
#include "tokenizer/normalizer.h"

namespace ceiling::tok {

struct AddedToken {
  std::string content;
  // What id_to_token and decode see: the content, normalized when `normalized` (as HF 0.2x
  // does; such a token then no longer counts as special when decoding).
  std::string text;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  int32_t id = -1;
};

class AddedVocab {
 public:
  AddedVocab() = default;
  // `list` is the "added_tokens" array (may be null). `normalizer` may be null.
  static AddedVocab parse(const Json* list, const JsonPath& p, const Bpe& model,
                          const Normalizer* normalizer);

  struct Segment {
    std::size_t begin = 0, end = 0;
    int32_t id = -1;  // the added token's id, or -1 for text to tokenize
  };
  // Cuts `s` into text and added-token segments, matching the non-normalized tokens
  // (normalized == false) or the normalized ones. Empty input gives one empty text segment.
  std::vector<Segment> split(std::string_view s, bool normalized) const;
  bool has_normalized() const { return !normalized_.patterns.empty(); }

  std::optional<int32_t> token_to_id(std::string_view content) const;
  const AddedToken* find(int32_t id) const;
  bool is_special_content(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  struct MatchSet {
    std::vector<std::string> patterns;
    std::vector<int32_t> ids;
    std::vector<std::vector<int32_t>> by_first_byte;  // pattern indices, longest first
    void build();
  };
  std::vector<AddedToken> tokens_;  // in id order of first addition; one per id
  StringMap<int32_t> by_content_;
  std::unordered_map<int32_t, std::size_t> by_id_;
  std::unordered_set<std::string, StringHash, std::equal_to<>> special_contents_;
  MatchSet raw_, normalized_;
};

}  // namespace ceiling::tok
