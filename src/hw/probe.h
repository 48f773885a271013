// `ceiling probe`: measures the local GPU's ceilings (hw/measured.h) — streaming read, device-to-
// device copy, cuBLASLt bf16 and fp8 GEMMs on random data, empty-kernel launch cost eager and from
// a CUDA graph, and a small-kernel latency floor. Built only with CUDA (CEILING_HW_PROBE defined).
// Runs on device 0; the caller's GPU must be otherwise idle for the numbers to mean anything.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "hw/measured.h"

namespace ceiling::hw {

struct ProbeOptions {
  size_t read_bytes = size_t{4} << 30;  // streaming-read buffer (>= 4 GiB for the real probe)
  size_t copy_bytes = size_t{2} << 30;  // each of the two copy buffers
  int gemm_n = 8192;                    // M = N = K
  int repeats = 20;                     // timed repetitions per measurement (median taken)
  int launches = 20000;                 // empty kernels per eager launch-cost measurement
  int graph_nodes = 1000;               // kernels per captured graph
};

// Throws ceiling::Error when there is no CUDA device or a CUDA/cuBLASLt call fails.
MeasuredCeilings run_probe(const ProbeOptions& opt,
                           const std::function<void(const std::string&)>& progress = {});

}  // namespace ceiling::hw
