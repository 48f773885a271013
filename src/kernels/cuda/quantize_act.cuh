// Device side of quantize_act.h's per-row E4M3 quantization, shared by quantize_rows_fp8 and the
// kernels that fuse it into their epilogue (rms_norm_fp8, silu_mul_fp8): one CTA per row. Include
// from .cu files only.
#pragma once

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/fp8.cuh"

namespace ceiling::cuda::detail {

inline constexpr float kE4m3Max = 448.0f;  // model/quantize.h

__device__ __forceinline__ float amax8(const float (&f)[8], float m) {
#pragma unroll
  for (int i = 0; i < 8; ++i) m = fmaxf(m, fabsf(f[i]));
  return m;
}

// The row's scale from every thread's max |x| (each thread of the CTA calls it once per kernel,
// blockDim.x a multiple of 32): thread 0 writes *scale_slot = max / 448 (1 for an all-zero row),
// and all get 1 / scale back (both rounded as quantize_act_row_fp8 rounds them).
__device__ __forceinline__ float row_fp8_inv_scale(float amax, float* scale_slot) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  __shared__ float warp_max[32];
  __shared__ float row_inv;
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = amax;
  __syncthreads();
  if (threadIdx.x == 0) {
    float m = warp_max[0];
    for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) m = fmaxf(m, warp_max[w]);
    const float s = m > 0.0f ? __fdiv_rn(m, kE4m3Max) : 1.0f;
    *scale_slot = s;
    row_inv = __fdiv_rn(1.0f, s);
  }
  __syncthreads();
  return row_inv;
}

// The second pass: this thread's 8-element chunks c = c0, c0 + step, ... of a bf16 row as E4M3
// into q_row (in a fused kernel, chunks this thread wrote itself, so they read back as written).
__device__ __forceinline__ void quantize_own_chunks(const __nv_bfloat16* row, int chunks, int c0,
                                                    int step, float inv, uint8_t* q_row) {
  for (int c = c0; c < chunks; c += step) {
    float f[8];
    to_float8(load8(row + c * 8), f);
    *reinterpret_cast<uint2*>(q_row + c * 8) = e4m3x8(f, inv);
  }
}

}  // namespace ceiling::cuda::detail
