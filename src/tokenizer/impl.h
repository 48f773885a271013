// The loaded tokenizer behind ceiling::Tokenizer (internal to src/tokenizer and its tests).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/added_vocab.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace ceiling::tok {

struct TokenizerImpl {
  std::string source;                           // tokenizer.json path, for messages
  std::unique_ptr<Normalizer> normalizer;       // may be null
  std::unique_ptr<PreTokenizer> pre_tokenizer;  // may be null
  std::unique_ptr<Bpe> model;
  AddedVocab added;
  PostProcessor post;
  DecoderChain decoder;
  TokenizerConfig config;
  std::optional<int32_t> bos, eos, pad;
  int32_t vocab_size = 0;

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  // The token string of `id` (added tokens first, then the model), or nullopt.
  std::optional<std::string_view> token_of(int32_t id) const;
  // Whether `id` takes part in a decode (it names a token, and is not a skipped special).
  bool decodes(int32_t id, bool skip_special) const;
  // Decodes a window of an id stream (see DecoderChain::decode for at_start / at_end / cut_ok).
  DecodeResult decode(std::span<const int32_t> ids, bool skip_special, bool at_start,
                      bool at_end) const;
};

// Parses tokenizer.json text (`origin` names it in errors).
std::shared_ptr<TokenizerImpl> parse_tokenizer_json(std::string_view text,
                                                    const std::string& origin);
TokenizerConfig parse_tokenizer_config(std::string_view text, const std::string& origin);
// Fills bos/eos/pad from the config (or the fallbacks documented on Tokenizer::bos_id).
void resolve_special_ids(TokenizerImpl& impl, bool have_config);

}  // namespace ceiling::tok
