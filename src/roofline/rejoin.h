// The kernel benchmark's side of layer 2, in one place: the ceilings a `ceiling bench kernels` run
// predicts with (built from the run's own measurements), and the re-prediction of a finished
// run's result file with the current model (`ceiling roofline --rejoin FILE.json`), so a change
// to kernel_cost.cpp can be judged against committed measurements without a GPU.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "roofline/kernel_cost.h"

namespace ceiling::roofline {

// The ceilings of a benchmark run: the GPU table's entry for `device` (the run's "device" object,
// matched by its "gpu" name; fallbacks for an unknown GPU) with what the run measured at its start
// (`measured`: its "measured_ceilings" object) replacing the read rate, the bf16 GEMM rate, the
// graph launch, the floor, the round trip and the grid-wide probes (lines and points, the PDL
// ones and the stream probe launched without PDL where the run measured it); efficiency
// factors 1. The harness predicts every case with these; a non-positive intercept or rate is
// noise and is left unknown. `clocks` (the run's "clocks" object, nvidia-smi at the start of the
// run) gives the SM clock that prices non-MMA work ("sm_mhz"; absent: the table's boost clock).
// Throws ceiling::Error for a missing rate or a malformed point list.
GpuCeilings ceilings_from_bench_run(const nlohmann::json& device, const nlohmann::json& measured,
                                    const nlohmann::json& clocks = nlohmann::json::object());

// One case of a result file, predicted again.
struct RejoinCase {
  std::string op, shape;
  bool dispatched = true;
  double measured_s = 0;  // time_ms_median
  double recorded_s = 0;  // predicted_ms: the model of the run that wrote the file
  KernelCost cost;
  DType math = DType::kF32;
  Prediction now;  // the current model
  // Cost fields the file lacks, derived from op + params (files written before the harness
  // recorded them), or known to be missing: e.g. "write_bytes from params", "tiles unknown".
  std::string derived;
};

struct RejoinRun {
  std::string origin;  // the file
  std::string gpu, git_sha, date;
  GpuCeilings ceilings;
  std::vector<RejoinCase> cases;  // every timed case, in file order (errored cases left out)
};

// `run` is a parsed `ceiling bench kernels` result file. Throws ceiling::Error naming `origin`.
RejoinRun rejoin_run(const nlohmann::json& run, const std::string& origin);
RejoinRun load_rejoin_run(const std::string& path);

// measured / predicted in [1 / (1 + band), 1 + band] (docs/results.md counts the same way).
bool within(double measured_s, double predicted_s, double band);

// Per file: dispatched cases within ±band for the recorded and the current prediction, per op
// and in all, then every dispatched case (misses marked). With several files, the cases (op and
// shape) within the band on every file.
std::string rejoin_table(const std::vector<RejoinRun>& runs, double band = 0.15);
// The same as JSON: {"band", "runs": [{"file", "gpu", "git_sha", "date", "dispatched",
// "within_recorded", "within_now", "ops": {op: {"cases", "within_recorded", "within_now"}},
// "cases": [{"op", "shape", "dispatched", "measured_ms", "recorded_ms", "predicted_ms", "gap",
// "limiter", "latency_us", "non_mma_us", "write_bytes", "tiles", "pdl", "derived"}]}],
// "on_every_file": {...}}.
nlohmann::json rejoin_json(const std::vector<RejoinRun>& runs, double band = 0.15);

}  // namespace ceiling::roofline
