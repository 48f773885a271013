// Where a benchmark run happened: git SHA, GPU, driver and clocks (nvidia-smi, read at the time
// of the call), for the run-level fields of the result JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace ceiling::bench {

// $CEILING_GIT_SHA when set (device runs: the SHA the build was staged from), else `git rev-parse
// --short HEAD` (+ "-dirty" when the tree has changes) in the source tree when git works there,
// else the SHA recorded when the build was configured (suffix "(build)").
std::string git_sha();

// {"sm_mhz", "mem_mhz", "sm_max_mhz", "mem_max_mhz"} from nvidia-smi; empty object if unavailable.
nlohmann::json clocks();

// {"gpu": name, "driver": version, "sm_count", "l2_bytes", "memory_bytes", "compute_capability"}.
nlohmann::json device_info();

}  // namespace ceiling::bench
