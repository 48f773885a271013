// A kernel benchmark case: one definition drives both the correctness check (against the CPU
// reference) and the timing, as llama.cpp's test-backend-ops does. `ceiling bench kernels` runs
// every registered case; the gpu tests under tests/gpu build the same case classes at awkward
// sizes and assert on check().
//
// Adding cases (e.g. the attention kernels):
//   1. Write src/bench/cases/<name>.cu (or .cpp) with a KernelCase subclass per op.
//   2. In that file define
//        void ceiling::bench::register_<name>_cases(CaseList& out);
//      which appends the benchmark shapes (decode and prefill) to `out`.
//   3. Nothing else: src/bench/CMakeLists.txt globs src/bench/cases/*.cu|*.cpp and generates the
//      call to register_<name>_cases() from the file name (re-run cmake after adding a file).
//   Optionally expose a factory in src/bench/cases/<name>.h so tests/gpu can build the case at
//   awkward sizes and call check().
//
// Contract of a case (the harness relies on it):
//   * setup(copies, seed, stream) allocates `copies` independent sets of inputs and outputs
//     (cudaMalloc is fine here) and fills the inputs with random data drawn from `seed` (never
//     zeros). The harness picks `copies` so that copies * set_bytes() exceeds the L2 several
//     times; rotation over the sets keeps every timed run reading from device memory.
//   * run(i, stream) launches the op on set i and nothing else: no allocation, no sync, no host
//     read of device data (it may be captured in a CUDA graph). Inputs a run modifies in place
//     (the residual, q of RoPE, a KV cache) may drift in value over repeated runs; timing does
//     not care, check() re-fills before checking.
//   * check(stream) refills set 0's inputs from a fresh seed, poisons its outputs (NaN bytes),
//     runs it once, copies inputs and outputs to the host and compares with src/kernels/cpu/ref.h
//     by ‖out − ref‖ / ‖ref‖ (see check_util.h). It reports the worst output.
//   * cost() is what the op must do at least: FLOPs and the fewest bytes through device memory
//     (each input read once, each output written once), plus the output tiles (GEMM-like
//     kernels) and the launches per run, for the roofline prediction (roofline/kernel_cost.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "roofline/kernel_cost.h"

namespace ceiling::bench {

// Work of one run of a case (one call of run()).
struct Cost {
  double flops = 0;          // floating-point operations; an FMA counts 2
  double bytes = 0;          // fewest bytes through device memory: inputs once, outputs once
  double write_bytes = 0;    // of `bytes`, the outputs (0 = not split: all priced as reads)
  DType math = DType::kF32;  // unit the FLOPs run on: kBF16 = tensor cores, kF32 = CUDA cores
  int64_t tiles = 0;         // output tiles of a tiled (GEMM-like) kernel for the roofline's
                             // wave model; 0 = not wave-quantized (streaming kernels)
  int launches = 1;          // kernel launches per run
  // Dependent device-memory round trips on the critical path of one launch, counted from the
  // kernel's structure (roofline/kernel_cost.h): 1 for a pure stream, +1 for each phase whose
  // accesses wait on an earlier phase's loads (an index before a gather, a reduction before the
  // stores).
  int round_trips = 1;
  // Launched with programmatic dependent launch (overlaps its neighbours in the graph); false
  // for library kernels (cuBLASLt) that serialize: the roofline then prices the fixed cost with
  // the stream probe launched without PDL.
  bool pdl = true;
  // Work a tensor-core kernel issues between its MMAs, counted from its SASS (flash attention's
  // softmax; roofline/kernel_cost.h). Default: none.
  roofline::NonMmaWork non_mma;
};

// Outcome of check(): the worst relative error over the op's outputs.
struct CheckResult {
  double max_rel_err = 0;  // ‖out − ref‖ / ‖ref‖; NaN or an unwritten element gives +inf
  double tolerance = 0;    // the op's named tolerance for this dtype
  std::string detail;      // per-output errors, e.g. "out 3.1e-3; residual 0"
  std::string failure;     // a failed exact property ("stray write to slot 17"); "" = none
  bool passed() const { return failure.empty() && max_rel_err <= tolerance; }
};

class KernelCase {
 public:
  virtual ~KernelCase() = default;

  // Identity, as written into the result JSON.
  virtual std::string op() const = 0;     // e.g. "rms_norm_residual"
  virtual std::string shape() const = 0;  // e.g. "T=1 H=4096"
  virtual std::string dtype() const { return "bf16"; }
  // The shape as numbers, for the PyTorch baseline script: e.g. {"T": 1, "H": 4096}.
  virtual nlohmann::json params() const = 0;
  // Name of the equivalent PyTorch call timed by bench/torch_baseline.py ("" = none).
  virtual std::string baseline_name() const { return ""; }
  // False for a comparison variant the library does not choose for this shape (the losing side
  // of a measured crossover, a configuration sweep): kept in the results, reported apart from
  // the kernels the library runs.
  virtual bool dispatched() const { return true; }

  virtual Cost cost() const = 0;
  // Device bytes of one input+output set (sizing the rotation past L2).
  virtual size_t set_bytes() const = 0;

  virtual void setup(int copies, uint64_t seed, cudaStream_t stream) = 0;
  virtual Status run(int set, cudaStream_t stream) = 0;
  virtual CheckResult check(cudaStream_t stream) = 0;
};

using CaseList = std::vector<std::unique_ptr<KernelCase>>;

// Every registered case, in registration order (calls each register_<name>_cases once).
CaseList all_cases();

}  // namespace ceiling::bench
