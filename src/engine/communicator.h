// The collectives a tensor-parallel forward needs, one Communicator per rank (issue #17).
// Implementations: dist::CpuCommunicator (ranks are threads of one process, host memory; the
// reference and the CI path) and dist::NcclCommunicator (one GPU per rank, device memory, on the
// rank's CUDA stream; graph-capturable).
//
// Contract, every call: a collective; every rank of the group makes the same calls in the same
// order with the same sizes and dtypes (a mismatch or a dead peer makes every rank throw
// ceiling::Error rather than hang). Views are contiguous and live on the communicator's device;
// `stream` is the backend's stream (CUDA: the cudaStream_t of the rank's Ops; CPU: null).
// Results are identical on every rank (the CPU one sums in rank order).
//
// Thread-safety: one thread per rank uses its own Communicator; abort() may come from anywhere.
#pragma once

#include <string>

#include "core/tensor.h"

namespace ceiling::engine {

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual std::string name() const = 0;  // "cpu", "nccl", "custom"
  virtual int rank() const = 0;
  virtual int world() const = 0;

  // x [n] <- Σ over ranks of x [n], in place.
  virtual void all_reduce_sum(const TensorView& x, void* stream) = 0;
  // out [world·n] = the ranks' in [n] concatenated in rank order.
  virtual void all_gather(const TensorView& in, const TensorView& out, void* stream) = 0;
  // x [n] <- x of rank `root`.
  virtual void broadcast(const TensorView& x, int root, void* stream) = 0;
  // Returns when every rank has called it (host side; queued device work is not waited for).
  virtual void barrier() = 0;
  // Fails the group: pending and later calls on every rank throw, naming `why`.
  virtual void abort(const std::string& why) = 0;
};

}  // namespace ceiling::engine
