// `ceiling bench kernels`: measures the ceilings, then for every registered case matching the
// filter checks it against the CPU reference, times it, predicts it with the roofline
// (roofline/kernel_cost.h layer 2 over the ceilings just measured), prints a table and writes the
// result JSON (field names are an interface: bench/render_results.py, torch_baseline.py and
// `ceiling roofline --rejoin` read them).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace ceiling::bench {

struct BenchOptions {
  std::string filter = ".*";    // ECMAScript regex searched in "op shape"
  std::string out;              // result JSON path ("" = none)
  int reps = 100;               // timed replays per case (≥ 50 for published runs)
  bool list = false;            // print the matching cases, run nothing
  bool quick_ceilings = false;  // 1 GiB read instead of 4 GiB (smoke runs only)
  uint64_t seed = 0x5eed;       // fixed: benchmark inputs are reproducible
};

// Returns the process exit code: 0 when every case passed its check, 1 otherwise.
int run_kernel_bench(const BenchOptions& opt);

}  // namespace ceiling::bench
