// Probe: what a persistent layer kernel could take back from the kernel boundaries of a batch-1
// decode step. r128–r129 (bench/lowprec_notes.md) found the cost of a boundary in the next GEMV's
// ramp: its CTAs land only as its predecessor's leave, then stream after the PDL wait. A
// persistent kernel keeps every CTA resident, has each CTA issue its first loads of the next
// phase before a grid barrier, and replaces the launch with the barrier. Before building one for
// the engine, this measures the difference on the bytes alone.
//
// A "layer" of the fp8 Llama-3.1-8B at batch 1 as five dependent phases: QKV (25.2 MB), attention
// (8 CTAs busy ~3 µs, DRAM idle), o (16.8 MB), gate/up (117.4 MB), down (58.7 MB). A stream phase
// reads its bytes in slices of 8 16-byte non-allocating loads a thread (16 KB at the default 128
// threads a CTA; -DPROBE_THREADS=256 / 512 build larger CTAs and slices) and, after its
// dependency, an 8 KB vector x that the previous phase wrote (the GEMV's input); each slice's
// XOR goes into the next x. Eight layers of distinct bytes (1.75 GB: no L2 reuse).
//   chain       one kernel a phase under PDL, as the engine: 2 of a thread's 8 loads before
//               griddepcontrol.wait, then x, then the rest
//   persistent  one cooperative kernel for the 8 layers, SMs × k CTAs, slices grid-strided; at
//               the end of a phase a CTA issues the loads of its first `depth` slices of the next
//               phase (0, 1, 2, 4; registers), then a grid barrier (a global counter), then x,
//               then the rest
//   barrier     the grid barrier alone, µs each
//   flag        the chain, but the attention waits on a counter of the QKV phase's finished CTAs
//               instead of griddepcontrol.wait (flag=qkv), and also o on a counter of the
//               attention's CTAs (flag=both): what a kernel boundary's grid-completion wait costs
//               against a per-producer counter (r157)
//   stream      all 8 layers' bytes in one kernel (no dependency: the bytes' floor here)
// -DPROBE_1B: the phases of the bf16 Llama-3.2-1B instead (QKV 12.6 MB, o 8.4, gate/up 67.1,
// down 33.6; the same ~3 µs attention). -DPROBE_ATTN_SPIN=N: the attention phase spins N cycles
// (default 6000, ~3 µs). Those variants are built by hand: the target's nvcc command with the
// -D added (r157 ran the 1B with 6000, 2000 and 0).
// One JSON line per variant: µs a layer, median of 50 runs of 8 layers.
// Built as the CMake target persistent_layer_probe (src/bench/CMakeLists.txt); run on the GPU.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/pdl.cuh"
#include "probe_timing.h"

namespace d = ceiling::cuda::detail;

// Threads a CTA; a slice is 8 loads of each thread.
#ifndef PROBE_THREADS
#define PROBE_THREADS 128
#endif
constexpr int kThreads = PROBE_THREADS, kPer = 8, kSlice = kThreads * 16 * kPer;
constexpr int kLayers = 8, kPhases = 5, kAttn = 1, kXWords = 2048;  // x: 8 KB
#ifndef PROBE_ATTN_SPIN
#define PROBE_ATTN_SPIN 6000
#endif
constexpr long long kAttnSpin = PROBE_ATTN_SPIN;  // cycles: 6000 ~3 µs
// Slices of each phase (the fp8 bytes of the 8B's projections / kSlice).
__host__ __device__ constexpr int slices(int p) {
  constexpr int k16 = kSlice / 16384;  // 16 KB units a slice
#ifdef PROBE_1B  // the bf16 Llama-3.2-1B's projections: 12.6, 8.4, 67.1, 33.6 MB
  return (p == 0 ? 768 : p == 2 ? 512 : p == 3 ? 4096 : p == 4 ? 2048 : 0) / k16;
#else
  return (p == 0 ? 1536 : p == 2 ? 1024 : p == 3 ? 7168 : p == 4 ? 3584 : 0) / k16;
#endif
}

struct Layout {
  const char* phase[kLayers][kPhases];
};

