#include "serve/latency_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "core/status.h"
#include "dist/tp_group.h"
#include "serve/engine.h"
#ifdef HAVE_CEILING_ENGINE_CUDA
#include <cuda_profiler_api.h>

#include "core/check.h"
#include "engine/cuda/cuda_ops.h"
#endif

namespace ceiling::engine {
namespace {

std::string fnv1a64(const std::vector<float>& v) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* b = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t i = 0; i < v.size() * sizeof(float); ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  return fmt::format("fnv1a64:{:016x}", h);
}

void profiler(bool start) {
#ifdef HAVE_CEILING_ENGINE_CUDA
  CEILING_CUDA_CHECK(start ? cudaProfilerStart() : cudaProfilerStop());
#else
  (void)start;
#endif
}

double graph_replay_ms(Ops& ops) {
#ifdef HAVE_CEILING_ENGINE_CUDA
  if (auto* cuda = dynamic_cast<CudaOps*>(&ops); cuda && cuda->graph_replayable())
    return cuda->time_graph_replays(50);
#else
  (void)ops;
#endif
  return 0;
}

// The graph of the step just run, replayed `replays` times under the tracer, summarized.
hw::TraceSummary trace_graph_replays(Ops& ops, hw::KernelTracer& tracer, int replays, int batch) {
#ifdef HAVE_CEILING_ENGINE_CUDA
  auto* cuda = dynamic_cast<CudaOps*>(&ops);
  CEILING_ENSURE(cuda && cuda->graph_replayable(),
                 "bench latency --kernel-trace: the decode step of {} sequences did not run as a "
                 "CUDA graph (graphs off, or more sequences than the largest graph bucket)",
                 batch);
  tracer.resume();
  tracer.clear();
  cuda->time_graph_replays(replays);
  std::vector<hw::KernelRecord> records = tracer.collect();
  tracer.pause();
  return hw::summarize_replays(std::move(records), replays, ops.config().num_layers);
#else
  (void)ops;
  (void)tracer;
  (void)replays;
  (void)batch;
  fail("bench latency --kernel-trace: this build has no CUDA backend");
#endif
}

using Clock = std::chrono::steady_clock;
double ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// One pass over the workload; fills `r` when `timed`.
void run_pass(Ops* ops, serve::Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
              const LatencyOptions& o, bool timed, hw::KernelTracer* tracer, LatencyResult& r) {
  const int B = o.batch;
  serve::RequestParams p;
  p.sampling.temperature = 0;
  p.ignore_eos = true;
  p.max_tokens = o.output_len;
  std::vector<int64_t> ids;
  const Clock::time_point t0 = Clock::now();
  for (const auto& prompt : prompts) ids.push_back(engine.add_request(prompt, p));
  int first = 0, pure = 0;
  double pure_ms = 0, ctx_sum = 0;
  double phase[5] = {0, 0, 0, 0, 0};
  std::vector<int32_t> tokens0;
  while (engine.has_unfinished()) {
    const bool all_decode = first == B && engine.num_running() == B;
    const bool profile = timed && all_decode && pure == o.profile_step;
    if (profile) profiler(true);
    const serve::EngineStats before = engine.stats();
    const Clock::time_point s0 = Clock::now();
    const std::vector<serve::RequestOutput> outs = engine.step();
    const double step_ms = ms(Clock::now() - s0);
    if (profile) profiler(false);
    for (const serve::RequestOutput& out : outs) {
      if (out.completion_tokens == 1 && !out.new_tokens.empty()) {
        if (++first == B && timed) r.ttft_ms = ms(Clock::now() - t0);
      }
      if (out.id == ids[0])
        tokens0.insert(tokens0.end(), out.new_tokens.begin(), out.new_tokens.end());
    }
    if (!all_decode || static_cast<int>(outs.size()) != B) continue;
    if (pure++ == 0) {  // the first pure decode step is not timed: it hashes the logits
      if (timed) {
        r.logits_hash = fnv1a64(engine.runner().last_logits_host());
      }
      continue;
    }
    pure_ms += step_ms;
    // Halfway through, after this step (timed above): its graph — all B sequences, the mean
    // context — replayed back to back, and traced. Its last steps can be smaller batches (the
    // prompts' prefill spans steps), so this is not done after the loop. A replay recomputes
    // the same step (same KV slots, values and logits): the run's state is unchanged.
    if (timed && ops && pure == std::max(2, o.output_len / 2)) {
      r.graph_replay_ms = graph_replay_ms(*ops);
      if (tracer) r.kernel_trace = trace_graph_replays(*ops, *tracer, o.kernel_trace_replays, B);
    }
    const serve::EngineStats& after = engine.stats();
    phase[0] += after.schedule_s - before.schedule_s;
    phase[1] += after.build_s - before.build_s;
    phase[2] += after.forward_s - before.forward_s;
    phase[3] += after.sample_s - before.sample_s;
    phase[4] += after.output_s - before.output_s;
    ctx_sum += outs[0].prompt_tokens + outs[0].completion_tokens - 2;  // cached before
  }
  if (!timed) return;
  r.timed_steps = pure - 1;
  r.decode_ms = pure_ms;
  r.mean_context = r.timed_steps > 0 ? ctx_sum / r.timed_steps : 0;
  r.tokens = std::move(tokens0);
  if (r.timed_steps > 0) {
    const double k = 1e3 / r.timed_steps;
    r.schedule_ms = phase[0] * k;
    r.build_ms = phase[1] * k;
    r.forward_call_ms = phase[2] * k;
    r.sample_wait_ms = phase[3] * k;
    r.output_ms = phase[4] * k;
    r.host_ms = r.schedule_ms + r.build_ms + r.forward_call_ms + r.output_ms;
  }
}

}  // namespace

