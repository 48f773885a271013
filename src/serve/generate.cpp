#include "serve/generate.h"

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

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

serve::EngineConfig one_sequence(const GeneratorLimits& l) {
  CEILING_ENSURE(l.max_model_len > 0, "max_model_len must be positive (got {})", l.max_model_len);
  CEILING_ENSURE(l.block_size > 0, "block_size must be positive (got {})", l.block_size);
  CEILING_ENSURE(l.max_tokens_per_step > 0, "max_tokens_per_step must be positive (got {})",
                 l.max_tokens_per_step);
  serve::EngineConfig c;
  c.max_model_len = l.max_model_len;
  c.max_num_seqs = 1;
  c.max_num_batched_tokens = l.max_tokens_per_step;
  c.block_size = l.block_size;
  c.num_kv_blocks = (l.max_model_len + l.block_size - 1) / l.block_size;
  c.enable_prefix_caching = false;
  return c;
}

}  // namespace

Generator::Generator(Ops& ops, GeneratorLimits limits)
    : ops_(ops), limits_(limits), engine_(ops, one_sequence(limits)) {}

std::vector<float> Generator::prompt_logits(const std::vector<int32_t>& prompt) {
  CEILING_ENSURE(!prompt.empty() && static_cast<int>(prompt.size()) < limits_.max_model_len,
                 "prompt of {} tokens does not fit max_model_len {}", prompt.size(),
                 limits_.max_model_len);
  serve::RequestParams p;
  p.sampling.temperature = 0;
  p.max_tokens = 1;
  p.ignore_eos = true;
  const int64_t id = engine_.add_request(prompt, p);
  std::vector<float> out;
  while (engine_.has_unfinished()) {
    for (const serve::RequestOutput& o : engine_.step()) {
      if (o.id != id || o.new_tokens.empty()) continue;
      const TensorView& logits = engine_.runner().last_logits();  // [1, V]: the only row
      out.resize(static_cast<size_t>(logits.numel()));
      ops_.to_host(logits, out.data());
    }
  }
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
  serve::RequestParams p;
  p.sampling = options.sampling;
  p.max_tokens = std::min(options.max_new_tokens, limits_.max_model_len - P);
  p.stop_token_ids = options.stop_token_ids;
  const int64_t id = engine_.add_request(prompt, p);

  auto t0 = std::chrono::steady_clock::now();
  bool done = false;
  while (!done && engine_.has_unfinished()) {
    for (const serve::RequestOutput& o : engine_.step()) {
      if (o.id != id) continue;
      for (int32_t tok : o.new_tokens) {
        if (++result.stats.generated_tokens == 1) {
          result.stats.prefill_ms = ms_since(t0);
          t0 = std::chrono::steady_clock::now();
        }
        if (o.finished && o.finish == serve::FinishReason::kStop) {
          result.finish = FinishReason::kStopToken;
          break;
        }
        result.tokens.push_back(tok);
        if (on_token && !on_token(tok)) {
          result.finish = FinishReason::kStopString;
          engine_.abort(id);
          done = true;
          break;
        }
      }
      if (o.finished && o.finish == serve::FinishReason::kLength)
        result.finish = static_cast<int>(result.tokens.size()) >= options.max_new_tokens
                            ? FinishReason::kMaxTokens
                            : FinishReason::kMaxModelLen;
      done = done || o.finished;
    }
  }
  while (engine_.has_unfinished()) engine_.step();  // drains an abort
  engine_.step();
  if (result.stats.generated_tokens > 1) result.stats.decode_ms = ms_since(t0);
  return result;
}

}  // namespace ceiling::engine
