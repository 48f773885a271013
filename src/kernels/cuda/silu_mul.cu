#include "core/check.h"
#include "kernels/cuda/activation.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/quantize_act.cuh"
#include "kernels/cuda/silu_mul.h"

namespace ceiling::cuda {
namespace {

using detail::bf16;
using detail::silu_times;

constexpr int kThreads = 256;

// grid (ceil(I / (8 · kThreads · kPer)), T): each thread does kPer 8-element chunks of one row,
// all loads issued before the math. PDL: nothing to prefetch (gate_up is an activation).
template <int kPer>
__global__ void silu_mul_vec_kernel(const bf16* __restrict__ gate_up, int I,
                                    bf16* __restrict__ out) {
  detail::pdl_launch_dependents();
  detail::pdl_wait();
  const int64_t t = blockIdx.y;
  const bf16* g = gate_up + t * 2 * I;
  const int c0 = blockIdx.x * kThreads * kPer + threadIdx.x;
  detail::Bf16x8 gv[kPer], uv[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int c = c0 + j * kThreads;
    if (c * 8 < I) {
      gv[j] = detail::load8(g + c * 8);
      uv[j] = detail::load8(g + I + c * 8);
    }
  }
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int c = c0 + j * kThreads;
    if (c * 8 < I) {
      float gf[8], uf[8];
      detail::to_float8(gv[j], gf);
      detail::to_float8(uv[j], uf);
#pragma unroll
      for (int e = 0; e < 8; ++e) gf[e] = silu_times(gf[e], uf[e]);
      detail::store8(out + t * I + c * 8, detail::from_float8(gf));
    }
  }
}

__global__ void silu_mul_scalar_kernel(const bf16* __restrict__ gate_up, int I,
                                       bf16* __restrict__ out) {
  detail::pdl_launch_dependents();
  detail::pdl_wait();
  const int64_t t = blockIdx.y;
  const int i = blockIdx.x * kThreads + threadIdx.x;
  if (i >= I) return;
  const bf16* g = gate_up + t * 2 * I;
  out[t * I + i] = __float2bfloat16(silu_times(__bfloat162float(g[i]), __bfloat162float(g[I + i])));
}

// grid (T): one CTA a row — the row as silu_mul_vec_kernel computes it, its max |value|, then the
// row (re-read by the threads that stored it) to E4M3 with its own scale (quantize_act.cuh).
__global__ void silu_mul_fp8_kernel(const bf16* __restrict__ gate_up, int I, bf16* out,
                                    uint8_t* __restrict__ q, float* __restrict__ scale) {
  detail::pdl_launch_dependents();
  detail::pdl_wait();
  const int64_t t = blockIdx.x;
  const bf16* g = gate_up + t * 2 * I;
  bf16* orow = out + t * I;
  float amax = 0.0f;
  for (int c = threadIdx.x; c < I / 8; c += kThreads) {
    float gf[8], uf[8];
    detail::to_float8(detail::load8(g + c * 8), gf);
    detail::to_float8(detail::load8(g + I + c * 8), uf);
#pragma unroll
    for (int e = 0; e < 8; ++e) gf[e] = silu_times(gf[e], uf[e]);
    const detail::Bf16x8 v = detail::from_float8(gf);
    detail::store8(orow + c * 8, v);
    detail::to_float8(v, gf);
    amax = detail::amax8(gf, amax);
  }
  const float inv = detail::row_fp8_inv_scale(amax, scale + t);
  detail::quantize_own_chunks(orow, I / 8, threadIdx.x, kThreads, inv, q + t * I);
}

}  // namespace

Status silu_mul_fp8(const bf16* gate_up, int T, int I, bf16* out, uint8_t* q, float* scale,
                    cudaStream_t stream) {
  if (T < 0 || I < 8 || I % 8 != 0)
    return Status::error("silu_mul_fp8: I {} must be a positive multiple of 8 (T {})", I, T);
  if (!detail::aligned16(gate_up) || !detail::aligned16(out) || !detail::aligned16(q) || !scale)
    return Status::error("silu_mul_fp8: rows must be 16-byte aligned and scale not null");
  if (T == 0) return Status();
  CEILING_CUDA_RETURN(detail::launch_pdl(silu_mul_fp8_kernel, dim3(T), dim3(kThreads), 0, stream,
                                         gate_up, I, out, q, scale));
  return Status();
}

Status silu_mul(const bf16* gate_up, int T, int I, bf16* out, cudaStream_t stream) {
  if (T < 0 || I <= 0)
    return Status::error("silu_mul: bad shape T {} I {} (need 0 <= T, I > 0)", T, I);
  if (T == 0) return Status();
  if (I % 8 == 0 && detail::aligned16(gate_up) && detail::aligned16(out)) {
    constexpr int kPer = 2;
    const dim3 grid(detail::ceil_div(I / 8, kThreads * kPer), T);
    if (grid.y > 65535) return Status::error("silu_mul: T {} exceeds 65535", T);
    CEILING_CUDA_RETURN(detail::launch_pdl(silu_mul_vec_kernel<kPer>, grid, dim3(kThreads), 0,
                                           stream, gate_up, I, out));
  } else {
    const dim3 grid(detail::ceil_div(I, kThreads), T);
    if (grid.y > 65535) return Status::error("silu_mul: T {} exceeds 65535", T);
    CEILING_CUDA_RETURN(detail::launch_pdl(silu_mul_scalar_kernel, grid, dim3(kThreads), 0, stream,
                                           gate_up, I, out));
  }
  return Status();
}

}  // namespace ceiling::cuda
