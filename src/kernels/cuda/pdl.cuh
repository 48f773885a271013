// Programmatic dependent launch (PDL, sm_90+): how the kernels of this directory chain with the
// kernel before them in a stream or a CUDA graph, so that a kernel's launch, its prologue and its
// constant-data prefetch (weights) overlap the tail of its predecessor.
//
// Contract for every kernel launched with launch_pdl():
//   1. It may call pdl_launch_dependents() at any point (usually first): the next PDL-launched
//      kernel may then be scheduled once every CTA of this grid has called it or exited.
//   2. Every CTA calls pdl_wait() before it reads anything an earlier kernel wrote (activations,
//      positions, slot mappings, ...), before it writes anything a running predecessor may still
//      read, and before any early return. pdl_wait() returns when all earlier kernels in the stream
//      have completed and their writes are visible. Data that no kernel of the step writes
//      (weights, RoPE tables) may be read before it.
//   Because every CTA waits, a kernel never completes before its predecessor, so completion is
//   transitive: reading what a kernel two launches back wrote is safe.
// Launched without the attribute (<<<>>>, or after a non-kernel stream op) both calls are no-ops
// and the launch is fully serialized, as usual.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace ceiling::cuda::detail {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// launch_pdl of a kernel launched as thread-block clusters of `cluster` CTAs (grid divisible by
// it; __cluster_dims__ not set on the kernel); a one-CTA cluster is an ordinary launch.
template <typename... KernelArgs, typename... Args>
cudaError_t launch_pdl_cluster(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem,
                               cudaStream_t stream, dim3 cluster, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = cluster.x;
  attr[1].val.clusterDim.y = cluster.y;
  attr[1].val.clusterDim.z = cluster.z;
  cfg.attrs = attr;
  cfg.numAttrs = cluster.x * cluster.y * cluster.z > 1 ? 2 : 1;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// kernel<<<grid, block, smem, stream>>>(args...) with programmatic stream serialization allowed.
// The kernel must follow the contract above. Returns the launch error (check with
// CEILING_CUDA_RETURN).
template <typename... KernelArgs, typename... Args>
cudaError_t launch_pdl(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem,
                       cudaStream_t stream, Args&&... args) {
  return launch_pdl_cluster(kernel, grid, block, smem, stream, dim3(1, 1, 1),
                            std::forward<Args>(args)...);
}

}  // namespace ceiling::cuda::detail
