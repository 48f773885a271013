// The device's ceilings, measured at the start of every benchmark run (MEASURING.md): streaming
// read bandwidth over a 4 GiB random buffer, the cuBLASLt bf16 GEMM 8192³ rate on random data,
// and the per-kernel cost of graph launches (empty kernels, tiny memory-touching kernels).
#pragma once

#include <cuda_runtime_api.h>

#include <nlohmann/json.hpp>
#include <string>

#include "roofline/kernel_cost.h"

namespace ceiling::bench {

struct MeasuredCeilings {
  double read_gbps = 0;         // streaming read, GB/s (decimal)
  double bf16_gemm_tflops = 0;  // cuBLASLt 8192³, bf16 in, fp32 compute
  double launch_graph_us = 0;   // per empty kernel node of a replayed graph
  double small_kernel_us = 0;   // per tiny memory-touching kernel node of a replayed graph
  double round_trip_us = 0;     // one more dependent cold read in such a kernel
  nlohmann::json to_json() const;
};

// Takes a few seconds. `read_bytes` ≥ 4 GiB for the published runs. Throws ceiling::Error.
MeasuredCeilings measure_ceilings(cudaStream_t stream, size_t read_bytes = size_t{4} << 30);

// The roofline's ceilings for a run: the GPU table's entry for `device` (bench::device_info(),
// matched by name; datasheet fallbacks for an unknown GPU) with the rates, launch cost and floor
// measured in this run (efficiency factors 1).
roofline::GpuCeilings gpu_ceilings(const nlohmann::json& device, const MeasuredCeilings& m);

}  // namespace ceiling::bench
