// The device's ceilings, measured at the start of every benchmark run (MEASURING.md): streaming
// read bandwidth over a 4 GiB random buffer, the cuBLASLt bf16 GEMM 8192³ rate on random data,
// the per-kernel cost of graph launches (empty kernels, tiny memory-touching kernels), and the
// fixed per-launch cost of grid-wide memory kernels (FixedCosts).
#pragma once

#include <cuda_runtime_api.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "roofline/kernel_cost.h"

namespace ceiling::bench {

// One grid-wide probe kernel timed at several sizes as the harness times a case (a CUDA graph of
// back-to-back launches, PDL unless said otherwise, over buffers that together exceed the L2
// several times, per-launch time = replay time / launches, median of the replays), and the
// least-squares line per-launch time = fixed_us + bytes / gbps through the points.
struct LaunchLine {
  struct Point {
    double bytes = 0;  // moved per launch (read, or read + written)
    int launches = 0;  // per graph replay
    double us = 0;     // per launch
  };
  double fixed_us = 0;  // intercept (may be ≤ 0 if the points are noisy: then not used)
  double gbps = 0;      // 1 / slope, GB/s decimal
  std::vector<Point> points;
  std::string method;
  nlohmann::json points_json() const;
};

struct FixedCosts {
  LaunchLine stream;  // streaming read: 16-byte loads, each CTA a contiguous 16 KiB, then exits
  LaunchLine rw;      // per CTA one 8 KiB row: read, block-reduce Σx², write the row scaled
  // The stream probe launched plainly (no PDL attribute): each launch waits for its predecessor
  // to drain and pays its own ramp, as a library kernel (cuBLASLt) launched without PDL does.
  LaunchLine stream_serial;
  // Diagnostic (not used by the model): how much more the largest stream size costs as the only
  // launch of its graph than as one of a chain, i.e. what a case timed with runs_per_replay = 1
  // pays per run for the graph replay and the missing PDL overlap.
  double single_launch_extra_us = 0;
  std::string single_launch_method;
};

// The three lines at 1, 8, 32, 128 and 256 MiB moved per launch; a fraction of a second. Allocates
// its own buffers (512 MiB, or 4× the L2 if larger). Throws ceiling::Error. Also used by `ceiling
// probe`.
FixedCosts measure_fixed_costs(cudaStream_t stream);

struct MeasuredCeilings {
  double read_gbps = 0;         // streaming read, GB/s (decimal)
  double bf16_gemm_tflops = 0;  // cuBLASLt 8192³, bf16 in, fp32 compute
  double launch_graph_us = 0;   // per empty kernel node of a replayed graph
  double small_kernel_us = 0;   // per tiny memory-touching kernel node of a replayed graph
  double round_trip_us = 0;     // one more dependent cold read in such a kernel
  FixedCosts fixed;  // stream_, rw_ and stream_serial_ fixed_us / gbps / points in the JSON
  nlohmann::json to_json() const;
};

// Takes a few seconds. `read_bytes` ≥ 4 GiB for the published runs. Throws ceiling::Error.
MeasuredCeilings measure_ceilings(cudaStream_t stream, size_t read_bytes = size_t{4} << 30);

// The roofline's ceilings for a run: the GPU table's entry for `device` (bench::device_info(),
// matched by name; datasheet fallbacks for an unknown GPU) with the rates, launch cost and floor
// measured in this run (efficiency factors 1), and the grid-wide probes where positive. Built by
// roofline::ceilings_from_bench_run from to_json(), as `ceiling roofline --rejoin` rebuilds them
// from the result file.
roofline::GpuCeilings gpu_ceilings(const nlohmann::json& device, const MeasuredCeilings& m);

}  // namespace ceiling::bench
