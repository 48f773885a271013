#include <cuda_bf16.h>

#include "core/check.h"
#include "kernels/cuda/all_reduce.h"

namespace ceiling::cuda {

namespace {

constexpr int kThreads = 512;

__device__ __forceinline__ void store_release(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t load_acquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Block b of every rank meets block b of every other rank: thread q < world tells rank q "rank
// `rank` reached `epoch` in phase `phase`", then waits for rank q's word in its own flags.
__device__ void barrier(const OneShotPeers& p, int rank, int world, int phase, uint32_t epoch) {
  __syncthreads();
  const int q = threadIdx.x;
  if (q < world) {
    const int slot = (blockIdx.x * 2 + phase) * kOneShotMaxRanks;
    __threadfence_system();  // this block's writes (the staging copy) before the flag
    store_release(p.flags[q] + slot + rank, epoch);
    const uint32_t* mine = p.flags[rank] + slot + q;
    const uint64_t t0 = global_ns();
    while (load_acquire(mine) < epoch)
      if (global_ns() - t0 > kOneShotTimeoutNs) __trap();  // a peer never came
  }
  __syncthreads();
}

template <typename T>
__device__ float to_f(T v);
template <>
__device__ float to_f<float>(float v) {
  return v;
}
template <>
__device__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <typename T>
__device__ T from_f(float v);
template <>
__device__ float from_f<float>(float v) {
  return v;
}
template <>
__device__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) {
  return __float2bfloat16(v);
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    one_shot_kernel(T* x, int64_t n, int rank, int world, OneShotPeers p, uint32_t* counters) {
  const int64_t chunk = (n + gridDim.x - 1) / gridDim.x;
  const int64_t begin = blockIdx.x * chunk, end = min(n, begin + chunk);
  const uint32_t epoch = counters[blockIdx.x] + 1;
  T* mine = static_cast<T*>(p.stage[rank]);
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) mine[i] = x[i];
  barrier(p, rank, world, 0, epoch);
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    float s = 0.0f;
    for (int q = 0; q < world; ++q) s += to_f(static_cast<const T*>(p.stage[q])[i]);
    x[i] = from_f<T>(s);
  }
  barrier(p, rank, world, 1, epoch);  // nobody overwrites its stage before all have read it
  if (threadIdx.x == 0) counters[blockIdx.x] = epoch;
}

}  // namespace

Status one_shot_all_reduce(void* x, DType dtype, int64_t n, int rank, int world,
                           const OneShotPeers& peers, uint32_t* counters, cudaStream_t stream) {
  if (world < 1 || world > kOneShotMaxRanks || rank < 0 || rank >= world)
    return Status::error("one_shot_all_reduce: rank {} of {} (at most {} ranks)", rank, world,
                         kOneShotMaxRanks);
  if (n <= 0) return Status();
  // Enough blocks to keep NVLink busy at a few hundred KB, few enough to stay co-resident.
  const int blocks = static_cast<int>(
      std::min<int64_t>(kOneShotMaxBlocks, (n + 4 * kThreads - 1) / (4 * kThreads)));
  switch (dtype) {
    case DType::kF32:
      one_shot_kernel<float><<<blocks, kThreads, 0, stream>>>(static_cast<float*>(x), n, rank,
                                                              world, peers, counters);
      break;
    case DType::kBF16:
      one_shot_kernel<__nv_bfloat16><<<blocks, kThreads, 0, stream>>>(
          static_cast<__nv_bfloat16*>(x), n, rank, world, peers, counters);
      break;
    default:
      return Status::error("one_shot_all_reduce: dtype {} not built (f32, bf16)",
                           dtype_name(dtype));
  }
  CEILING_CUDA_RETURN_LAST();
  return Status();
}

}  // namespace ceiling::cuda
