// Helpers shared by the tokenizer tests: the real tokenizers in data/tokenizers, and small
// tokenizer.json documents built in code.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tokenizer/tokenizer.h"

namespace ceiling::test {

inline std::string tokenizer_dir(const std::string& name) {
  return std::string(CEILING_DATA_DIR) + "/tokenizers/" + name;
}

// One load per process and name (the large files take a while).
const Tokenizer& real_tokenizer(const std::string& name);

// A byte-level tokenizer: 256 byte symbols, a few merges ("he", "ll", "hell", "hello",
// " t"), GPT-2 pre-tokenizer and ByteLevel decoder; one special added token "<|end|>".
nlohmann::json tiny_bytelevel();

// A SentencePiece-style tokenizer: "▁", a-e, "▁a", "ab", byte-fallback tokens <0x00>..<0xFF>,
// <unk>/<s>/</s>, Metaspace pre-tokenizer, BOS template, Replace/ByteFallback/Fuse/Strip decoder.
nlohmann::json tiny_sentencepiece();

}  // namespace ceiling::test
