// Timing of one benchmark case: CUDA graphs of consecutive runs over rotating input sets, CUDA
// events around each graph replay, warm-up, then median/min/max over the replays.
//
// Method: a first estimate of one run's time sets `per_rep` (runs per replay) so a replay lasts
// ≥ min_rep_us: what gets measured is a kernel in a stream of kernels (launch gaps inside a graph,
// with PDL overlap, as in the engine's decode graph), not the cost of launching a graph. Each
// replay carries a few µs of graph launch; at 300 µs that is ≤ 1 % of a run (runs before
// 2026-11-23 r9 used 30 µs, so a kernel of ≥ 30 µs ran alone in its replay and carried it all). Runs cycle through the case's `copies` sets, which together exceed the L2 several
// times, so every run reads its inputs from device memory. Reported times are per run.
#pragma once

#include <cuda_runtime_api.h>

#include "bench/case.h"

namespace ceiling::bench {

struct TimingOptions {
  int reps = 100;          // timed graph replays (≥ 50 for the published runs)
  int warmup = 5;          // untimed replays of every graph
  double min_rep_us = 300;  // a replay at least this long (more runs per replay when shorter)
  int max_per_rep = 256;
};

struct Timing {
  double median_ms = 0, min_ms = 0, max_ms = 0;  // per run
  int per_rep = 1;
  int reps = 0;
};

// How many input sets rotate so that they cover `rotate_bytes` (at most `max_copies`).
int copies_for(size_t set_bytes, size_t rotate_bytes, int max_copies = 4096);

// The case must be set up with `copies` sets. Throws ceiling::Error if a run fails.
Timing time_case(KernelCase& c, int copies, const TimingOptions& opt, cudaStream_t stream);

}  // namespace ceiling::bench