// The x phase (l, p) reads, and the one it writes: two buffers of kXWords, alternating.
__host__ __device__ inline unsigned* x_of(unsigned* xbuf, int l, int p, bool out) {
  return xbuf + ((l * kPhases + p + (out ? 1 : 0)) % 2) * kXWords;
}

__device__ __forceinline__ void load_slice(const char* s, uint4 (&v)[kPer], int from, int to) {
#pragma unroll
  for (int i = 0; i < kPer; ++i)
    if (i >= from && i < to) v[i] = d::load16_stream(s + (threadIdx.x + i * kThreads) * 16);
}

__device__ __forceinline__ unsigned fold(const uint4 (&v)[kPer]) {
  unsigned a = 0;
#pragma unroll
  for (int i = 0; i < kPer; ++i) a ^= v[i].x ^ v[i].y ^ v[i].z ^ v[i].w;
  return a;
}

// x of the previous phase: 8 KB, 16 bytes a thread × 4.
__device__ __forceinline__ unsigned read_x(const unsigned* x) {
  unsigned a = 0;
#pragma unroll
  for (int i = 0; i < kXWords * 4 / (kThreads * 16); ++i) {  // from L2 (another SM wrote it)
    const uint4 v = __ldcg(reinterpret_cast<const uint4*>(x) + threadIdx.x + i * kThreads);
    a ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  return a;
}

__device__ __forceinline__ void spin(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

// ---- chain: one kernel a phase (kFlags: the flag variant's counters, else exactly r131's) ----
__device__ __forceinline__ void wait_count(const unsigned* ctr, unsigned target) {
  if (threadIdx.x == 0) {
    unsigned v;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(ctr) : "memory");
    } while (v < target);
  }
  __syncthreads();
}
__device__ __forceinline__ void signal_done(unsigned* ctr) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(ctr, 1u);
  }
}
// The wait on the previous phase: griddepcontrol.wait, or (flag, when `wait` is set) its counter.
template <bool kFlags>
__device__ __forceinline__ void wait_phase(const unsigned* wait, unsigned target) {
  if (kFlags && wait)
    wait_count(wait, target);
  else
    d::pdl_wait();
}

// wait: a counter to wait for (else griddepcontrol.wait); done: a counter to add 1 to at the end.
template <bool kFlags>
__global__ void __launch_bounds__(kThreads)
    chain_stream(const char* w, const unsigned* x, unsigned* xout, const unsigned* wait,
                 unsigned target, unsigned* done) {
  d::pdl_launch_dependents();
  uint4 v[kPer];
  const char* s = w + size_t(blockIdx.x) * kSlice;
  load_slice(s, v, 0, 2);
  wait_phase<kFlags>(wait, target);
  unsigned a = read_x(x);
  load_slice(s, v, 2, kPer);
  a ^= fold(v);
  if (threadIdx.x == 0 || a == 0x12345678u) xout[blockIdx.x % kXWords] = a;  // keeps every load
  if (kFlags && done) signal_done(done);
}

template <bool kFlags>
__global__ void __launch_bounds__(32)
    chain_attn(const unsigned* x, unsigned* xout, const unsigned* wait, unsigned target,
               unsigned* done) {
  d::pdl_launch_dependents();
  wait_phase<kFlags>(wait, target);
  const unsigned a = __ldcg(x + threadIdx.x);
  spin(kAttnSpin);
  if (threadIdx.x == 0) xout[blockIdx.x] = a;
  if (kFlags && done) signal_done(done);
}

// ---- persistent: one kernel for the 8 layers ----
__device__ __forceinline__ void grid_barrier(unsigned* count, unsigned target) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(count, 1u);
    while (*reinterpret_cast<volatile unsigned*>(count) < target) {
    }
    __threadfence();
  }
  __syncthreads();
}

