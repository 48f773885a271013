// Single-request generation, as a client of the Engine: prompt -> chunked prefill -> decode
// steps -> tokens, on an engine with one sequence slot and a KV cache sized for max_model_len.
// Text-level generation (stream decoding, stop strings) is in serve/text_generate.h.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/ops.h"
#include "kernels/cpu/sampling.h"
#include "serve/engine.h"

namespace ceiling::engine {

enum class FinishReason { kStopToken, kStopString, kMaxTokens, kMaxModelLen };
std::string_view finish_reason_name(FinishReason r);  // "stop", "stop_string", "length", ...

struct GenerateOptions {
  cpu::SamplingParams sampling;
  int max_new_tokens = 256;
  std::vector<int32_t> stop_token_ids;  // EOS ids: generation ends on them (not reported)
};

struct GenerateStats {
  int prompt_tokens = 0;
  int generated_tokens = 0;  // including a final stop token
  double prefill_ms = 0;     // prompt steps until the first token is sampled
  double decode_ms = 0;      // every later step
  double ms_per_token() const {
    return generated_tokens > 1 ? decode_ms / (generated_tokens - 1) : 0.0;
  }
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids, without a final stop token
  FinishReason finish = FinishReason::kMaxTokens;
  GenerateStats stats;
};

struct GeneratorLimits {
  int max_model_len = 2048;       // prompt + generated tokens per sequence
  int block_size = 16;            // KV block size
  int max_tokens_per_step = 256;  // prefill chunk size (the forward's T_max)
};

// An Engine with one sequence and a KV cache of max_model_len tokens (prefix caching off, so
// every call computes its whole prompt). Reusable: each generate() is one request.
class Generator {
 public:
  // `ops` must hold the model's weights (Ops::upload) and outlive the Generator.
  Generator(Ops& ops, GeneratorLimits limits);

  const GeneratorLimits& limits() const { return limits_; }
  Ops& ops() { return ops_; }
  serve::Engine& engine() { return engine_; }

  // Generates after `prompt` (non-empty). on_token(id) is called for every generated token
  // except a stop token; returning false ends generation with FinishReason::kStopString.
  // Throws ceiling::Error when the prompt is empty or does not fit max_model_len.
  GenerateResult generate(const std::vector<int32_t>& prompt, const GenerateOptions& options,
                          const std::function<bool(int32_t)>& on_token = {});

  // The logits [V] after prefilling `prompt` (for tests and parity checks).
  std::vector<float> prompt_logits(const std::vector<int32_t>& prompt);

 private:
  Ops& ops_;
  GeneratorLimits limits_;
  serve::Engine engine_;
};

}  // namespace ceiling::engine
