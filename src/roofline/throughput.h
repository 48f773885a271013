// The roofline's price of an offline throughput workload (`ceiling bench throughput`, `ceiling
// roofline --throughput`): N requests of I prompt tokens (the first P of them a prefix shared by
// all, computed once with prefix caching) and O output tokens, all submitted at once.
//
// Model (docs/roofline.md, "Throughput"):
//  * Concurrency C: the sequences the scheduler keeps running — min(max_num_seqs, N, (KV tokens −
//    P) / ((I − P) + O)). Equal-length requests submitted together run in lockstep waves, so a
//    wave needs every sequence's full footprint at once (r26: the mean footprint I + O/2 predicted
//    256 sequences where the cache held 215, and the run preempted 144 times at mean batch 218).
//  * Decode: N·O tokens in N·O / C steps of batch C at the mean context I + O/2, each priced by
//    predict_step (layer 2), every sequence's whole context read from HBM. With a shared prefix
//    that is pessimistic: the prefix is the same physical blocks for every sequence of the step,
//    so after the first read they come from L2 (r27: 9.4k tok/s measured, 7.2k predicted; pricing
//    the prefix once, as if L2 were free, predicts 18.8k). Pricing L2 needs an L2-bandwidth
//    ceiling the GPU table does not have yet.
//  * Prefill: N·(I − P) tokens in steps of max_num_batched_tokens, priced as prefill steps of
//    budget / (I − P) sequences of I − P tokens (layer 2); the shared prefix once.
//  * Total time = decode + prefill (a mixed step's prefill chunk and decode rows are priced as if
//    they ran in separate steps); the last wave's falling concurrency is not modelled.
#pragma once

#include <cstdint>
#include <string>

#include "model/config.h"
#include "roofline/kernel_cost.h"
#include "roofline/model_cost.h"

namespace ceiling::roofline {

struct ThroughputWorkload {
  int64_t num_prompts = 1000, input_len = 1024, output_len = 128;
  int64_t prefix_len = 0;  // leading prompt tokens shared by every request (prefix caching on)
  int64_t kv_tokens = 0;   // KV cache capacity; 0: from memory_report
  int64_t max_num_seqs = 256, max_num_batched_tokens = 8192;
};

struct ThroughputPrediction {
  int64_t kv_tokens = 0;
  int64_t concurrency = 0;
  std::string concurrency_limit;  // "kv cache", "max_num_seqs" or "num_prompts"
  double decode_step_s = 0;       // one decode step at the concurrency
  int64_t decode_steps = 0;
  double decode_s = 0, prefill_s = 0, total_s = 0;
  double output_tokens_per_s = 0, requests_per_s = 0, total_tokens_per_s = 0;
};

// Throws ceiling::Error for sizes out of range or a KV cache that holds no request.
ThroughputPrediction predict_throughput(const ModelConfig& m, const GpuCeilings& gpu,
                                        const ThroughputWorkload& w, Scenario base = {});

}  // namespace ceiling::roofline
