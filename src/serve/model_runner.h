// The model runner: owns the forward's workspace and the one KV cache of the engine, turns a
// SchedulerOutput into a StepBatch, runs it and samples one token per sequence that wants one.
//
// Sizing at start-up (RunnerConfig): the forward takes max_num_batched_tokens tokens and
// max_num_seqs logits rows per step. The KV cache has num_kv_blocks blocks when that is set;
// otherwise, on a GPU, what gpu_memory_utilization of the device leaves after the weights, the
// workspace and a reserve for the sampler and kernel workspaces (see kv_blocks_from_memory);
// on the CPU, enough for max_num_seqs sequences of max_model_len, capped at 4 GiB (vLLM's CPU
// default KV space). Block tables are sized to max_model_len (ceil(max_model_len/block_size)).
//
// Tensor parallel (the TpGroup constructor): the group's ranks each hold a shard, a forward and
// a KV cache of their heads with the same number of blocks (sized from the least free device
// memory and the rank's share of a block); the logits of the full vocabulary come back on the
// host and are sampled there with the reference sampler (kernels/cpu/sampling.h).
//
// CUDA graphs: the Ops captures decode steps per batch bucket (CudaOps; see cuda_ops.h), so a
// decode step of S sequences replays the graph of the bucket >= S; enforce_eager turns it off.
// Thread-safety: the engine thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/forward.h"
#include "engine/ops.h"
#include "serve/scheduler.h"

namespace ceiling::dist {
class TpGroup;
}

namespace ceiling::serve {

struct RunnerConfig {
  int max_model_len = 2048;
  int max_num_seqs = 256;
  int max_num_batched_tokens = 8192;
  int block_size = 16;
  int num_kv_blocks = 0;  // 0: from memory
  double gpu_memory_utilization = 0.90;
};

// Bytes of one KV block (all layers, K and V) in the Ops' KV dtype.
int64_t kv_block_bytes(const ModelConfig& c, int block_size, DType kv_dtype);

class ModelRunner {
 public:
  // `ops` holds the model's weights and outlives the runner. Throws ceiling::Error when the cache
  // cannot hold one sequence of max_model_len tokens.
  ModelRunner(engine::Ops& ops, const RunnerConfig& config);
  // Tensor parallel over `tp`'s ranks (it outlives the runner).
  ModelRunner(dist::TpGroup& tp, const RunnerConfig& config);
  ~ModelRunner();

  // The single Ops (throws under tensor parallelism).
  engine::Ops& ops();
  // The whole model (under tensor parallelism too).
  const ModelConfig& model_config() const { return model_; }
  int tensor_parallel_size() const;
  const RunnerConfig& config() const { return config_; }
  int num_blocks() const { return kv_.num_blocks; }
  int max_blocks_per_seq() const { return max_blocks_; }
  // All ranks together.
  int64_t kv_bytes() const { return kv_bytes_; }
  const std::string& sizing_note() const { return sizing_note_; }

  // Runs the step and returns, per entry of out.seqs, the sampled id (-1 where the entry wants no
  // logits). With any sequence asking for logprobs, fills (*logprobs)[i] for those entries.
  std::vector<int32_t> run(const SchedulerOutput& out, std::vector<TokenLogprob>* logprobs);

  // Host seconds of the last run(): building the StepBatch, the forward call, sampling.
  struct Timing {
    double build_s = 0, forward_s = 0, sample_s = 0;
  };
  const Timing& last_timing() const { return timing_; }

  // The logits [R, V] of the last step (Ops memory; host memory under tensor parallelism),
  // valid until the next step.
  const TensorView& last_logits() const { return logits_; }
  // The same, copied to the host.
  std::vector<float> last_logits_host();

 private:
  // Checks the config, sizes the cache; returns its blocks.
  int size_cache(const ModelConfig& device_model, DType kv_dtype,
                 const std::function<bool(size_t*, size_t*)>& device_memory);
  int kv_blocks_from_memory(const ModelConfig& device_model, DType kv_dtype,
                            const std::function<bool(size_t*, size_t*)>& device_memory);

  engine::Ops* ops_ = nullptr;   // TP = 1
  dist::TpGroup* tp_ = nullptr;  // TP > 1
  ModelConfig model_;
  RunnerConfig config_;
  std::unique_ptr<engine::Forward> forward_;
  int max_blocks_ = 0;
  int64_t kv_bytes_ = 0;
  std::string sizing_note_;
  engine::KvCache kv_;
  TensorView logits_;
  std::vector<float> host_logits_;
  Timing timing_;  // logprob rows
};

}  // namespace ceiling::serve
