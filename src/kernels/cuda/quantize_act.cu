#include <cuda_fp8.h>

#include "core/check.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/fp8.cuh"
#include "kernels/cuda/quantize_act.cuh"
#include "kernels/cuda/quantize_act.h"

namespace ceiling::cuda {
namespace {

using detail::bf16;

constexpr int kThreads = 256;

// grid (T): one CTA per row, two passes over it — the max of |x| (16-byte loads, a warp-shuffle
// and shared-memory reduction), then the conversion (the row's second read hits L1/L2).
// Prediction: a stream of 2 bytes in and 1 out per element, ~(3 · T · K) bytes at read bandwidth.
__global__ void quantize_rows_fp8_kernel(const bf16* __restrict__ x, int K, uint8_t* __restrict__ q,
                                         float* __restrict__ scale) {
  const int64_t t = blockIdx.x;
  const bf16* row = x + t * K;
  const int chunks = K / 8;
  float amax = 0.0f;
  for (int c = threadIdx.x; c < chunks; c += kThreads) {
    float f[8];
    detail::to_float8(detail::load8(row + c * 8), f);
    amax = detail::amax8(f, amax);
  }
  const float inv = detail::row_fp8_inv_scale(amax, scale + t);
  detail::quantize_own_chunks(row, chunks, threadIdx.x, kThreads, inv, q + t * K);
}

// grid (T): out = bf16(e4m3(q) · scale[t]), 8 elements per thread step.
__global__ void dequantize_rows_fp8_kernel(const uint8_t* __restrict__ q,
                                           const float* __restrict__ scale, int K,
                                           bf16* __restrict__ out) {
  const int64_t t = blockIdx.x;
  const float s = scale[t];
  for (int c = threadIdx.x; c < K / 8; c += kThreads) {
    const uint2 raw = *reinterpret_cast<const uint2*>(q + t * K + c * 8);
    float f[8];
    detail::fp8x4_scaled(raw.x, f);  // e4m3 · 2^-120 (fp8.cuh): exact
    detail::fp8x4_scaled(raw.y, f + 4);
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const __nv_bfloat162 p =
          __floats2bfloat162_rn(f[2 * i] * 0x1p120f * s, f[2 * i + 1] * 0x1p120f * s);
      __builtin_memcpy(&w[i], &p, 4);
    }
    *reinterpret_cast<uint4*>(out + t * K + c * 8) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// The launchers' shared rules: K a positive multiple of 8, both row arrays 16-byte aligned.
Status check_rows(const char* op, int T, int K, const void* in, const void* out) {
  if (T < 0 || K < 8 || K % 8 != 0)
    return Status::error("{}: K = {} must be a positive multiple of 8 (T = {})", op, K, T);
  if (reinterpret_cast<uintptr_t>(in) % 16 || reinterpret_cast<uintptr_t>(out) % 16)
    return Status::error("{}: its input and output rows must be 16-byte aligned", op);
  return Status();
}

}  // namespace

Status dequantize_rows_fp8(const uint8_t* q, const float* scale, int T, int K, bf16* out,
                           cudaStream_t stream) {
  CEILING_RETURN_IF_ERROR(check_rows("dequantize_rows_fp8", T, K, q, out));
  if (T == 0) return Status();
  dequantize_rows_fp8_kernel<<<T, kThreads, 0, stream>>>(q, scale, K, out);
  CEILING_CUDA_RETURN_LAST();
  return Status();
}

Status quantize_rows_fp8(const bf16* x, int T, int K, uint8_t* q, float* scale,
                         cudaStream_t stream) {
  CEILING_RETURN_IF_ERROR(check_rows("quantize_rows_fp8", T, K, x, q));
  if (T == 0) return Status();
  quantize_rows_fp8_kernel<<<T, kThreads, 0, stream>>>(x, K, q, scale);
  CEILING_CUDA_RETURN_LAST();
  return Status();
}

}  // namespace ceiling::cuda
