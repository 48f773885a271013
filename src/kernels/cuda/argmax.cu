#include "core/check.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/sampling.h"

namespace ceiling::cuda {
namespace {

constexpr int kThreads = 1024;

// (value, index) with "better" = larger value, then lower index; NaN is never better.
struct Best {
  float v;
  int i;
};

__device__ __forceinline__ Best better(Best a, Best b) {
  if (b.v > a.v || (b.v == a.v && b.i < a.i) || (a.v != a.v && b.v == b.v)) return b;
  return a;
}

__device__ __forceinline__ Best warp_best(Best b) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    Best other{__shfl_xor_sync(0xffffffffu, b.v, o), __shfl_xor_sync(0xffffffffu, b.i, o)};
    b = better(b, other);
  }
  return b;
}

// One CTA per row; float4 loads when the row allows them.
__global__ void __launch_bounds__(kThreads)
    argmax_kernel(const float* __restrict__ logits, int V, bool vec, int32_t* __restrict__ out) {
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * V;
  Best b{-INFINITY, V};  // index V: "none yet" (an all -Inf row still picks index 0 below)
  if (vec) {
    const float4* r4 = reinterpret_cast<const float4*>(row);
    for (int j = threadIdx.x; j < V / 4; j += kThreads) {
      const float4 q = r4[j];
      b = better(b, {q.x, 4 * j});
      b = better(b, {q.y, 4 * j + 1});
      b = better(b, {q.z, 4 * j + 2});
      b = better(b, {q.w, 4 * j + 3});
    }
  } else {
    for (int j = threadIdx.x; j < V; j += kThreads) b = better(b, {row[j], j});
  }
  __shared__ Best warp_results[32];
  b = warp_best(b);
  if ((threadIdx.x & 31) == 0) warp_results[threadIdx.x >> 5] = b;
  __syncthreads();
  if (threadIdx.x < 32) {
    b = warp_best(warp_results[threadIdx.x]);
    if (threadIdx.x == 0) out[blockIdx.x] = b.i < V ? b.i : 0;
  }
}

}  // namespace

Status argmax(const float* logits, int S, int V, int32_t* out, cudaStream_t stream) {
  if (S < 0 || V <= 0) return Status::error("argmax: bad shape S {} V {}", S, V);
  if (S == 0) return Status();
  const bool vec = V % 4 == 0 && detail::aligned16(logits);
  argmax_kernel<<<S, kThreads, 0, stream>>>(logits, V, vec, out);
  CEILING_CUDA_RETURN_LAST();
  return Status();
}

}  // namespace ceiling::cuda
