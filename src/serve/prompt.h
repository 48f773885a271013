// What every front end (generate, bench, the server) does before a request reaches the engine:
// text or chat messages -> prompt ids, generation_config.json -> default request parameters,
// and the model's end-of-sequence ids.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/weights.h"
#include "serve/sequence.h"
#include "tokenizer/template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace ceiling::serve {

// A plain prompt: encoded with the tokenizer's special tokens (HF add_special_tokens=True).
std::vector<int32_t> encode_text(const Tokenizer& tok, std::string_view text);
// Chat messages ([{role, content}], content a string or a list of {type: text, text} parts)
// rendered by the template with the generation prompt, encoded without adding special tokens
// (the template writes any BOS itself, as transformers' apply_chat_template). Throws naming the
// message and field when a message is malformed.
std::vector<int32_t> encode_chat(const Tokenizer& tok, const ChatTemplate& tmpl,
                                 const nlohmann::ordered_json& messages);

// Request parameters from generation_config.json (do_sample false: greedy; max_new_tokens ->
// max_tokens, else 256).
RequestParams default_params(const GenerationDefaults& g);

// End-of-sequence ids: generation_config.json's, config.json's and the tokenizer's EOS, unique.
std::vector<int32_t> eos_token_ids(const Model& model, const Tokenizer& tok);

}  // namespace ceiling::serve
