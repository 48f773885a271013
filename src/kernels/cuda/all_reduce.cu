#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "core/check.h"
#include "kernels/cuda/all_reduce.h"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/peer.cuh"

namespace ceiling::cuda {

namespace {

constexpr int kThreads = 512;

using detail::global_ns;
using detail::load_acquire_sys;
using detail::store_release_sys;

// Block b of rank `rank` tells every peer q "my slot of your half `parity` holds epoch `epoch`"
// (after this block's stores), then waits until every peer has said the same in its own flags.
__device__ void signal_and_wait(const OneShotPeers& p, int rank, int world, int parity,
                                uint32_t epoch) {
  __syncthreads();
  const int q = threadIdx.x;
  if (q < world) {
    const int slot = (blockIdx.x * 2 + parity) * kOneShotMaxRanks;
    __threadfence_system();  // this block's stores into q's buffer before the flag
    store_release_sys(p.flags[q] + slot + rank, epoch);
    const uint32_t* mine = p.flags[rank] + slot + q;
    const uint64_t t0 = global_ns();
    while (load_acquire_sys(mine) < epoch)
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

// x [n] in vectors of kVec<T> (n a multiple of kVec, x 16-byte aligned: every load and store is
// 16 bytes, so a remote store over NVLink moves a whole vector); the tail path below takes
// anything else one element at a time. Sums run in rank order in fp32 either way, so the vector
// path gives the same bits as the scalar one.
template <typename T, bool kVector>
__global__ void __launch_bounds__(kThreads)
    one_shot_kernel(T* x, int64_t n, int rank, int world, OneShotPeers p, uint32_t* counters) {
  // PDL (pdl.cuh): the next kernel (a GEMV) may be scheduled at once and stream its weights
  // while this one waits for its peers; this one waits for its predecessor (the partial sums in
  // x, the counters of the call before) here.
  detail::pdl_launch_dependents();
  detail::pdl_wait();
  constexpr int V = kVector ? kVec<T> : 1;
  using Unit = std::conditional_t<kVector, uint4, T>;
  const int64_t units = n / V;  // vectors (or elements)
  const int64_t chunk = (units + gridDim.x - 1) / gridDim.x;
  const int64_t begin = blockIdx.x * chunk, end = min(units, begin + chunk);
  const uint32_t epoch = counters[blockIdx.x] + 1;  // the same in every block (see the end)
  const int parity = static_cast<int>(epoch & 1u);
  // Half `parity` of rank q's buffer, slot s: [s · slot_units, (s + 1) · slot_units) units.
  const int64_t slot_units = p.slot_bytes / static_cast<int64_t>(sizeof(Unit));
  const int64_t half = static_cast<int64_t>(world) * slot_units;
  const Unit* xs = reinterpret_cast<const Unit*>(x);
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const Unit v = xs[i];
#pragma unroll
    for (int q = 0; q < kOneShotMaxRanks; ++q)  // every peer's store in flight at once
      if (q < world) static_cast<Unit*>(p.stage[q])[parity * half + rank * slot_units + i] = v;
  }
  signal_and_wait(p, rank, world, parity, epoch);
  const Unit* mine = static_cast<const Unit*>(p.stage[rank]) + parity * half;
  Unit* out = reinterpret_cast<Unit*>(x);
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    Unit in[kOneShotMaxRanks];
#pragma unroll
    for (int q = 0; q < kOneShotMaxRanks; ++q)
      if (q < world) in[q] = mine[q * slot_units + i];
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
    Unit o;
    T* ot = reinterpret_cast<T*>(&o);
#pragma unroll
    for (int e = 0; e < V; ++e) ot[e] = from_f<T>(s[e]);
    out[i] = o;
  }
  // Every counter moves to this call's epoch, the idle blocks' too (block 0 writes those; no
  // block of this call reads them), so the next call's blocks share one epoch and one parity
  // whatever its grid: a half is reused only two calls later, when every peer is done with it.
  if (threadIdx.x == 0) counters[blockIdx.x] = epoch;
  if (blockIdx.x == 0)
    for (int b = gridDim.x + threadIdx.x; b < kOneShotMaxBlocks; b += kThreads) counters[b] = epoch;
}

// Small messages (≤ kOneShotLLMaxBytes, a multiple of 8 bytes, 8-byte aligned): the same push
// and rank-order sum without the flags. Every 8 bytes of x travel as one 16-byte LL word {4
// bytes, epoch, 4 bytes, epoch} (NCCL's low-latency protocol): each 8-byte half of a 16-byte
// store lands whole, so a word whose two epochs match holds its data, and the reader needs no
// system fence, no flag and no second NVLink crossing for the flag. Twice the bytes on the link,
// which small messages do not feel.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    one_shot_ll_kernel(T* x, int64_t units, int rank, int world, OneShotPeers p,
                       uint32_t* counters) {
  detail::pdl_launch_dependents();
  detail::pdl_wait();
  constexpr int V = 8 / static_cast<int>(sizeof(T));  // elements of a unit
  const int64_t chunk = (units + gridDim.x - 1) / gridDim.x;
  const int64_t begin = blockIdx.x * chunk, end = min(units, begin + chunk);
  const uint32_t epoch = counters[blockIdx.x] + 1;  // the same in every block
  const int parity = static_cast<int>(epoch & 1u);
  // The LL region follows the flag path's two halves (one_shot_stage_bytes); its half `parity`,
  // slot s: LL words [s · slot_words, (s + 1) · slot_words).
  const int64_t region = 2 * static_cast<int64_t>(world) * p.slot_bytes / 16;
  constexpr int64_t slot_words = 2 * kOneShotLLMaxBytes / 16;
  const int64_t half = static_cast<int64_t>(world) * slot_words;
  uint2* xs = reinterpret_cast<uint2*>(x);
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const uint2 d = xs[i];
    const uint4 w = make_uint4(d.x, epoch, d.y, epoch);
#pragma unroll
    for (int q = 0; q < kOneShotMaxRanks; ++q)
      if (q < world && q != rank)
        detail::store_relaxed_sys(
            static_cast<uint4*>(p.stage[q]) + region + parity * half + rank * slot_words + i, w);
  }
  const uint4* mine = static_cast<const uint4*>(p.stage[rank]) + region + parity * half;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const uint2 own = xs[i];
    float s[V];
#pragma unroll
    for (int e = 0; e < V; ++e) s[e] = 0.0f;
#pragma unroll
    for (int q = 0; q < kOneShotMaxRanks; ++q) {
      if (q >= world) break;
      uint2 d = own;
      if (q != rank) {
        const uint4* src = mine + q * slot_words + i;
        uint4 w = detail::load_relaxed_sys(src);
        if (w.y != epoch || w.w != epoch) {
          const uint64_t t0 = global_ns();
          do {
            if (global_ns() - t0 > kOneShotTimeoutNs) __trap();  // a peer never came
            w = detail::load_relaxed_sys(src);
          } while (w.y != epoch || w.w != epoch);
        }
        d = make_uint2(w.x, w.z);
      }
      const T* v = reinterpret_cast<const T*>(&d);
#pragma unroll
      for (int e = 0; e < V; ++e) s[e] += to_f(v[e]);
    }
    uint2 o;
    T* ot = reinterpret_cast<T*>(&o);
#pragma unroll
    for (int e = 0; e < V; ++e) ot[e] = from_f<T>(s[e]);
    xs[i] = o;
  }
  if (threadIdx.x == 0) counters[blockIdx.x] = epoch;
  if (blockIdx.x == 0)
    for (int b = gridDim.x + threadIdx.x; b < kOneShotMaxBlocks; b += kThreads) counters[b] = epoch;
}

}  // namespace

