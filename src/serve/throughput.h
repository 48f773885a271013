// The offline throughput workload behind `ceiling bench throughput` (as `vllm bench throughput`):
// every request submitted at once, EOS ignored, the engine stepped until all finish.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "hw/kernel_trace.h"
#include "serve/engine.h"

namespace ceiling::serve {

struct Workload {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<RequestParams> params;  // one per prompt
};

// `random`: num_prompts prompts of input_len token ids uniform in [0, vocab) from `seed`.
// `prefix-shared`: the same, but the first prefix_len ids are one prefix shared by all.
// Each request generates output_len tokens, greedy, EOS ignored.
Workload random_workload(int vocab, int num_prompts, int input_len, int output_len, int prefix_len,
                         uint64_t seed);

// Steps of one kind and their host-clock time (each step() waits for its device work).
struct StepTimes {
  int64_t steps = 0;
  double seconds = 0;
  int64_t tokens = 0;  // scheduled tokens (a decode: 1 a sequence; a prefill chunk: its length)
};

struct ThroughputRun {
  double elapsed_s = 0;
  int64_t num_requests = 0, prompt_tokens = 0, output_tokens = 0;
  double mean_batch_size = 0;  // sequences per step
  int64_t steps = 0, preemptions = 0;
  double prefix_cache_hit_rate = 0;  // hit tokens / queried tokens
  double peak_kv_usage = 0;
  double schedule_s = 0, build_s = 0, forward_s = 0, sample_s = 0, output_s = 0;  // EngineStats
  std::string outputs_hash;  // FNV-1a 64 over every request's output ids, in request order
  std::vector<std::vector<int32_t>> outputs;
  // Steps whose every sequence decoded one token, and steps that carried prefill chunks (with or
  // without decodes beside them).
  StepTimes decode_steps, prefill_steps;
  // With a tracer: the kernels of one step that carried prefill chunks among at least half of
  // max_num_seqs sequences (the steady state of a long run): its index in the run, sequences and
  // scheduled tokens.
  std::optional<hw::TraceSummary> prefill_step_trace;
  int traced_step = -1, traced_seqs = 0, traced_tokens = 0;
};

// Submits the workload to `engine` (which must be idle) and steps it to the end. `tracer`
// (paused; may be null): resumed around the steps that may carry a prefill chunk at steady state
// until one does, which is summarized into prefill_step_trace.
ThroughputRun run_throughput(Engine& engine, const Workload& w, hw::KernelTracer* tracer = nullptr);

}  // namespace ceiling::serve