double decode_weight_bytes(const ModelConfig& c, int batch, WeightFormat weights, int group_size) {
  const double H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const double Q = c.q_dim(), KV = c.kv_dim(), D = c.head_dim;
  // One projection W [N, K] in its format.
  const auto proj = [&](double N, double K) {
    switch (weights) {
      case WeightFormat::kFp8:
        return N * K + 4 * N;
      case WeightFormat::kInt4:
        return N * K / 2 + 4 * N * (K / group_size);
      case WeightFormat::kDense:
        break;
    }
    return 2 * N * K;
  };
  double layer = proj(Q + 2 * KV, H) + proj(H, Q) + proj(2 * I, H) + proj(H, I) + 2 * 2 * H;
  if (c.attention_bias) layer += 2 * (Q + 2 * KV);
  if (c.qk_norm) layer += 2 * 2 * D;
  // Layers, final norm, lm_head (the whole [V, H], tied or not), B embedding rows; bf16.
  return c.num_layers * layer + 2.0 * (H + V * H + batch * H);
}

double decode_kv_bytes(const ModelConfig& c, int batch, double context, DType kv_dtype) {
  // K and V of one token, all layers.
  const double per_token =
      2.0 * static_cast<double>(dtype_bytes(kv_dtype, size_t{1})) * c.num_layers * c.kv_dim();
  return batch * per_token * (context + 2.0);  // read context + 1 tokens (new one too), write 1
}

LatencyResult run_latency(Ops& ops, const LatencyOptions& o) {
  return run_latency(ops.config(), &ops, o, [&ops](const serve::EngineConfig& ec) {
    return std::make_unique<serve::Engine>(ops, ec);
  });
}

LatencyResult run_latency(dist::TpGroup& tp, const LatencyOptions& o) {
  return run_latency(tp.config(), nullptr, o, [&tp](const serve::EngineConfig& ec) {
    return std::make_unique<serve::Engine>(tp, ec);
  });
}

LatencyResult run_latency(
    const ModelConfig& c, Ops* ops, const LatencyOptions& o,
    const std::function<std::unique_ptr<serve::Engine>(const serve::EngineConfig&)>& make_engine) {
  CEILING_ENSURE(o.batch >= 1 && o.input_len >= 1 && o.output_len >= 3 && o.block_size >= 1,
                 "bench latency: need batch >= 1, input_len >= 1, output_len >= 3, block_size >= "
                 "1 (got {}, {}, {}, {})",
                 o.batch, o.input_len, o.output_len, o.block_size);
  CEILING_ENSURE(o.kernel_trace_replays == 0 || ops != nullptr,
                 "bench latency --kernel-trace: one GPU only (no tensor parallelism)");
  // Before the engine: graphs are captured under the tracer (hw/kernel_trace.h).
  std::unique_ptr<hw::KernelTracer> tracer;
  if (o.kernel_trace_replays > 0) tracer = hw::KernelTracer::start();
  const int B = o.batch, N = o.input_len;
  serve::EngineConfig ec;
  ec.max_model_len = N + o.output_len;
  ec.max_num_seqs = B;
  // Whole prompts in as few steps as the workspace allows (chunks beyond that).
  ec.max_num_batched_tokens =
      static_cast<int>(std::max<int64_t>({std::min<int64_t>(int64_t{B} * N, 16384), N, B}));
  ec.block_size = o.block_size;
  ec.num_kv_blocks = B * ((ec.max_model_len + o.block_size - 1) / o.block_size);
  ec.enable_prefix_caching = false;  // both passes use the same prompts
  const std::unique_ptr<serve::Engine> engine_ptr = make_engine(ec);
  serve::Engine& engine = *engine_ptr;

  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<int32_t> tok(0, c.vocab_size - 1);
  std::vector<std::vector<int32_t>> prompts(B, std::vector<int32_t>(N));
  for (auto& p : prompts)
    for (auto& t : p) t = tok(rng);

  LatencyResult r;
  run_pass(ops, engine, prompts, o, /*timed=*/false, nullptr, r);
  // The warm-up loaded every kernel under the tracer (names); paused, CUPTI is detached, so the
  // timed pass costs the host what an untraced one does (hw/kernel_trace.h).
  if (tracer) tracer->pause();
  run_pass(ops, engine, prompts, o, /*timed=*/true, tracer.get(), r);
  CEILING_ENSURE(!tracer || r.kernel_trace,
                 "bench latency --kernel-trace: no decode step of all {} sequences to trace "
                 "(graphs on? --output-len >= 3?)",
                 B);
  CEILING_ENSURE(r.timed_steps > 0, "bench latency: no decode step of all {} sequences ran", B);
  r.ms_per_token = r.decode_ms / r.timed_steps;
  r.tokens_per_s = B * 1000.0 / r.ms_per_token;
  r.weight_bytes_per_step = decode_weight_bytes(c, B, o.weights, o.group_size);
  r.kv_bytes_per_step = decode_kv_bytes(c, B, r.mean_context, o.kv_dtype);
  r.bytes_per_step = r.weight_bytes_per_step + r.kv_bytes_per_step;
  return r;
}

}  // namespace ceiling::engine
