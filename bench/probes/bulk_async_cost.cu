// Probe: what one asynchronous bulk operation (cp.async.bulk.*, the TMA unit's path) costs a
// kernel in a chain of programmatic dependent launches (PDL). r101 added one
// cp.async.bulk.prefetch.L2 of each CTA's weight rows before griddepcontrol.wait to every
// weight kernel of the decode step, and every step got slower by about 1.5 µs a kernel whatever
// the kernel's size — as if a bulk operation added a fixed cost per launch, not per byte.
// The kernel streams its CTA's 16 KB slice of a buffer (128 threads, 16-byte non-allocating
// loads, two in flight a thread before the wait, as the GEMV), with one extra operation a CTA:
//   none        nothing (the reference)
//   pf16_pre    a 16-byte L2 prefetch of its own slice, before the wait
//   pfall_pre   an L2 prefetch of its whole slice, before the wait (r101)
//   pf16_post   a 16-byte L2 prefetch of its own slice, after the wait
//   pf16_other  a 16-byte L2 prefetch of bytes no kernel of the chain reads, before the wait
//   bulk16      a 16-byte cp.async.bulk global → shared on an mbarrier, awaited, before the wait
//   bulk16_post the same after the wait
// Grids of 256 and 4096 CTAs (4 MB, 64 MB); four rotating copies keep the reads out of L2. One
// line of JSON per mode, grid and chain length: µs per launch, median of 50, lone (chain 1, two
// events around it) and in chains of 20.
// Then the window experiment: chains of 10 pairs [busy, stream] — busy a latency-bound kernel of
// 8 CTAs that waits ~5 µs with DRAM idle (decode attention at batch 1: 8 CTAs, ~5 µs), stream
// the kernel above over 32 MB (2048 CTAs, the o projection's bf16 bytes of the 8B) — by who asks
// L2 for the stream's bytes during busy:
//   win_none    nobody (the stream's own loads, two a thread before its wait)
//   win_self    each stream CTA prefetches its whole slice before its wait (pfall_pre): those
//               resident during busy do so inside the window
//   win_busy    busy's CTAs prefetch the stream's whole region after their wait, then spin
// µs per pair, median of 50.
// Built as the CMake target bulk_async_probe (src/bench/CMakeLists.txt); run it on the GPU.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/pdl.cuh"
#include "probe_timing.h"

namespace d = ceiling::cuda::detail;

constexpr int kThreads = 128, kSlice = 16384, kPer = kSlice / (kThreads * 16);  // 8 loads
enum class Mode { kNone, kPf16Pre, kPfAllPre, kPf16Post, kPf16Other, kBulk16, kBulk16Post };

__device__ __forceinline__ void prefetch_l2(const void* p, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes));
}

__device__ __forceinline__ void bulk_load16(void* smem_dst, const void* src, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 16, [%2];" ::
          "r"(d::smem_addr(smem_dst)),
      "l"(src), "r"(bar)
      : "memory");
}

template <Mode kMode>
__global__ void __launch_bounds__(kThreads)
    stream(const char* __restrict__ w, const char* __restrict__ other, unsigned* sink) {
  __shared__ alignas(16) unsigned char buf[16];
  __shared__ alignas(8) uint64_t bar;
  const char* base = w + size_t(blockIdx.x) * kSlice;
  d::pdl_launch_dependents();
  const auto extra = [&] {
    if (threadIdx.x != 0) return;
    if constexpr (kMode == Mode::kPf16Pre || kMode == Mode::kPf16Post) prefetch_l2(base, 16);
    if constexpr (kMode == Mode::kPfAllPre) prefetch_l2(base, kSlice);
    if constexpr (kMode == Mode::kPf16Other) prefetch_l2(other + size_t(blockIdx.x) * kSlice, 16);
    if constexpr (kMode == Mode::kBulk16 || kMode == Mode::kBulk16Post) {
      const uint32_t b = d::smem_addr(&bar);
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b) : "memory");
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 16;" ::"r"(b) : "memory");
      bulk_load16(buf, base, b);
      asm volatile(
          "{\n.reg .pred p;\nWAIT:\nmbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n"
          "@!p bra WAIT;\n}" ::"r"(b)
          : "memory");
    }
  };
  constexpr bool kPost = kMode == Mode::kPf16Post || kMode == Mode::kBulk16Post;
  if constexpr (!kPost) extra();
  uint4 v[kPer];
#pragma unroll
  for (int i = 0; i < 2; ++i) v[i] = d::load16_stream(base + (threadIdx.x + i * kThreads) * 16);
  d::pdl_wait();
  if constexpr (kPost) extra();
