// The offline throughput workload behind `ceiling bench throughput` (as `vllm bench throughput`):
// every request submitted at once, EOS ignored, the engine stepped until all finish.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

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
};

// Submits the workload to `engine` (which must be idle) and steps it to the end.
ThroughputRun run_throughput(Engine& engine, const Workload& w);

}  // namespace ceiling::serve
