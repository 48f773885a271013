// CpuCommunicator: the Communicator of ranks that are threads of one process, on host memory
// (engine/communicator.h). The reference implementation and the one the CPU tests run.
//
// Every collective is two rendezvous on a shared group: each rank posts its buffer and what it
// is calling; once all have arrived, each checks that the calls match, reads every peer's buffer
// (summing in rank order, so every rank gets the same bits), then waits until all are done
// reading before writing its own output. A rank that waits longer than the group's timeout, a
// mismatched call, or abort() fails the group: every waiting and later call throws.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "engine/communicator.h"

namespace ceiling::dist {

struct CpuGroup;  // the shared rendezvous (cpu_communicator.cpp)

class CpuCommunicator final : public engine::Communicator {
 public:
  CpuCommunicator(std::shared_ptr<CpuGroup> group, int rank);
  ~CpuCommunicator() override;

  std::string name() const override { return "cpu"; }
  int rank() const override { return rank_; }
  int world() const override;

  // f32 (and bf16: summed in f32, rounded once) host views.
  void all_reduce_sum(const TensorView& x, void* stream) override;
  void all_gather(const TensorView& in, const TensorView& out, void* stream) override;
  void broadcast(const TensorView& x, int root, void* stream) override;
  void barrier() override;
  void abort(const std::string& why) override;

 private:
  std::shared_ptr<CpuGroup> group_;
  int rank_;
};

// `world` communicators sharing one group; rank r is element r. A rank waiting longer than
// `timeout` for its peers fails the group.
std::vector<std::unique_ptr<engine::Communicator>> make_cpu_communicators(
    int world, std::chrono::milliseconds timeout = std::chrono::minutes(10));

}  // namespace ceiling::dist
