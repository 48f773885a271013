// NcclCommunicator: one GPU per rank, ranks are threads of this process (TpGroup), NCCL
// collectives on the rank's CUDA stream (engine/communicator.h). They are graph-capturable: a
// CudaOps decode graph records them like its kernels (NCCL supports stream capture).
//
// Start-up (make_nccl_communicators): GPUs 0..N-1 must exist; NVLink SHARP / multicast is kept
// off (NCCL_NVLS_ENABLE=0: no cuMulticastCreate); the communicators are created non-blocking
// (ncclConfig_t.blocking = 0) in one group and polled with a deadline, so a start-up that cannot
// finish fails with a one-line error instead of hanging. Every later call that NCCL reports as
// in progress is polled the same way; TpGroup's watchdog calls abort() (ncclCommAbort, which
// also ends kernels waiting for a dead peer) when a step outlives the timeout.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/communicator.h"

namespace ceiling::dist {

struct NcclState;  // ncclComm_t and the rank's barrier buffer (nccl_communicator.cpp)

class NcclCommunicator final : public engine::Communicator {
 public:
  NcclCommunicator(std::unique_ptr<NcclState> state, int rank, int world,
                   std::chrono::milliseconds timeout);
  ~NcclCommunicator() override;

  std::string name() const override;  // "nccl", or "nccl+custom<=BYTES"
  int rank() const override { return rank_; }
  int world() const override { return world_; }

  // f32, bf16 and f16 device views; `stream` is a cudaStream_t on this rank's GPU.
  void all_reduce_sum(const TensorView& x, void* stream) override;
  void all_gather(const TensorView& in, const TensorView& out, void* stream) override;
  void broadcast(const TensorView& x, int root, void* stream) override;
  void barrier() override;
  void abort(const std::string& why) override;

  // The two all-reduce paths (all_reduce_sum picks by size; the benchmark times each).
  void all_reduce_nccl(const TensorView& x, void* stream);
  // The one-shot P2P kernel (kernels/cuda/all_reduce.h); throws unless the group has it and x
  // fits its staging buffers.
  void all_reduce_custom(const TensorView& x, void* stream);
  // Messages up to this many bytes take the custom path (0: it is off).
  size_t custom_max_bytes() const;

 private:
  void wait(const char* what);  // polls ncclCommGetAsyncError until done, with the deadline
  void check_usable() const;

  std::unique_ptr<NcclState> state_;
  int rank_, world_;
  std::chrono::milliseconds timeout_;
  std::atomic<bool> aborted_{false};
  std::string why_;
};

// Communicators of ranks 0..world-1 on GPUs 0..world-1. Throws ceiling::Error when the machine
// has fewer GPUs, or NCCL cannot start within `timeout`. The calling thread's current device is
// left as it was. custom_max_bytes > 0: all-reduces up to that size take the one-shot P2P kernel
// (`ceiling bench allreduce` measures where it beats NCCL), when every pair of GPUs has P2P
// access; otherwise (and for larger messages) NCCL.
std::vector<std::unique_ptr<engine::Communicator>> make_nccl_communicators(
    int world, std::chrono::milliseconds timeout, size_t custom_max_bytes = 0);

// Multi-process groups (dist/launch.h): process 0 makes the unique id and sends it to the others
// (dist/control.h); each process then makes the communicators of its global ranks
// [first, first + local) on its GPUs 0..local-1. The custom all-reduce needs every rank in one
// process; across processes the group is NCCL's alone.
struct NcclId {
  std::array<uint8_t, 128> bytes{};
};
NcclId nccl_unique_id();
std::vector<std::unique_ptr<engine::Communicator>> make_nccl_communicators(
    int world, int first, int local, const NcclId& unique_id, std::chrono::milliseconds timeout,
    size_t custom_max_bytes = 0);

}  // namespace ceiling::dist
