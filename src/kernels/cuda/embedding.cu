#include "core/check.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/pdl.cuh"

namespace ceiling::cuda {
namespace {

using detail::bf16;

constexpr int kThreads = 128;

constexpr int kPer = 4;  // 16-byte chunks per thread, all loads issued before the stores

// grid (T, ceil(H / (8 · kThreads · kPer))): block y copies a slice of row ids[t].
// PDL: the ids are written by the step's host upload or an earlier kernel, and the row to read
// depends on them, so nothing is prefetched before the wait.
__global__ void embedding_vec_kernel(const bf16* __restrict__ table, int64_t V, int H,
                                     const int32_t* __restrict__ ids, bf16* __restrict__ out) {
  detail::pdl_launch_dependents();
  detail::pdl_wait();
  const int t = blockIdx.x;
  const int c0 = blockIdx.y * kThreads * kPer + threadIdx.x;  // 8-element chunks of the row
  const int64_t id = ids[t];
  const bool valid = id >= 0 && id < V;
  detail::Bf16x8 v[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int c = c0 + j * kThreads;
    if (c * 8 < H) {
      if (valid) {
        v[j] = detail::load8(table + id * H + c * 8);
      } else {
        const float zero[8] = {};
        v[j] = detail::from_float8(zero);
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int c = c0 + j * kThreads;
    if (c * 8 < H) detail::store8(out + static_cast<int64_t>(t) * H + c * 8, v[j]);
  }
}

// Any H and alignment: one element a thread.
__global__ void embedding_scalar_kernel(const bf16* __restrict__ table, int64_t V, int H,
                                        const int32_t* __restrict__ ids, bf16* __restrict__ out) {
  detail::pdl_launch_dependents();
  detail::pdl_wait();
  const int t = blockIdx.x;
  const int i = blockIdx.y * kThreads + threadIdx.x;
  if (i >= H) return;
  const int64_t id = ids[t];
  out[static_cast<int64_t>(t) * H + i] =
      id >= 0 && id < V ? table[id * H + i] : __float2bfloat16(0.0f);
}

}  // namespace

Status embedding(const bf16* table, int64_t V, int H, const int32_t* ids, int T, bf16* out,
                 cudaStream_t stream) {
  if (T < 0 || H <= 0 || V <= 0)
    return Status::error("embedding: bad shape T {} H {} V {} (need T >= 0, H > 0, V > 0)", T, H,
                         V);
  if (T == 0) return Status();
  const bool vec = H % 8 == 0 && detail::aligned16(table) && detail::aligned16(out);
  if (vec) {
    const dim3 grid(T, detail::ceil_div(H / 8, kThreads * kPer));
    CEILING_CUDA_RETURN(detail::launch_pdl(embedding_vec_kernel, grid, dim3(kThreads), 0, stream,
                                           table, V, H, ids, out));
  } else {
    const dim3 grid(T, detail::ceil_div(H, kThreads));
    CEILING_CUDA_RETURN(detail::launch_pdl(embedding_scalar_kernel, grid, dim3(kThreads), 0, stream,
                                           table, V, H, ids, out));
  }
  return Status();
}

}  // namespace ceiling::cuda
