// argmax over rows of fp32 logits: one thread-block cluster of kCluster CTAs per row, each CTA
// reducing a contiguous slice; the CTAs' winners meet in CTA 0's shared memory (distributed
// shared memory), so there is no workspace, no atomic counter and nothing to reset: every launch
// is independent and graph-capturable.
#include <cooperative_groups.h>

#include "core/check.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/sampling.h"

namespace ceiling::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kThreads = 512;
constexpr int kUnroll = 8;  // float4 loads a thread issues before comparing

// (value, index) with "better" = larger value, then lower index; NaN is never better. A total
// order, so the reduction may combine in any order and agrees exactly with cpu::argmax.
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

// grid kCluster·S CTAs (clusters of kCluster along x): cluster s reduces row s; CTA `rank` of it
// the slice [rank·chunk, (rank+1)·chunk) with chunk a multiple of 4 (float4 loads when `vec`).
template <int kCluster>
__global__ void __cluster_dims__(kCluster, 1, 1) __launch_bounds__(kThreads)
    argmax_kernel(const float* __restrict__ logits, int V, bool vec, int32_t* __restrict__ out) {
  __shared__ Best warp_results[kThreads / 32];
  __shared__ Best cluster_results[kCluster];
  detail::pdl_launch_dependents();
  // Cluster barrier, phase 1: arrived now, waited on just before the remote write, so every CTA
  // of the cluster has started (its shared memory exists) before another writes into it.
  if constexpr (kCluster > 1) cg::this_cluster().barrier_arrive();
  const int s = blockIdx.x / kCluster, rank = blockIdx.x % kCluster;
  const int chunk = ((V + kCluster - 1) / kCluster + 3) / 4 * 4;
  const int c0 = min(V, rank * chunk), c1 = min(V, c0 + chunk);
  const float* row = logits + static_cast<int64_t>(s) * V;
  Best b{-INFINITY, V};  // index V: "none yet" (an all -Inf row still picks index 0 below)
  detail::pdl_wait();
  if (vec) {
    const float4* r4 = reinterpret_cast<const float4*>(row);
    const int j1 = c1 / 4;
    for (int j0 = c0 / 4 + threadIdx.x; j0 < j1; j0 += kUnroll * kThreads) {
      float4 q[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int j = j0 + u * kThreads;
        if (j < j1) q[u] = r4[j];
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int j = j0 + u * kThreads;
        if (j < j1) {
          b = better(b, {q[u].x, 4 * j});
          b = better(b, {q[u].y, 4 * j + 1});
          b = better(b, {q[u].z, 4 * j + 2});
          b = better(b, {q[u].w, 4 * j + 3});
        }
      }
    }
  } else {
    for (int j = c0 + threadIdx.x; j < c1; j += kThreads) b = better(b, {row[j], j});
  }
  b = warp_best(b);
  if ((threadIdx.x & 31) == 0) warp_results[threadIdx.x >> 5] = b;
  __syncthreads();
  if constexpr (kCluster > 1) cg::this_cluster().barrier_wait();
  if (threadIdx.x < 32) {
    b = warp_best(threadIdx.x < kThreads / 32 ? warp_results[threadIdx.x] : Best{-INFINITY, V});
    if constexpr (kCluster == 1) {
      if (threadIdx.x == 0) out[s] = b.i < V ? b.i : 0;
    } else if (threadIdx.x == 0) {
      cg::this_cluster().map_shared_rank(cluster_results, 0)[rank] = b;
    }
  }
  if constexpr (kCluster > 1) {
    // Phase 2: the remote writes are visible to CTA 0 after it, and no CTA exits before.
    cg::this_cluster().sync();
    if (rank == 0 && threadIdx.x < 32) {
      b = warp_best(threadIdx.x < kCluster ? cluster_results[threadIdx.x] : Best{-INFINITY, V});
      if (threadIdx.x == 0) out[s] = b.i < V ? b.i : 0;
    }
  }
}

}  // namespace

Status argmax(const float* logits, int S, int V, int32_t* out, cudaStream_t stream) {
  if (S < 0 || V <= 0) return Status::error("argmax: bad shape S {} V {}", S, V);
  if (S == 0) return Status();
  const bool vec = V % 4 == 0 && detail::aligned16(logits);
  // A slice of ≥ 8K logits per CTA (one or two rounds of kUnroll float4 loads a thread): V ≥ 64K
  // is spread over a cluster of 8 SMs, smaller rows use one CTA each.
  if (V >= 8 * 8192) {
    constexpr int kCluster = 8;
    CEILING_CUDA_RETURN(detail::launch_pdl(argmax_kernel<kCluster>, dim3(kCluster * S),
                                           dim3(kThreads), 0, stream, logits, V, vec, out));
  } else {
    CEILING_CUDA_RETURN(detail::launch_pdl(argmax_kernel<1>, dim3(S), dim3(kThreads), 0, stream,
                                           logits, V, vec, out));
  }
  return Status();
}

}  // namespace ceiling::cuda
