// The linear layer of the forward: out [M, N] = x [M, K] · W[N, K]^T (+ bias [N]) (meaning:
// cpu::linear), bf16 operands, fp32 accumulation, out bf16 or f32. Fused projections (QKV,
// gate/up) are one call over the concatenated weight [N_total, K] (the caller concatenates at
// upload).
//
// Dispatch: ceiling's GEMV (gemv.h) for M below the crossover of the weight's shape class,
// cuBLASLt (gemm_lt.h) above it. The crossovers are data measured per GPU model by `ceiling bench
// kernels` (cases linear_gemv / linear_cublaslt) and committed in linear_crossover.inc by
// bench/gen_crossover.py — never typed by hand.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <span>
#include <string_view>

#include "core/dtype.h"
#include "core/status.h"
#include "kernels/cuda/gemm_lt.h"

namespace ceiling::cuda {

enum class LinearPath { kGemv, kCublasLt };

// One measured crossover: for weights [N, K] the GEMV runs for M below m, cuBLASLt from it on.
struct Crossover {
  int K, N;
  int m;  // smallest M where cuBLASLt was faster; kGemvMaxM + 1 = the GEMV won up to its limit
};
// The crossovers measured on one GPU (linear_crossover.inc, written by bench/gen_crossover.py
// from a `ceiling bench kernels` run on that GPU).
struct CrossoverTable {
  const char* gpu;     // what the device name contains for this table ("H100", "H200")
  const char* source;  // the result file, GPU, git SHA and date it was generated from
  std::span<const Crossover> rows;
};
// The table for a device name (cudaDeviceProp::name): the one measured on that GPU model, or —
// for a GPU without a table of its own — the first committed one (the H100's).
const CrossoverTable& crossover_table(std::string_view device_name);
// The table of the current CUDA device (throws ceiling::Error without one).
const CrossoverTable& current_crossover_table();
// The smallest M at which cuBLASLt beat the GEMV for the measured shape nearest to (N, K)
// (distance |log2 N/N'| + |log2 K/K'|); the GEMV runs for M below it.
int linear_crossover_m(const CrossoverTable& t, int N, int K);
LinearPath linear_path(const CrossoverTable& t, int M, int N, int K);

// Owns the cuBLASLt state; plan → run as LtGemm. Not thread-safe.
class Linear {
 public:
  explicit Linear(const CrossoverTable& table) : table_(&table) {}
  LinearPath path(int M, int N, int K) const { return linear_path(*table_, M, N, K); }
  // Host-only planning for the shapes a CUDA graph will capture (the GEMV path needs none);
  // tune: time cuBLASLt's candidates at the shape's first run outside a capture (gemm_lt.h).
  Status plan(int M, int N, int K, bool bias, DType out_dtype, bool tune = false);
  // accumulate (bf16 out only): out = out + x · W^T (+ bias), in place — a residual add.
  Status run(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* bias, void* out,
             DType out_dtype, int M, int N, int K, cudaStream_t stream, bool accumulate = false);
  LtGemm& lt() { return lt_; }
  const LtGemm& lt() const { return lt_; }

 private:
  const CrossoverTable* table_;
  LtGemm lt_;
};

}  // namespace ceiling::cuda
