// TpGroup: one model run tensor-parallel over N ranks (issue #17). Each rank owns its Ops
// (CpuOps, or CudaOps on its GPU), its shard of the weights (shard.h), its Forward and its KV
// cache (its heads); the ranks' Ops talk through one Communicator each.
//
// In one process (the default) the ranks are threads: rank 0 runs on the caller's thread (the
// engine thread, which also samples), ranks 1..N-1 on threads of their own that spin briefly
// for the next step before they sleep, so a decode step's hand-off costs no wake-up. Threads
// rather than processes: the scheduler's StepBatch reaches every rank by reference, a failure in
// one rank fails the others through the communicator, and the CPU tests run the whole group in
// one process. Across hosts (dist/launch.h: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) process p
// holds ranks [p·G, (p+1)·G) the same way; process 0 (the driver) sends every group call and
// step to the others over dist/control.h, and they run it in serve_worker().
//
// A step: run() / run_gathered() hand the StepBatch to every rank (each maps the token ids into
// its vocabulary slice), run the rank's forward, and join the vocabulary slices of the logits. A
// rank that throws aborts the communicators, so its peers throw too instead of waiting; the group
// is then broken and every later call throws the first error. A watchdog thread aborts the
// communicators when a call outlives the timeout; a worker process that fails or dies does the
// same on the driver.
//
// Thread-safety: one caller thread (the engine thread); the rank threads are internal.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dist/launch.h"
#include "engine/communicator.h"
#include "engine/forward.h"
#include "engine/ops.h"
#include "engine/ops_factory.h"

namespace ceiling::dist {

enum class MsgType : uint32_t;  // dist/control.h
struct Message;

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
  // This process's place in a multi-process group (size 1: every rank is here). Needs cuda.
  ProcessGroup process;
  // How long an idle rank thread (and the caller waiting for them) spins before it sleeps;
  // unset: 20 ms on cuda (longer than a decode step's host gap), 0 on cpu (the cores compute).
  std::optional<std::chrono::microseconds> spin;
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

  int world() const { return options_.world; }
  int local_ranks() const { return static_cast<int>(ranks_.size()); }
  // Process 0 of a multi-process group, or the only process: the one that schedules and samples.
  bool is_driver() const { return options_.process.rank == 0; }
  // A worker process (not the driver): runs the group calls and steps the driver sends until it
  // stops the group (returns) or fails (throws, naming the cause, e.g. the driver's exit).
  void serve_worker();
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
  // the next run(). One process only.
  std::span<const float> run(const engine::StepBatch& step);
  // Runs one step on every rank; the forward joins the ranks' vocabulary slices of the logits
  // where they live (Ops::join_logits: an all-gather, then one column copy per rank on rank 0,
  // inside the decode graph on cuda): returns [R, V] (f32) in rank 0's Ops memory — its GPU on
  // cuda, no host round trip — valid until the next step. (In a worker process: an empty view.)
  TensorView run_gathered(const engine::StepBatch& step);
  // Rank 0 samples one token per row of `logits` (from run_gathered) with its Ops' sampler, on
  // its own thread; reqs.size() == rows, ids is host memory.
  void sample(const TensorView& logits, std::span<const engine::SampleRequest> reqs, int32_t* ids);
  // Rank 0 copies `logits` (from run_gathered) to host f32.
  void to_host(const TensorView& logits, float* dst);

  // This process's rank r's Ops, r < local_ranks() (tests; call only between steps).
  engine::Ops& ops(int rank);

 private:
  struct Rank;
  struct Board;   // the rank threads' job board and the watchdog's clock
  struct Remote;  // the driver's links to the worker processes, or a worker's to the driver
  // Runs fn(rank) on every local rank (rank 0 here, the others on their threads) and waits; the
  // first failure aborts the communicators, breaks the group and is rethrown.
  void on_all(const std::function<void(Rank&)>& fn);
  // Runs fn on the first local rank only, on this thread, with the same failure handling.
  void on_first(const std::function<void(Rank&)>& fn);
  void run_job(Rank& rk, const std::function<void(Rank&)>& fn);
  void fail_group(const std::string& why);  // aborts every local communicator
  // The driver: sends type/payload to every worker process, then hands each reply (in process
  // order) to on_reply; a worker's error or silence past the timeout throws.
  void ask_workers(MsgType type, const std::vector<uint8_t>& payload,
                   const std::function<void(const Message&)>& on_reply);
  void worker(Rank& rank);
  void watchdog();
  void connect();  // the multi-process handshake; makes comms_
  void load(const ModelWeights& host);
  void local_init(engine::ForwardLimits limits, int num_blocks, int block_size);
  bool local_device_memory(size_t* free_bytes, size_t* total_bytes);
  TensorView local_run_gathered(const engine::StepBatch& step);
  void shutdown();  // Ops torn down on their threads, threads joined

  ModelConfig config_;
  TpOptions options_;
  std::vector<std::unique_ptr<Rank>> ranks_;  // this process's ranks
  std::vector<std::unique_ptr<engine::Communicator>> comms_;
  std::unique_ptr<Board> board_;
  std::unique_ptr<Remote> remote_;
  int num_blocks_ = 0, block_size_ = 0;
  engine::ForwardLimits limits_{};
  std::vector<float> logits_;  // [R, V]
  std::string broken_;         // the first failure; non-empty: the group is unusable
};

}  // namespace ceiling::dist
