// Parses tokenizer.json in one pass: a DOM for everything except model.vocab and model.merges,
// which are streamed straight into flat tables (they are 99% of a 10 MB file; building them as
// DOM nodes would dominate load time).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/json_util.h"

namespace ceiling::tok {

struct BpeTables {
  std::vector<std::pair<std::string, int32_t>> vocab;  // in file order
  // A merge as written: "a b" (pair == false, text in `a`) or ["a", "b"].
  struct Merge {
    std::string a, b;
    bool pair = false;
  };
  std::vector<Merge> merges;
};

struct ParsedTokenizerJson {
  Json dom;       // model.vocab is {} and model.merges is [] when they were captured
  BpeTables bpe;  // filled when model.vocab is an object / model.merges an array
};

// Throws ceiling::Error ("<origin>: not valid JSON: ..." or "<origin>: model.vocab.x: ...").
ParsedTokenizerJson parse_tokenizer_json_text(std::string_view text, const std::string& origin);

}  // namespace ceiling::tok
