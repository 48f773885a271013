// Probe: how fast the H100/H200 streams an int4 weight image [N, K/2 bytes] in the access
// patterns ceiling's int4 kernels use, with no arithmetic — does the pattern alone cap them?
//   tile64   gemm_int4's small tiles: a CTA owns 128 rows and reads 64 bytes (128 k) of each
//            row per k tile, in 16-byte loads
//   tile128  the same with 128-byte pieces (the TMA kernel's boxes, r93)
//   contig   the same bytes per CTA as one contiguous run (a tiled weight layout)
// each with CTAs of 64 or 128 rows and 4, 8 or 16 k tiles of loads in flight per thread (the
// bytes in flight an SM, which sets the rate at a fixed latency).
// Four copies of the image rotate so no launch reads what the L2 holds. One line of JSON per
// pattern and timing: µs and GB/s per launch, median of 50 — a lone launch between two events,
// and a chain of 10 launches with programmatic dependent launch (each waits for its predecessor
// with griddepcontrol.wait before its loads, as ceiling's kernels and `bench kernels` do).
// Built as the CMake target int4_access_probe (src/bench/CMakeLists.txt); run it on the GPU.
#include <cuda_runtime.h>

#include <cstdio>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/pdl.cuh"
#include "probe_timing.h"

constexpr int kN = 28672, kRowBytes = 2048;  // Llama-3.1-8B gate/up, K = 4096 int4
constexpr int kThreads = 256;

using ceiling::cuda::detail::load16_stream;  // 16 bytes, no L1 allocation

// kPiece bytes of each of the CTA's kRows rows per k tile; kContig: the CTA's bytes contiguous.
template <int kPiece, bool kContig, int kRows, int kUnroll>
__global__ void __launch_bounds__(kThreads) probe(const char* __restrict__ w, unsigned* sink) {
  constexpr int kChunks = kRows * kPiece / 16;  // 16-byte loads a k tile
  constexpr int kPer = kChunks / kThreads;      // a thread's, a k tile
  constexpr int kTiles = kRowBytes / kPiece;
  const char* base = w + size_t(blockIdx.x) * kRows * kRowBytes;
  ceiling::cuda::detail::pdl_launch_dependents();
  ceiling::cuda::detail::pdl_wait();
  unsigned acc = 0;
  for (int kt = 0; kt < kTiles; kt += kUnroll) {
    uint4 v[kUnroll][kPer];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int c = threadIdx.x + i * kThreads;  // chunk of this k tile
        const size_t off = kContig ? (size_t(kt + u) * kChunks + c) * 16
                                   : size_t(c / (kPiece / 16)) * kRowBytes + (kt + u) * kPiece +
                                         (c % (kPiece / 16)) * 16;
        v[u][i] = load16_stream(base + off);
      }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int i = 0; i < kPer; ++i) acc ^= v[u][i].x ^ v[u][i].y ^ v[u][i].z ^ v[u][i].w;
  }
  if (acc == 0x12345678u) sink[0] = acc;  // keeps the loads
}

template <int kPiece, bool kContig, int kRows, int kUnroll>
void run(const char* name, char* const (&copies)[4], unsigned* sink) {
  const probes::PdlLaunch l{dim3(kN / kRows), dim3(kThreads)};
  for (int chain : {1, 10}) {
    const double us = probes::median_us(chain, [&](int r, int i) {
      cudaLaunchKernelEx(&l.cfg, probe<kPiece, kContig, kRows, kUnroll>,
                         static_cast<const char*>(copies[(r * chain + i) % 4]), sink);
    });
    const double bytes = double(kN) * kRowBytes;
    std::printf(
        "{\"pattern\": \"%s\", \"rows\": %d, \"unroll\": %d, \"in_flight_per_cta\": %d, "
        "\"chain\": %d, \"bytes\": %.0f, \"us\": %.2f, \"gbps\": %.0f}\n",
        name, kRows, kUnroll, kRows * kPiece * kUnroll, chain, bytes, us, bytes / us * 1e-3);
  }
}

int main() {
  char* copies[4];
  const size_t bytes = size_t(kN) * kRowBytes;
  for (auto& c : copies) {
    if (cudaMalloc(&c, bytes) != cudaSuccess) return 1;
    cudaMemset(c, 1, bytes);
  }
  unsigned* sink;
  cudaMalloc(&sink, 4);
  run<64, false, 128, 4>("tile64", copies, sink);
  run<64, false, 128, 8>("tile64", copies, sink);
  run<64, false, 128, 16>("tile64", copies, sink);
  run<64, false, 64, 8>("tile64", copies, sink);
  run<64, false, 64, 16>("tile64", copies, sink);
  run<128, false, 128, 4>("tile128", copies, sink);
  run<128, false, 128, 8>("tile128", copies, sink);
  run<64, true, 128, 4>("contig", copies, sink);
  run<64, true, 128, 8>("contig", copies, sink);
  run<64, true, 128, 16>("contig", copies, sink);
  run<64, true, 64, 16>("contig", copies, sink);
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) std::printf("{\"error\": \"%s\"}\n", cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
