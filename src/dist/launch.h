// Which part of a tensor-parallel group this process runs (issue #17). One process per host (or
// per GPU set): process p of P drives tensor-parallel ranks [p·G, (p+1)·G) on its local GPUs
// 0..G-1 (CUDA_VISIBLE_DEVICES picks them), G = N / P for --tensor-parallel-size N. Process 0
// runs the scheduler (and the server); the others are workers that run each step it sends.
//
// Read from the environment the usual launchers set:
//   RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT      (torchrun style, or set by hand)
//   OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE        (mpirun)
//   SLURM_PROCID / SLURM_NTASKS                        (srun)
// MASTER_ADDR and MASTER_PORT are always needed when there is more than one process.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace ceiling::dist {

struct ProcessGroup {
  int rank = 0;  // this process
  int size = 1;  // processes
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool multi() const { return size > 1; }
};

// The process group the environment describes (size 1 when none of the variables is set).
// `getenv` is injectable for tests. Throws ceiling::Error naming the variable that is malformed
// or missing (e.g. WORLD_SIZE=2 without MASTER_ADDR).
ProcessGroup process_group_from_env(
    const std::function<const char*(const char*)>& getenv_fn = nullptr);

// Checks a group against --tensor-parallel-size N: N divisible by the process count. Returns the
// ranks per process.
int ranks_per_process(const ProcessGroup& g, int world);

}  // namespace ceiling::dist