#pragma unroll
  for (int i = 2; i < kPer; ++i) v[i] = d::load16_stream(base + (threadIdx.x + i * kThreads) * 16);
  unsigned acc = buf[threadIdx.x & 15];
#pragma unroll
  for (int i = 0; i < kPer; ++i) acc ^= v[i].x ^ v[i].y ^ v[i].z ^ v[i].w;
  if (acc == 0x12345678u) sink[0] = acc;  // keeps the loads
}

// The window's busy kernel: 8 CTAs; with kPrefetch lane t of each asks L2 for its 1/256 of
// [region, region + bytes) after the wait; then the CTA spins `cycles`.
template <bool kPrefetch>
__global__ void __launch_bounds__(32) busy(const char* region, size_t bytes, long long cycles) {
  d::pdl_launch_dependents();
  d::pdl_wait();
  if constexpr (kPrefetch) {
    const size_t share = bytes / (gridDim.x * 32);
    prefetch_l2(region + (blockIdx.x * 32 + threadIdx.x) * share, static_cast<uint32_t>(share));
  }
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

template <bool kBusyPrefetch, Mode kStreamMode>
void run_window(const char* name, char* const (&copies)[5], unsigned* sink) {
  constexpr int kStreamCtas = 2048, kBusyCtas = 8, kPairs = 10;
  constexpr long long kSpin = 10000;  // ~5 µs at 1.98 GHz
  const probes::PdlLaunch sl{dim3(kStreamCtas), dim3(kThreads)}, bl{dim3(kBusyCtas), dim3(32)};
  const double us = probes::median_us(kPairs, [&](int r, int i) {
    const char* w = copies[(r * kPairs + i) % 4];
    cudaLaunchKernelEx(&bl.cfg, busy<kBusyPrefetch>, w, size_t(kStreamCtas) * kSlice, kSpin);
    cudaLaunchKernelEx(&sl.cfg, stream<kStreamMode>, w, static_cast<const char*>(copies[4]), sink);
  });
  std::printf("{\"window\": \"%s\", \"stream_bytes\": %d, \"us_per_pair\": %.2f}\n", name,
              kStreamCtas * kSlice, us);
}

template <Mode kMode>
void run(const char* name, int ctas, char* const (&copies)[5], unsigned* sink) {
  const probes::PdlLaunch l{dim3(ctas), dim3(kThreads)};
  for (int chain : {1, 20}) {
    const double us = probes::median_us(chain, [&](int r, int i) {
      cudaLaunchKernelEx(&l.cfg, stream<kMode>,
                         static_cast<const char*>(copies[(r * chain + i) % 4]),
                         static_cast<const char*>(copies[4]), sink);
    });
    const double bytes = double(ctas) * kSlice;
    std::printf(
        "{\"mode\": \"%s\", \"ctas\": %d, \"bytes\": %.0f, \"chain\": %d, \"us\": %.2f, "
        "\"gbps\": %.0f}\n",
        name, ctas, bytes, chain, us, bytes / us * 1e-3);
  }
}

int main() {
  constexpr int kMaxCtas = 4096;
  char* copies[5];
  for (auto& c : copies) {
    if (cudaMalloc(&c, size_t(kMaxCtas) * kSlice) != cudaSuccess) return 1;
    cudaMemset(c, 1, size_t(kMaxCtas) * kSlice);
  }
  unsigned* sink;
  cudaMalloc(&sink, 4);
  for (int ctas : {256, kMaxCtas}) {
    run<Mode::kNone>("none", ctas, copies, sink);
    run<Mode::kPf16Pre>("pf16_pre", ctas, copies, sink);
    run<Mode::kPfAllPre>("pfall_pre", ctas, copies, sink);
    run<Mode::kPf16Post>("pf16_post", ctas, copies, sink);
    run<Mode::kPf16Other>("pf16_other", ctas, copies, sink);
    run<Mode::kBulk16>("bulk16", ctas, copies, sink);
    run<Mode::kBulk16Post>("bulk16_post", ctas, copies, sink);
    run<Mode::kNone>("none", ctas, copies, sink);  // drift check
  }
  for (int rep = 0; rep < 2; ++rep) {
    run_window<false, Mode::kNone>("win_none", copies, sink);
    run_window<false, Mode::kPfAllPre>("win_self", copies, sink);
    run_window<true, Mode::kNone>("win_busy", copies, sink);
  }
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) std::printf("{\"error\": \"%s\"}\n", cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
