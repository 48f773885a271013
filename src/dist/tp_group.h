// TpGroup: one model run tensor-parallel over N ranks, one thread per rank in this process
// (issue #17). Each rank owns its Ops (CpuOps, or CudaOps on GPU `rank`), its shard of the
// weights (shard.h), its Forward and its KV cache (its heads); the ranks' Ops talk through one
// Communicator each. Threads rather than processes: the scheduler's StepBatch reaches every rank
// by reference (no serialization), a failure in one rank fails the others through the
// communicator, and the CPU tests run the whole group in one process.
//
// A step: run() hands the StepBatch to every rank (each maps the token ids into its vocabulary
// slice), runs the rank's forward, and joins the vocabulary slices of the logits into the full
// [R, V] on the host, where the engine samples them. A rank that throws aborts the communicators,
// so its peers throw too instead of waiting; the group is then broken and every later call
// throws the first error. A watchdog aborts the communicators when a step outlives the timeout.
//
// Thread-safety: one caller thread (the engine thread); the rank threads are internal.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/communicator.h"
#include "engine/forward.h"
#include "engine/ops.h"
#include "engine/ops_factory.h"

namespace ceiling::dist {

struct TpOptions {
  int world = 1;               // N ranks (--tensor-parallel-size)
  std::string device = "cpu";  // "cpu" (CpuCommunicator) or "cuda" (NCCL, rank r on GPU r)
  engine::OpsOptions ops;      // per rank; device_index is set to the rank
  std::chrono::milliseconds timeout = std::chrono::minutes(10);  // a collective's wait at most
  // cuda: all-reduces up to this many bytes take the one-shot P2P kernel instead of NCCL (0: off;
  // `ceiling bench allreduce` measures the crossover).
  size_t custom_all_reduce_max_bytes = 0;
  // Optional: builds rank r's Ops (called on rank r's thread); default engine::make_ops.
  std::function<std::unique_ptr<engine::Ops>(int rank)> make_ops;
};

class TpGroup {
 public:
  // Shards `host` (the whole model's weights) and uploads each shard on its rank's thread.
  // `host` must outlive the group. Throws ceiling::Error for a TP size the model cannot be split
  // by (naming the field), more ranks than GPUs, or any rank's failure.
  TpGroup(const ModelConfig& config, const ModelWeights& host, TpOptions options);
  ~TpGroup();
  TpGroup(const TpGroup&) = delete;
  TpGroup& operator=(const TpGroup&) = delete;

  int world() const { return static_cast<int>(ranks_.size()); }
  const ModelConfig& config() const { return config_; }  // the whole model
  const ModelConfig& rank_config() const;                // rank 0's shard (all ranks alike)
  DType kv_dtype() const;
  std::string device() const { return options_.device; }
  std::string communicator_name() const;
  // The least free / total device memory over the ranks; false on the CPU.
  bool device_memory(size_t* free_bytes, size_t* total_bytes);

  // Allocates each rank's forward workspace and KV cache (num_blocks blocks of its heads).
  void init(engine::ForwardLimits limits, int num_blocks, int block_size);
  int num_blocks() const { return num_blocks_; }

  // Runs one step on every rank. Returns the logits [R, V] (f32, host, row-major), valid until
  // the next run().
  std::span<const float> run(const engine::StepBatch& step);
  // Runs one step on every rank and joins the ranks' vocabulary slices of the logits where they
  // live (an all-gather, then one column copy per rank on rank 0): returns [R, V] (f32) in rank
  // 0's Ops memory — its GPU on cuda, no host round trip — valid until the next step.
  TensorView run_gathered(const engine::StepBatch& step);
  // Rank 0 samples one token per row of `logits` (from run_gathered) with its Ops' sampler, on
  // its own thread; reqs.size() == rows, ids is host memory.
  void sample(const TensorView& logits, std::span<const engine::SampleRequest> reqs, int32_t* ids);
  // Rank 0 copies `logits` (from run_gathered) to host f32.
  void to_host(const TensorView& logits, float* dst);

  // Rank r's Ops (tests; call only between steps).
  engine::Ops& ops(int rank);

 private:
  struct Rank;
  struct Board;  // the rank threads' job board
  // Runs fn(rank) on every rank's thread and waits; the first failure aborts the communicators,
  // breaks the group and is rethrown.
  void on_all(const std::function<void(Rank&)>& fn);
  void worker(Rank& rank);
  void load(const ModelWeights& host);
  void shutdown();  // Ops torn down on their threads, threads joined

  ModelConfig config_;
  TpOptions options_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::vector<std::unique_ptr<engine::Communicator>> comms_;
  std::unique_ptr<Board> board_;
  int num_blocks_ = 0, block_size_ = 0;
  engine::ForwardLimits limits_{};
  std::vector<float> logits_;  // [R, V]
  std::string broken_;         // the first failure; non-empty: the group is unusable
};

}  // namespace ceiling::dist
