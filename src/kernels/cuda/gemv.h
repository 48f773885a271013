// Decode-shaped linear layer written by ceiling: a GEMV / skinny GEMM for 1 ≤ M ≤ 16 rows of x,
// streaming the weights once for all M rows (meaning: cpu::linear).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "core/dtype.h"
#include "core/status.h"

namespace ceiling::cuda {

inline constexpr int kGemvMaxM = 16;

// out [M, N] = x [M, K] · W[N, K]^T (+ bias [N]); x, W, bias bf16 (W row-major, K contiguous),
// fp32 accumulation, out bf16 or f32 (`out_dtype`). bias may be null. 1 ≤ M ≤ 16.
// Fast path: K % 8 == 0 and x, W, out 16-byte aligned (otherwise a slow scalar kernel runs).
Status gemv(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* bias, void* out,
            DType out_dtype, int M, int N, int K, cudaStream_t stream);

// CTAs of the fast kernel for a shape (for the roofline's wave model).
int gemv_ctas(int M, int N);

// Benchmark only: the M = 1 kernel with an explicit configuration (threads per CTA, weight rows
// per CTA, 16-byte loads in flight per row and thread), so `ceiling bench kernels` can compare
// configurations in one run; gemv() uses the measured best. Built: t128 r4 u4, r2 u4, r1 u4,
// r2 u2; t256 r1 u2, r2 u2, r1 u4; t64 r4 u4.
struct GemvConfig {
  int threads = 128, rows = 4, unroll = 4;
};
Status gemv_with_config(const GemvConfig& cfg, const __nv_bfloat16* x, const __nv_bfloat16* w,
                        const __nv_bfloat16* bias, __nv_bfloat16* out, int N, int K,
                        cudaStream_t stream);

}  // namespace ceiling::cuda
