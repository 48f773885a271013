// Request parsing and validation: an OpenAI request body (JSON) -> a typed GenerationRequest that
// the engine side can run without looking at JSON again. Runs on the HTTP threads (tokenizing and
// chat templates included). Every refusal is an ApiError naming the offending field.
//
// Semantics: OpenAI's field names and ranges, vLLM's extras (top_k, min_p, repetition_penalty,
// ignore_eos, min_tokens). Unset fields take the model's generation_config.json defaults
// (serve::default_params). An unset max_tokens is clipped to what max_model_len leaves after the
// prompt; a set one that does not fit is a 400 naming both numbers.
// n > 1: choice i of a prompt is seeded with seed + i (seed given) so a request is reproducible;
// without a seed every choice draws a fresh random seed.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "serve/sequence.h"
#include "tokenizer/template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace ceiling::server {

// What parsing needs to know about the model being served.
struct ModelInfo {
  std::string name;  // --served-model-name
  const Tokenizer* tokenizer = nullptr;
  const ChatTemplate* chat_template = nullptr;  // null: chat requests are refused
  serve::RequestParams defaults;                // from generation_config.json
  int vocab_size = 0;
  int max_model_len = 0;
  int max_n = 16;  // the cap on n
};

// One engine request: a prompt and its parameters (seed already derived for the choice).
struct ChoiceJob {
  int prompt_index = 0;
  std::vector<int32_t> prompt;
  serve::RequestParams params;
};

struct GenerationRequest {
  bool chat = false;
  bool stream = false, include_usage = false;
  bool echo = false;  // completions: the prompt text before each choice's text
  int logprobs = -1;  // engine logprobs: -1 none, else the number of top alternatives
  std::vector<std::vector<int32_t>> prompts;  // completions: one per prompt; chat: one
  std::vector<std::string> prompt_texts;      // for echo (token prompts decoded)
  std::vector<ChoiceJob> choices;             // prompts × n, choice index = prompt · n + j
};

// The body as JSON: 400 for invalid JSON or UTF-8, or a body that is not an object.
nlohmann::json parse_body(std::string_view body);

GenerationRequest parse_completion(const nlohmann::json& body, const ModelInfo& m);
GenerationRequest parse_chat(const nlohmann::json& body, const ModelInfo& m);

// The "model" field: absent or the served name; another name is a 404.
void check_model(const nlohmann::json& body, const ModelInfo& m);

}  // namespace ceiling::server
