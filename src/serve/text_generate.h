// Text-level generation: tokens from Generator become streamed text through the tokenizer's
// StreamDecoder, cut at stop strings (never emitting a stop string or a prefix of one that later
// completes it).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "serve/generate.h"
#include "tokenizer/tokenizer.h"

namespace ceiling::engine {

struct TextGenerateResult {
  GenerateResult tokens;  // ids, finish reason, timings
  std::string text;       // everything passed to on_text, concatenated
};

// Generates after `prompt` and streams the completion's text to on_text (called with non-empty
// pieces, in order). Special tokens are not rendered. The text is decoded in the prompt's context
// (a leading space of the first generated token is kept when the prompt has text before it)
// and equals tokenizer.decode(prompt + generated) minus the prompt's own decoded text.
TextGenerateResult generate_text(Generator& generator, const Tokenizer& tokenizer,
                                 const std::vector<int32_t>& prompt, const GenerateOptions& options,
                                 const std::vector<std::string>& stop_strings,
                                 const std::function<void(std::string_view)>& on_text = {});

}  // namespace ceiling::engine
