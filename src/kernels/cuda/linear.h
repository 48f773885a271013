// The linear layer of the forward: out [M, N] = x [M, K] · W[N, K]^T (+ bias [N]) (meaning:
// cpu::linear), bf16 operands, fp32 accumulation, out bf16 or f32. Fused projections (QKV,
// gate/up) are one call over the concatenated weight [N_total, K] (the caller concatenates at
// upload).
//
// Dispatch: ceiling's GEMV (gemv.h) for M below the crossover of the weight's shape class,
// cuBLASLt (gemm_lt.h) above it. The crossovers are data measured by `ceiling bench kernels`
// (cases linear_gemv / linear_cublaslt) and committed in linear_crossover.inc by
// bench/gen_crossover.py — never typed by hand.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <string>

#include "core/dtype.h"
#include "core/status.h"
#include "kernels/cuda/gemm_lt.h"

namespace ceiling::cuda {

// The smallest M at which cuBLASLt beat the GEMV for the measured shape nearest to (N, K)
// (distance |log2 N/N'| + |log2 K/K'|); the GEMV runs for M below it.
int linear_crossover_m(int N, int K);
// Where the crossover table came from (the result file, GPU and git SHA it was generated from).
std::string linear_crossover_source();

enum class LinearPath { kGemv, kCublasLt };
LinearPath linear_path(int M, int N, int K);

// Owns the cuBLASLt state; plan → run as LtGemm. Not thread-safe.
class Linear {
 public:
  Linear() = default;
  // Host-only planning for the shapes a CUDA graph will capture (the GEMV path needs none).
  Status plan(int M, int N, int K, bool bias, DType out_dtype);
  // accumulate (bf16 out only): out = out + x · W^T (+ bias), in place — a residual add.
  Status run(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* bias, void* out,
             DType out_dtype, int M, int N, int K, cudaStream_t stream, bool accumulate = false);
  LtGemm& lt() { return lt_; }

 private:
  LtGemm lt_;
};

}  // namespace ceiling::cuda
