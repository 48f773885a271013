// What `ceiling bench serve` sends: one OpenAI-compatible streaming request per prompt, and when
// (a Poisson arrival schedule).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace ceiling::loadgen {

enum class Api { kCompletions, kChat };

// /v1/completions -> kCompletions, /v1/chat/completions -> kChat (by the path's end); throws
// for any other endpoint.
Api api_of_endpoint(const std::string& endpoint);

// One request of the workload: exactly one of ids (completions only), text, messages (chat).
struct Prompt {
  std::vector<int32_t> ids;
  std::optional<std::string> text;
  nlohmann::ordered_json messages;                   // null unless chat messages
  nlohmann::json fields = nlohmann::json::object();  // extra request fields (temperature, ...)
  int max_tokens = 128;
  int64_t expected_prompt_tokens = -1;  // known for id prompts; -1: take the server's usage
};

// The JSON body: model, the prompt (`prompt` for completions: ids or text; `messages` for chat,
// a text prompt becoming one user message), max_tokens, `stream: true` and
// `stream_options: {include_usage: true}`, `ignore_eos` (vLLM's extra) when asked, then the
// prompt's own fields (which override). Throws when the prompt does not fit the API.
std::string build_body(Api api, const std::string& model, const Prompt& p, bool ignore_eos);

// `n` prompts of `len` token ids uniform in [lo, hi) from `seed`.
std::vector<std::vector<int32_t>> random_token_prompts(int n, int len, int32_t lo, int32_t hi,
                                                       uint64_t seed);

// Arrival offsets in seconds (non-decreasing, the first 0 when rate is infinite) of `n` requests
// at `rate` requests/s: exponential gaps (a Poisson process) from `seed`, the first request
// after one gap; as vLLM, scaled so that the last arrival is at exactly n / rate (normalize).
// rate = infinity: all at 0.
std::vector<double> poisson_arrivals(int n, double rate, uint64_t seed, bool normalize = true);

}  // namespace ceiling::loadgen