Status one_shot_all_reduce(void* x, DType dtype, int64_t n, int rank, int world,
                           const OneShotPeers& peers, uint32_t* counters, cudaStream_t stream) {
  if (world < 1 || world > kOneShotMaxRanks || rank < 0 || rank >= world)
    return Status::error("one_shot_all_reduce: rank {} of {} (at most {} ranks)", rank, world,
                         kOneShotMaxRanks);
  if (n <= 0) return Status();
  if (n * static_cast<int64_t>(dtype_bytes(dtype, 1)) > peers.slot_bytes)
    return Status::error("one_shot_all_reduce: {} elements of {} do not fit the {}-byte slots", n,
                         dtype_name(dtype), peers.slot_bytes);
  // Enough blocks to keep NVLink busy at a few hundred KB, few enough to stay co-resident: one
  // 16-byte vector (or element) per thread per pass, up to 4 passes per block.
  const int elem = static_cast<int>(dtype_bytes(dtype, 1));
  const bool vector = elem > 0 && (n * elem) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(x) % 16 == 0;  // stages: cudaMalloc, aligned
  const int64_t units = vector ? n * elem / 16 : n;
  const int blocks = static_cast<int>(
      std::min<int64_t>(kOneShotMaxBlocks, (units + 4 * kThreads - 1) / (4 * kThreads)));
  // The LL path: 8-byte units, one per thread and pass (its words take twice the slot bytes).
  const int64_t bytes = n * elem;
  const bool ll = bytes <= kOneShotLLMaxBytes && bytes % 8 == 0 &&
                  reinterpret_cast<uintptr_t>(x) % 8 == 0 && peers.slot_bytes % 16 == 0;
  const int ll_blocks = static_cast<int>(
      std::min<int64_t>(kOneShotMaxBlocks, (bytes / 8 + 2 * kThreads - 1) / (2 * kThreads)));
  auto launch = [&]<typename T>(T* p) {
    if (ll)
      return detail::launch_pdl(one_shot_ll_kernel<T>, ll_blocks, kThreads, 0, stream, p, bytes / 8,
                                rank, world, peers, counters);
    return vector ? detail::launch_pdl(one_shot_kernel<T, true>, blocks, kThreads, 0, stream, p, n,
                                       rank, world, peers, counters)
                  : detail::launch_pdl(one_shot_kernel<T, false>, blocks, kThreads, 0, stream, p, n,
                                       rank, world, peers, counters);
  };
  cudaError_t e = cudaSuccess;
  switch (dtype) {
    case DType::kF32:
      e = launch(static_cast<float*>(x));
      break;
    case DType::kBF16:
      e = launch(static_cast<__nv_bfloat16*>(x));
      break;
    default:
      return Status::error("one_shot_all_reduce: dtype {} not built (f32, bf16)",
                           dtype_name(dtype));
  }
  CEILING_CUDA_RETURN(e);
  return Status();
}

}  // namespace ceiling::cuda