// kDepth: how many of its first slices of the next phase a CTA requests before the barrier (0:
// none; registers).
template <int kDepth>
__global__ void __launch_bounds__(kThreads)
    persistent(Layout lay, unsigned* xbuf, unsigned* count) {
  const unsigned G = gridDim.x;
  constexpr int kD = kDepth > 0 ? kDepth : 1;
  uint4 pf[kD][kPer];  // this CTA's first slices of the next phase
  int have_pf = 0;
  unsigned barrier = 0;
  for (int l = 0; l < kLayers; ++l)
    for (int p = 0; p < kPhases; ++p) {
      const unsigned* x = x_of(xbuf, l, p, false);
      unsigned* xout = x_of(xbuf, l, p, true);
      if (p == kAttn) {
        if (blockIdx.x < 8) {
          const unsigned a = __ldcg(x + threadIdx.x % 32);
          spin(kAttnSpin);
          if (threadIdx.x == 0) xout[blockIdx.x] = a;
        }
      } else {
        unsigned a = read_x(x);
#pragma unroll
        for (int j = 0; j < kD; ++j)
          if (j < have_pf) a ^= fold(pf[j]);
        for (int s = blockIdx.x + have_pf * G; s < slices(p); s += G) {
          uint4 v[kPer];
          load_slice(lay.phase[l][p] + size_t(s) * kSlice, v, 0, kPer);
          a ^= fold(v);
        }
        if (threadIdx.x == 0 || a == 0x12345678u) xout[blockIdx.x % kXWords] = a;
      }
      // The next phase's first slices of this CTA, before the barrier.
      const int nl = p + 1 < kPhases ? l : l + 1, np = (p + 1) % kPhases;
      have_pf = 0;
      if (kDepth > 0 && nl < kLayers && np != kAttn) {
#pragma unroll
        for (int j = 0; j < kD; ++j) {
          const int sl = blockIdx.x + j * G;
          if (sl < slices(np)) {
            load_slice(lay.phase[nl][np] + size_t(sl) * kSlice, pf[j], 0, kPer);
            have_pf = j + 1;
          }
        }
      }
      grid_barrier(count, (++barrier) * G);
    }
}

// The barrier's own cost: `n` grid barriers and nothing else (all CTAs resident).
__global__ void __launch_bounds__(kThreads) barriers_only(unsigned* count, int n) {
  for (int b = 1; b <= n; ++b) grid_barrier(count, b * gridDim.x);
}

// ---- stream: every byte in one kernel ----
__global__ void __launch_bounds__(kThreads)
    stream_all(const char* w, size_t slices, unsigned* sink) {
  unsigned a = 0;
  for (size_t s = blockIdx.x; s < slices; s += gridDim.x) {
    uint4 v[kPer];
    load_slice(w + s * kSlice, v, 0, kPer);
    a ^= fold(v);
  }
  if (a == 0x12345678u) sink[0] = a;
}

