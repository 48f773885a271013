#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

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

// Elements of T per 16-byte vector.
template <typename T>
constexpr int kVec = 16 / static_cast<int>(sizeof(T));

// x [n] in vectors of kVec<T> (n a multiple of kVec, x and the stages 16-byte aligned: every
// load and store is 16 bytes, so a remote read over NVLink moves a whole vector); the tail path
// below takes anything else one element at a time. Sums run in rank order in fp32 either way, so
// the vector path gives the same bits as the scalar one.
template <typename T, bool kVector>
__global__ void __launch_bounds__(kThreads)
    one_shot_kernel(T* x, int64_t n, int rank, int world, OneShotPeers p, uint32_t* counters) {
  constexpr int V = kVector ? kVec<T> : 1;
  const int64_t units = n / V;  // vectors (or elements)
  const int64_t chunk = (units + gridDim.x - 1) / gridDim.x;
  const int64_t begin = blockIdx.x * chunk, end = min(units, begin + chunk);
  const uint32_t epoch = counters[blockIdx.x] + 1;
  using Unit = std::conditional_t<kVector, uint4, T>;
  Unit* mine = static_cast<Unit*>(p.stage[rank]);
  Unit* xs = reinterpret_cast<Unit*>(x);
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) mine[i] = xs[i];
  barrier(p, rank, world, 0, epoch);
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    Unit in[kOneShotMaxRanks];
#pragma unroll
    for (int q = 0; q < kOneShotMaxRanks; ++q)  // every peer's load in flight at once
      if (q < world) in[q] = static_cast<const Unit*>(p.stage[q])[i];
    float s[V];
#pragma unroll
    for (int e = 0; e < V; ++e) s[e] = 0.0f;
#pragma unroll
    for (int q = 0; q < kOneShotMaxRanks; ++q) {
      if (q >= world) break;
      const T* v = reinterpret_cast<const T*>(&in[q]);
#pragma unroll
      for (int e = 0; e < V; ++e) s[e] += to_f(v[e]);
    }
    Unit out;
    T* o = reinterpret_cast<T*>(&out);
#pragma unroll
    for (int e = 0; e < V; ++e) o[e] = from_f<T>(s[e]);
    xs[i] = out;
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
  // Enough blocks to keep NVLink busy at a few hundred KB, few enough to stay co-resident: one
  // 16-byte vector (or element) per thread per pass, up to 4 passes per block.
  const int elem = static_cast<int>(dtype_bytes(dtype, 1));
  const bool vector = elem > 0 && (n * elem) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(x) % 16 == 0;  // stages: cudaMalloc, aligned
  const int64_t units = vector ? n * elem / 16 : n;
  const int blocks = static_cast<int>(
      std::min<int64_t>(kOneShotMaxBlocks, (units + 4 * kThreads - 1) / (4 * kThreads)));
  auto launch = [&]<typename T>(T* p) {
    if (vector)
      one_shot_kernel<T, true><<<blocks, kThreads, 0, stream>>>(p, n, rank, world, peers, counters);
    else
      one_shot_kernel<T, false>
          <<<blocks, kThreads, 0, stream>>>(p, n, rank, world, peers, counters);
  };
  switch (dtype) {
    case DType::kF32:
      launch(static_cast<float*>(x));
      break;
    case DType::kBF16:
      launch(static_cast<__nv_bfloat16*>(x));
      break;
    default:
      return Status::error("one_shot_all_reduce: dtype {} not built (f32, bf16)",
                           dtype_name(dtype));
  }
  CEILING_CUDA_RETURN_LAST();
  return Status();
}

}  // namespace ceiling::cuda
