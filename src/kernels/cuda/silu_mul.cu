#include "core/check.h"
#include "kernels/cuda/activation.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/pdl.cuh"
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

}  // namespace

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
