// Response bodies in OpenAI's shapes: whole responses (text_completion, chat.completion) and the
// server-sent-event chunks of a stream (text_completion / chat.completion.chunk, `data: [DONE]`).
// Text is written with invalid UTF-8 replaced by U+FFFD, so every body is valid JSON whatever the
// model emits. Logprobs: the engine's (log-softmax of the raw logits); -Inf is written as -9999.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "serve/engine.h"
#include "server/request.h"

namespace ceiling::server {

// What one choice produced so far.
struct ChoiceResult {
  std::string text;
  std::vector<serve::TokenLogprob> logprobs;
  serve::FinishReason finish = serve::FinishReason::kNone;
  int prompt_tokens = 0, completion_tokens = 0;
};

class ResponseWriter {
 public:
  ResponseWriter(const GenerationRequest& req, const Tokenizer& tok, std::string model);

  // The whole (non-streaming) response.
  nlohmann::json full(const std::vector<ChoiceResult>& choices) const;

  // One SSE event ("data: {...}\n\n") for choice `i`: chat's role delta (text ignored).
  std::string role_chunk(int i) const;
  // A text delta with its tokens' logprobs; finish set on the choice's last chunk.
  std::string delta_chunk(int i, const std::string& text,
                          std::span<const serve::TokenLogprob> logprobs,
                          serve::FinishReason finish) const;
  // The include_usage chunk (choices: []).
  std::string usage_chunk(const std::vector<ChoiceResult>& choices) const;
  static std::string done() { return "data: [DONE]\n\n"; }
  // An error event inside a stream (OpenAI's shape).
  static std::string error_event(const nlohmann::json& error_body);

  const std::string& id() const { return id_; }

 private:
  nlohmann::json usage(const std::vector<ChoiceResult>& choices) const;
  nlohmann::json logprobs_json(std::span<const serve::TokenLogprob> lps, size_t text_offset) const;
  nlohmann::json chunk(nlohmann::json choice) const;

  const GenerationRequest& req_;
  const Tokenizer& tok_;
  std::string model_, id_;
  int64_t created_;
};

// JSON text with invalid UTF-8 replaced (U+FFFD).
std::string dump(const nlohmann::json& j);

}  // namespace ceiling::server
