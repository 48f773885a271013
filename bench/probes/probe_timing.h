// Timing shared by the probes of this directory: PDL launch configurations and the median time
// of a launch in a chain.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

namespace probes {

// A launch configuration with programmatic dependent launch (each launch may start while its
// predecessor runs and waits in griddepcontrol.wait), as ceiling's kernels are launched.
struct PdlLaunch {
  cudaLaunchAttribute attr{};
  cudaLaunchConfig_t cfg{};
  PdlLaunch(dim3 grid, dim3 block) {
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
  }
  PdlLaunch(const PdlLaunch&) = delete;  // cfg points at attr
  PdlLaunch& operator=(const PdlLaunch&) = delete;
};

// Median over 50 repetitions (after 10 warm-ups) of the µs per step of `chain` calls of
// launch(rep, i) between two events: launch issues one step (one or more kernels).
template <typename Launch>
double median_us(int chain, Launch&& launch) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> t;
  for (int r = 0; r < 60; ++r) {
    cudaEventRecord(a);
    for (int i = 0; i < chain; ++i) launch(r, i);
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    if (r >= 10) t.push_back(ms / chain);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2] * 1e3;
}

}  // namespace probes