int main() {
  size_t per_layer = 0;
  for (int p = 0; p < kPhases; ++p) per_layer += size_t(slices(p)) * kSlice;
  char* w = nullptr;
  if (cudaMalloc(&w, per_layer * kLayers) != cudaSuccess) return 1;
  cudaMemset(w, 1, per_layer * kLayers);
  Layout lay{};
  size_t off = 0;
  for (int l = 0; l < kLayers; ++l)
    for (int p = 0; p < kPhases; ++p) {
      lay.phase[l][p] = w + off;
      off += size_t(slices(p)) * kSlice;
    }
  unsigned *xbuf = nullptr, *count = nullptr;
  cudaMalloc(&xbuf, 2 * kXWords * sizeof(unsigned));
  cudaMemset(xbuf, 0, 2 * kXWords * sizeof(unsigned));
  cudaMalloc(&count, sizeof(unsigned));
  unsigned* ctrs = nullptr;  // flag: per layer, QKV's and the attention's finished CTAs
  cudaMalloc(&ctrs, 2 * kLayers * sizeof(unsigned));
  int dev = 0, sms = 0, per_sm = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, persistent<1>, kThreads, 0);

  const double mb = per_layer / 1e6;
  static constexpr int kBarriers = kLayers * kPhases;
  for (int rep = 0; rep < 2; ++rep) {
    // chain (mode -1), and flag: 0 the chain's boundaries with the flag kernels and a memset of
    // the counters before each run (its control), 1 the attention waits on QKV's counter, 2 and o
    // on the attention's
    for (int mode = -1; mode < 3; ++mode) {
      const bool flags = mode >= 0;
      const double us = probes::median_us(1, [&](int, int) {
        if (flags) cudaMemsetAsync(ctrs, 0, 2 * kLayers * sizeof(unsigned));
        for (int l = 0; l < kLayers; ++l)
          for (int p = 0; p < kPhases; ++p) {
            const unsigned* x = x_of(xbuf, l, p, false);
            unsigned* xout = x_of(xbuf, l, p, true);
            unsigned* qkv_done = ctrs + 2 * l;  // QKV's CTAs finished
            unsigned* attn_done = qkv_done + 1;
            if (p == kAttn) {
              const probes::PdlLaunch a{dim3(8), dim3(32)};
              cudaLaunchKernelEx(&a.cfg, flags ? chain_attn<true> : chain_attn<false>, x, xout,
                                 static_cast<const unsigned*>(mode >= 1 ? qkv_done : nullptr),
                                 unsigned(slices(0)), mode == 2 ? attn_done : nullptr);
            } else {
              const probes::PdlLaunch st{dim3(slices(p)), dim3(kThreads)};
              const bool o_waits = mode == 2 && p == kAttn + 1;
              cudaLaunchKernelEx(&st.cfg, flags ? chain_stream<true> : chain_stream<false>,
                                 lay.phase[l][p], x, xout,
                                 static_cast<const unsigned*>(o_waits ? attn_done : nullptr), 8u,
                                 p == 0 && mode >= 1 ? qkv_done : nullptr);
            }
          }
      });
      if (!flags)
        std::printf("{\"variant\": \"chain\", \"mb_per_layer\": %.1f, \"us_per_layer\": %.2f}\n",
                    mb, us / kLayers);
      else
        std::printf(
            "{\"variant\": \"flag\", \"flag\": \"%s\", \"mb_per_layer\": %.1f, "
            "\"us_per_layer\": %.2f}\n",
            mode == 0   ? "none"
            : mode == 1 ? "qkv"
                        : "both",
            mb, us / kLayers);
    }
    // persistent, SMs × k CTAs, with 0, 1, 2 or 4 of the next phase's slices requested before
    // the barrier
    for (int k = 1; k <= per_sm && k <= 8; k *= 2)
      for (int depth : {0, 1, 2, 4}) {
        const int G = sms * k;
        int fit = 0;
        const void* f = depth == 0   ? reinterpret_cast<const void*>(persistent<0>)
                        : depth == 1 ? reinterpret_cast<const void*>(persistent<1>)
                        : depth == 2 ? reinterpret_cast<const void*>(persistent<2>)
                                     : reinterpret_cast<const void*>(persistent<4>);
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, f, kThreads, 0);
        if (fit < k) continue;
        const double us = probes::median_us(1, [&](int, int) {
          cudaMemsetAsync(count, 0, sizeof(unsigned));
          void* args[] = {&lay, &xbuf, &count};
          cudaLaunchCooperativeKernel(f, dim3(G), dim3(kThreads), args, 0, nullptr);
        });
        std::printf(
            "{\"variant\": \"persistent\", \"depth\": %d, \"ctas\": %d, \"mb_per_layer\": "
            "%.1f, \"us_per_layer\": %.2f}\n",
            depth, G, mb, us / kLayers);
      }
    // the grid barrier alone: 40 in a launch
    for (int k : {1, 4}) {
      const int G = sms * k;
      const double us = probes::median_us(1, [&](int, int) {
        cudaMemsetAsync(count, 0, sizeof(unsigned));
        int n = kBarriers;
        void* args[] = {&count, &n};
        cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(barriers_only), dim3(G),
                                    dim3(kThreads), args, 0, nullptr);
      });
      std::printf("{\"variant\": \"barrier\", \"ctas\": %d, \"us_per_barrier\": %.2f}\n", G,
                  us / kBarriers);
    }
    // stream
    const double us = probes::median_us(1, [&](int, int) {
      stream_all<<<sms * 8, kThreads>>>(w, per_layer * kLayers / kSlice, count);
    });
    std::printf(
        "{\"variant\": \"stream\", \"mb_per_layer\": %.1f, \"us_per_layer\": %.2f, \"gbps\": "
        "%.0f}\n",
        mb, us / kLayers, per_layer / (us / kLayers) * 1e-3);
  }
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) std::printf("{\"error\": \"%s\"}\n", cudaGetErrorString(e));
  std::printf("{\"sms\": %d, \"persistent_ctas_per_sm\": %d}\n", sms, per_sm);
  return e == cudaSuccess ? 0 : 1;
}
