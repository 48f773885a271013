// The timed loop behind `ceiling bench latency`, as a client of the Engine: B random prompts of
// N tokens submitted at once (greedy, EOS ignored, M tokens each), stepped to the end. A step is
// timed on the host clock (each step ends when its sampled ids are on the host); ms_per_token is
// the mean of the steps in which all B sequences decode (no prefill chunk beside them), the same
// decode step of batch B the roofline prices. The command (apps/ceiling/cmd_bench_latency.cpp)
// adds the measured ceilings, run info and the JSON.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/ops.h"
#include "hw/kernel_trace.h"

namespace ceiling::dist {
class TpGroup;
}
namespace ceiling::serve {
class Engine;
struct EngineConfig;
}  // namespace ceiling::serve

namespace ceiling::engine {

struct LatencyOptions {
  int batch = 1;         // B sequences decoded together
  int input_len = 128;   // N prompt tokens per sequence
  int output_len = 256;  // M tokens generated per sequence
  int block_size = 16;
  uint64_t seed = 0;      // prompts: token ids uniform in [0, V) from this seed
  int profile_step = -1;  // >= 1: cudaProfilerStart/Stop around this timed decode step (ncu)
  // The projections' format (the bytes a step must move): dense bf16, or fp8 / int4 as the
  // quantized GEMV reads them (kernels/cuda/gemv_quant.h: fp8 + an f32 scale per row, int4 + 4
  // bytes per group of `group_size`).
  WeightFormat weights = WeightFormat::kDense;
  int group_size = 0;
  // The KV cache's element type as the GPU stores it (kBF16, or kF8E4M3 for --kv-cache-dtype fp8):
  // the bytes of the attention's reads and the new tokens' writes.
  DType kv_dtype = DType::kBF16;
  // > 0: CUPTI is attached before the engine (so it sees every kernel load: names), traces the
  // warm-up pass, is detached through the timed pass (its host figures are an untraced run's),
  // and traces this many back-to-back replays of the timed pass's middle decode step
  // (hw/kernel_trace.h). One GPU (CudaOps, graphs) only.
  int kernel_trace_replays = 0;
};

struct LatencyResult {
  double ttft_ms = 0;       // from submission until every sequence has its first token
  int timed_steps = 0;      // pure decode steps of all B sequences, after the first of them
  double decode_ms = 0;     // those steps
  double ms_per_token = 0;  // per decode step (each step adds one token to every sequence)
  double tokens_per_s = 0;  // B / ms_per_token
  double weight_bytes_per_step = 0, kv_bytes_per_step = 0, bytes_per_step = 0;
  double mean_context = 0;     // cached tokens per sequence in the timed steps, mean
  double graph_replay_ms = 0;  // GPU time of one decode step's graph replayed back to back (0:
                               // graphs off or not CUDA): ms_per_token minus this is the host's.
                               // The timed pass's middle pure step (all B sequences).
  // Per timed step, host clock (Engine's phases): scheduling, building the StepBatch, the forward
  // call (a graph replay's launch), sampling (waits for the GPU), outputs. host_ms = all but
  // sample.
  double schedule_ms = 0, build_ms = 0, forward_call_ms = 0, sample_wait_ms = 0, output_ms = 0;
  double host_ms = 0;
  std::optional<hw::TraceSummary> kernel_trace;  // options.kernel_trace_replays > 0
  std::string logits_hash;      // FNV-1a 64 of the first pure decode step's logits (f32 bytes)
  std::vector<int32_t> tokens;  // sequence 0's generated ids
};

// `ops` holds the model's weights. Runs the whole workload twice: once untimed (warm-up: graph
// capture, cuBLASLt plans, clocks) and once timed, with the same prompts. Needs M >= 3.
LatencyResult run_latency(Ops& ops, const LatencyOptions& options);
// The same on a tensor-parallel group (graph_replay_ms stays 0).
LatencyResult run_latency(dist::TpGroup& tp, const LatencyOptions& options);
// Either, given how to build the Engine; `ops` (may be null) is timed for graph replays.
LatencyResult run_latency(
    const ModelConfig& model, Ops* ops, const LatencyOptions& options,
    const std::function<std::unique_ptr<serve::Engine>(const serve::EngineConfig&)>& make_engine);

// Bytes a decode step moves for `batch` sequences with `context` tokens cached each: the
// weights once (embedding: only the B rows looked up; projections in `weights`, the rest bf16),
// and K/V (kv_dtype) of the context + 1 tokens the attention reads plus the new token's written.
double decode_weight_bytes(const ModelConfig& c, int batch,
                           WeightFormat weights = WeightFormat::kDense, int group_size = 0);
double decode_kv_bytes(const ModelConfig& c, int batch, double context,
                       DType kv_dtype = DType::kBF16);

}  // namespace ceiling::engine
