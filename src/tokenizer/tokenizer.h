// A Hugging Face `tokenizers`-compatible tokenizer: loads tokenizer.json (BPE, byte-level as in
// GPT-2 / Llama 3 / Qwen2.5, or SentencePiece-style with byte fallback as in Llama 2 / Mistral)
// plus the optional tokenizer_config.json, and encodes/decodes with the same ids and text as
// `tokenizers.Tokenizer.encode(text, add_special_tokens)` / `.decode(ids, skip_special_tokens)`.
//
// Thread-safety: a loaded Tokenizer is immutable; encode/decode/lookups may be called from any
// number of threads at once (the BPE word cache is internally locked). Copies are cheap and share
// the loaded data. A StreamDecoder is single-threaded state; use one per sequence.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ceiling {

namespace tok {
struct TokenizerImpl;
}

// Size caps on the files read (the largest public tokenizer.json files are ~35 MB).
inline constexpr uint64_t kMaxTokenizerJsonBytes = 256ull << 20;
inline constexpr uint64_t kMaxTokenizerConfigBytes = 64ull << 20;

// What tokenizer_config.json says (all optional). Special-token strings are taken from either a
// plain string or an AddedToken dict's "content".
struct TokenizerConfig {
  std::optional<bool> add_bos_token;
  std::optional<bool> add_eos_token;
  std::optional<std::string> bos_token, eos_token, pad_token, unk_token;
  // The default chat template (a string, or the entry named "default" — else the first — of a
  // list of named templates); empty when none. All named templates are in chat_templates.
  std::string chat_template;
  std::map<std::string, std::string> chat_templates;
  // model_max_length, clamped to INT64_MAX (configs write 1e30 for "unbounded"); 0 when absent.
  int64_t model_max_length = 0;
};

class Tokenizer {
 public:
  // Loads tokenizer.json and, when given, tokenizer_config.json. Throws ceiling::Error with a
  // one-line message naming the file, the field and the rule for anything missing or malformed.
  static Tokenizer from_file(const std::filesystem::path& tokenizer_json,
                             const std::filesystem::path& tokenizer_config_json = {});
  // dir/tokenizer.json plus dir/tokenizer_config.json when that exists. A path to a file is
  // taken as the tokenizer.json itself (its directory's tokenizer_config.json is used if present).
  // Files found in a directory must resolve inside it (symlinks included; a Hugging Face cache
  // snapshot may link into its blobs/ folder). Files are capped at the sizes above.
  static Tokenizer from_dir(const std::filesystem::path& dir);
  // From the files' text (errors name `origin`); an empty config means none.
  static Tokenizer from_json(std::string_view tokenizer_json,
                             std::string_view tokenizer_config_json = {},
                             const std::string& origin = "tokenizer.json");

  // Text (UTF-8; invalid UTF-8 throws ceiling::Error) to ids. add_special_tokens applies the
  // post-processor (e.g. Llama's BOS), exactly as HF's encode(text, add_special_tokens=True).
  // Added tokens in the text (special or not) are always recognised.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // Ids to text through the tokenizer's decoder. Ids that name no token are dropped (as HF does).
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The token's string as stored in the vocab (byte-level symbols, "▁", "<0x0A>"); an added token's
  // content (normalized when its "normalized" flag is set, as HF does); empty if none.
  std::string id_to_token(int32_t id) const;
  // One past the largest id of the vocab and the added tokens.
  int vocab_size() const;
  // From tokenizer_config.json; where it names none (or there is none), BOS is the
  // post-processor's leading special token and EOS the first special added token named </s>,
  // <|endoftext|> or <|end_of_text|>. Generation stop ids also come from generation_config.json.
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> pad_id() const;
  const std::string& chat_template() const;  // raw Jinja text, empty when none
  const TokenizerConfig& config() const;
  // True for added tokens marked "special" (skipped by decode(..., skip_special_tokens=true)).
  bool is_special(int32_t id) const;

 private:
  friend class StreamDecoder;
  const tok::TokenizerImpl& impl() const { return *impl_; }
  explicit Tokenizer(std::shared_ptr<const tok::TokenizerImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const tok::TokenizerImpl> impl_;
};

// Incremental detokenization for streaming. push() takes one id and returns the text that became
// final with it (often empty: an incomplete UTF-8 sequence, a run of byte-fallback tokens or a
// leading space that Strip may remove are held back); flush() returns the rest and resets the
// decoder for a new sequence. For any ids, the concatenation of every push() and the flush()
// equals tokenizer.decode(ids, skip_special) exactly, and every piece is valid UTF-8 (a sequence
// that can never complete shows as U+FFFD, as in decode). Ids that name no token are ignored.
// Cost per push is O(tokens held back).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = false);
  std::string push(int32_t id);
  std::string flush();

 private:
  Tokenizer tokenizer_;  // shares the loaded data
  bool skip_special_;
  bool at_start_ = true;         // nothing has been committed yet
  std::vector<int32_t> window_;  // ids since the last safe cut (decoded text not yet returned)
};

}  // namespace ceiling
