// Pre-tokenizers of tokenizer.json ("pre_tokenizer"): ByteLevel, Split, Metaspace, Whitespace,
// WhitespaceSplit, Digits, Punctuation, Sequence. They cut one normalized segment of the input
// into the words the model encodes separately, and may rewrite them (ByteLevel's byte symbols,
// Metaspace's "▁").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/json_util.h"
#include "tokenizer/regex.h"

namespace ceiling::tok {

struct Piece {
  std::string text;
  // True when the piece starts at byte 0 of the original input (HF's offsets_original().0 == 0),
  // which Metaspace's prepend_scheme "first" tests.
  bool at_origin = false;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Rewrites `pieces` in place; empty pieces are dropped.
  virtual void apply(std::vector<Piece>& pieces) const = 0;
};

std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const Json& j, const JsonPath& p);

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Cuts `piece` at `parts` (a cover of piece.text as from SplitPattern::find_matches) the way HF's
// NormalizedString::split does for `behavior`, appending the non-empty results to `out`.
void split_piece(const Piece& piece, std::vector<std::pair<Span, bool>> parts,
                 SplitBehavior behavior, bool invert, std::vector<Piece>& out);

}  // namespace ceiling::tok
