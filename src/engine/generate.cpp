#include "engine/generate.h"

#include <algorithm>
#include <chrono>

#include "core/status.h"

namespace ceiling::engine {

std::string_view finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStopToken:
      return "stop";
    case FinishReason::kStopString:
      return "stop_string";
    case FinishReason::kMaxTokens:
      return "length";
    case FinishReason::kMaxModelLen:
      return "max_model_len";
  }
  return "?";
}

namespace {

int blocks_for(int tokens, int block_size) {
  return (tokens + block_size - 1) / block_size;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Generator::Generator(Ops& ops, GeneratorLimits limits)
    : ops_(ops),
      limits_(limits),
      forward_(ops, ForwardLimits{limits.max_tokens_per_step, 1}),
      kv_(ops.alloc_kv_cache(blocks_for(std::max(limits.max_model_len, 1), limits.block_size),
                             limits.block_size)),
      blocks_(kv_.num_blocks) {
  CEILING_ENSURE(limits.max_model_len > 0, "max_model_len must be positive (got {})",
                 limits.max_model_len);
}

TensorView Generator::run_chunked(const std::vector<int32_t>& ids, int start, SequenceBlocks& seq) {
  const int n = static_cast<int>(ids.size());
  seq.reserve(start + n);
  TensorView logits;
  for (int c0 = 0; c0 < n; c0 += limits_.max_tokens_per_step) {
    const int c1 = std::min(n, c0 + limits_.max_tokens_per_step);
    StepBatch step;
    step.max_blocks = blocks_.num_blocks();
    append_sequence(step, std::vector<int32_t>(ids.begin() + c0, ids.begin() + c1), start + c0,
                    seq.table(), limits_.block_size, /*want_logits=*/c1 == n);
    logits = forward_.run(step, kv_);
  }
  return logits;
}

std::vector<float> Generator::prompt_logits(const std::vector<int32_t>& prompt) {
  CEILING_ENSURE(!prompt.empty() && static_cast<int>(prompt.size()) <= limits_.max_model_len,
                 "prompt of {} tokens does not fit max_model_len {}", prompt.size(),
                 limits_.max_model_len);
  SequenceBlocks seq(blocks_, limits_.block_size);
  const TensorView logits = run_chunked(prompt, 0, seq);
  std::vector<float> out(static_cast<size_t>(logits.numel()));
  ops_.to_host(logits, out.data());
  return out;
}

GenerateResult Generator::generate(const std::vector<int32_t>& prompt,
                                   const GenerateOptions& options,
                                   const std::function<bool(int32_t)>& on_token) {
  const int P = static_cast<int>(prompt.size());
  CEILING_ENSURE(P > 0, "generate: the prompt is empty (it needs at least one token, e.g. BOS)");
  CEILING_ENSURE(P < limits_.max_model_len,
                 "generate: the prompt has {} tokens, leaving no room under max_model_len {}", P,
                 limits_.max_model_len);
  CEILING_ENSURE(options.max_new_tokens >= 0, "generate: max_new_tokens must be >= 0 (got {})",
                 options.max_new_tokens);
  cpu::validate(options.sampling);

  GenerateResult result;
  result.stats.prompt_tokens = P;
  if (options.max_new_tokens == 0) return result;
  SequenceBlocks seq(blocks_, limits_.block_size);
  std::vector<int32_t> generated;

  auto t0 = std::chrono::steady_clock::now();
  TensorView logits = run_chunked(prompt, 0, seq);
  for (;;) {
    SampleRequest req{options.sampling,
                      cpu::sampling_uniform(options.sampling.seed, generated.size()), prompt,
                      generated};
    int32_t id = -1;
    ops_.sample(logits, std::span<const SampleRequest>(&req, 1), &id);
    generated.push_back(id);
    if (generated.size() == 1) {
      result.stats.prefill_ms = ms_since(t0);
      t0 = std::chrono::steady_clock::now();
    }
    const bool stop = std::find(options.stop_token_ids.begin(), options.stop_token_ids.end(), id) !=
                      options.stop_token_ids.end();
    if (stop) {
      result.finish = FinishReason::kStopToken;
      break;
    }
    result.tokens.push_back(id);
    if (on_token && !on_token(id)) {
      result.finish = FinishReason::kStopString;
      break;
    }
    if (static_cast<int>(generated.size()) >= options.max_new_tokens) {
      result.finish = FinishReason::kMaxTokens;
      break;
    }
    if (P + static_cast<int>(generated.size()) >= limits_.max_model_len) {
      result.finish = FinishReason::kMaxModelLen;
      break;
    }
    logits = run_chunked({id}, P + static_cast<int>(generated.size()) - 1, seq);
  }
  result.stats.generated_tokens = static_cast<int>(generated.size());
  if (generated.size() > 1) result.stats.decode_ms = ms_since(t0);
  return result;
}

}  // namespace ceiling::engine
