#include "roofline/throughput.h"

#include <algorithm>
#include <cmath>

#include "core/status.h"

namespace ceiling::roofline {

ThroughputPrediction predict_throughput(const ModelConfig& m, const GpuCeilings& gpu,
                                        const ThroughputWorkload& w, Scenario base) {
  CEILING_ENSURE(w.num_prompts >= 1 && w.input_len >= 1 && w.output_len >= 1,
                 "throughput: num_prompts, input_len and output_len must be >= 1");
  CEILING_ENSURE(w.prefix_len >= 0 && w.prefix_len < w.input_len,
                 "throughput: prefix_len {} must be in [0, input_len {})", w.prefix_len,
                 w.input_len);
  CEILING_ENSURE(w.max_num_seqs >= 1 && w.max_num_batched_tokens >= 1,
                 "throughput: max_num_seqs and max_num_batched_tokens must be >= 1");
  ThroughputPrediction p;
  p.kv_tokens = w.kv_tokens;
  if (p.kv_tokens <= 0) {
    Scenario s = base;
    s.phase = Phase::kDecode;
    s.batch = 1;
    s.context = std::min<int64_t>(w.input_len, m.max_position_embeddings);
    const MemoryReport mem = memory_report(m, gpu, s);
    p.kv_tokens = static_cast<int64_t>(
        std::max(0.0, (mem.usable_bytes - mem.weights_bytes) / mem.kv_bytes_per_token));
  }
  const int64_t unique = w.input_len - w.prefix_len;
  // Requests of equal lengths submitted together run in lockstep waves: every sequence of a wave
  // reaches its full footprint at the same step, so the cache must hold that, not the mean.
  const double footprint = static_cast<double>(unique + w.output_len);
  const int64_t by_kv =
      static_cast<int64_t>(std::floor((p.kv_tokens - w.prefix_len) / std::max(footprint, 1.0)));
  CEILING_ENSURE(by_kv >= 1, "throughput: a KV cache of {} tokens holds no request of {} tokens",
                 p.kv_tokens, w.input_len + w.output_len);
  p.concurrency = std::min({w.max_num_seqs, w.num_prompts, by_kv});
  p.concurrency_limit = p.concurrency == by_kv            ? "kv cache"
                        : p.concurrency == w.max_num_seqs ? "max_num_seqs"
                                                          : "num_prompts";

  Scenario d = base;
  d.phase = Phase::kDecode;
  d.batch = p.concurrency;
  d.context = w.input_len + w.output_len / 2;
  p.decode_step_s = predict_step(m, gpu, d).time_predicted_s;
  const int64_t tokens = w.num_prompts * w.output_len;
  p.decode_steps = (tokens + p.concurrency - 1) / p.concurrency;
  p.decode_s = static_cast<double>(p.decode_steps) * p.decode_step_s;

  Scenario f = base;
  f.phase = Phase::kPrefill;
  f.context = unique;
  f.batch = std::max<int64_t>(1, w.max_num_batched_tokens / unique);
  const double per_step = predict_step(m, gpu, f).time_predicted_s;
  p.prefill_s = per_step * static_cast<double>(w.num_prompts) / static_cast<double>(f.batch);
  if (w.prefix_len > 0) {
    f.context = w.prefix_len;
    f.batch = 1;
    p.prefill_s += predict_step(m, gpu, f).time_predicted_s;
  }
  p.total_s = p.decode_s + p.prefill_s;
  p.output_tokens_per_s = static_cast<double>(tokens) / p.total_s;
  p.requests_per_s = static_cast<double>(w.num_prompts) / p.total_s;
  p.total_tokens_per_s =
      static_cast<double>(w.num_prompts * (w.input_len + w.output_len)) / p.total_s;
  return p;
}

}  // namespace ceiling::roofline
