// The BPE model of tokenizer.json ("model": vocab + ranked merges), as HF tokenizers runs it:
// a word's characters (plus continuing_subword_prefix / end_of_word_suffix) become symbols,
// unknown ones byte-fallback to <0xXX> tokens or become unk_token, then the lowest-ranked
// adjacent pair is merged until none applies (priority queue over a linked list of symbols).
// Results are cached per word (bounded; thread-safe).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/flat_map.h"
#include "tokenizer/json_sax.h"
#include "tokenizer/json_util.h"

namespace ceiling::tok {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

// The largest id a vocab may use: ids index dense tables, so absurd ids are refused.
constexpr int64_t kMaxTokenId = (int64_t{1} << 22) - 1;

class Bpe {
 public:
  // Parses the "model" object (with or without "type": "BPE"); its vocab and merges come from
  // `tables` (captured while parsing). Throws ceiling::Error naming the field for wrong types,
  // ids out of range, merges naming tokens not in the vocab.
  static std::unique_ptr<Bpe> parse(const Json& model, const JsonPath& p, const BpeTables& tables);

  // Appends the ids of one pre-tokenized word.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The token of `id`, or nullopt when the vocab has no such id.
  std::optional<std::string_view> id_to_token(int32_t id) const;
  int32_t max_id() const { return static_cast<int32_t>(id_to_token_.size()) - 1; }
  int64_t vocab_entries() const { return static_cast<int64_t>(vocab_.size()); }

 private:
  struct Merge {
    int32_t rank = 0;
    int32_t new_id = 0;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;

  FlatStringMap vocab_;
  std::vector<std::string_view> id_to_token_;  // views into vocab_'s arena
  std::vector<uint8_t> id_present_;
  FlatU64Map<Merge> merges_;
  std::optional<std::string> unk_token_;
  std::string prefix_, suffix_;  // continuing_subword_prefix, end_of_word_suffix
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  int32_t byte_ids_[256];  // id of "<0xXX>" or -1

  static constexpr std::size_t kCacheCapacity = 10000;
  static constexpr std::size_t kCacheMaxWordBytes = 256;
  mutable std::shared_mutex cache_mutex_;
  mutable StringMap<std::vector<int32_t>> cache_;
};

}  // namespace ceiling::tok
