// Napkin math (H100, 4096 → 14336 at M = 1): 117 MB of weights, 8 KB of x; at ~3 TB/s the floor is
// ~39 µs. The kernel is built to stream W at the memory roof: 16-byte non-allocating loads,
// kUnroll·kRows loads in flight per thread before any math, a few thousand CTAs, x re-read from L1.
#include "core/check.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemv.h"

namespace ceiling::cuda {
namespace {

using detail::bf16;

constexpr int kThreads = 128;

__device__ __forceinline__ void store_out(bf16* p, float v) { *p = __float2bfloat16(v); }
__device__ __forceinline__ void store_out(float* p, float v) { *p = v; }

// CTA b computes rows [b·kRows, b·kRows + kRows) of W for all M ≤ kMaxM rows of x. Thread t
// owns the 8-element K chunks t, t + kThreads, ...; partial sums are reduced across the CTA.
template <int kMaxM, int kRows, int kUnroll, typename OutT>
__global__ void __launch_bounds__(kThreads, 1) gemv_kernel(const bf16* __restrict__ x,
                                                        const bf16* __restrict__ w,
                                                        const bf16* __restrict__ bias,
                                                        OutT* __restrict__ out, int M, int N,
                                                        int K) {
  const int chunks = K / 8;
  const int n0 = blockIdx.x * kRows;
  const bf16* wrow[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) wrow[r] = w + static_cast<int64_t>(min(n0 + r, N - 1)) * K;

  float acc[kMaxM][kRows] = {};
  auto fma_chunk = [&](const detail::Bf16x8 (&wv)[kRows], int c) {
    float wf[kRows][8];
#pragma unroll
    for (int r = 0; r < kRows; ++r) detail::to_float8(wv[r], wf[r]);
#pragma unroll
    for (int m = 0; m < kMaxM; ++m) {
      if (m < M) {
        float xf[8];
        detail::to_float8(detail::load8(x + static_cast<int64_t>(m) * K + c * 8), xf);
#pragma unroll
        for (int r = 0; r < kRows; ++r)
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[m][r] = fmaf(xf[e], wf[r][e], acc[m][r]);
      }
    }
  };

  int c = threadIdx.x;
  for (; c + (kUnroll - 1) * kThreads < chunks; c += kUnroll * kThreads) {
    detail::Bf16x8 wv[kUnroll][kRows];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int r = 0; r < kRows; ++r) wv[u][r] = detail::load8_stream(wrow[r] + (c + u * kThreads) * 8);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) fma_chunk(wv[u], c + u * kThreads);
  }
  for (; c < chunks; c += kThreads) {
    detail::Bf16x8 wv[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) wv[r] = detail::load8_stream(wrow[r] + c * 8);
    fma_chunk(wv, c);
  }

  constexpr int kWarps = kThreads / 32;
  __shared__ float partial[kWarps][kMaxM * kRows];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int m = 0; m < kMaxM; ++m)
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float s = detail::warp_sum(acc[m][r]);
      if (lane == 0) partial[warp][m * kRows + r] = s;
    }
  __syncthreads();
  for (int i = threadIdx.x; i < kMaxM * kRows; i += kThreads) {
    const int m = i / kRows, n = n0 + i % kRows;
    if (m < M && n < N) {
      float s = 0.0f;
#pragma unroll
      for (int j = 0; j < kWarps; ++j) s += partial[j][i];
      if (bias) s += __bfloat162float(bias[n]);
      store_out(out + static_cast<int64_t>(m) * N + n, s);
    }
  }
}

// Any K and alignment: one warp per output row n, all M rows of x.
template <typename OutT>
__global__ void gemv_scalar_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w,
                                   const bf16* __restrict__ bias, OutT* __restrict__ out, int M,
                                   int N, int K) {
  const int n = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x & 31;
  if (n >= N) return;
  const bf16* wr = w + static_cast<int64_t>(n) * K;
  for (int m = 0; m < M; ++m) {
    float s = 0.0f;
    for (int k = lane; k < K; k += 32)
      s = fmaf(__bfloat162float(x[static_cast<int64_t>(m) * K + k]), __bfloat162float(wr[k]), s);
    s = detail::warp_sum(s);
    if (lane == 0) store_out(out + static_cast<int64_t>(m) * N + n, s + (bias ? __bfloat162float(bias[n]) : 0.0f));
  }
}

template <int kMaxM, int kRows, int kUnroll, typename OutT>
void launch_fast(const bf16* x, const bf16* w, const bf16* bias, OutT* out, int M, int N, int K,
                 cudaStream_t s) {
  gemv_kernel<kMaxM, kRows, kUnroll, OutT>
      <<<detail::ceil_div(N, kRows), kThreads, 0, s>>>(x, w, bias, out, M, N, K);
}

// The one place that maps M to a kernel configuration (rows per CTA shrink as M grows, keeping
// kMaxM·kRows accumulators and kUnroll·kRows in-flight loads within the register budget).
template <typename OutT>
void dispatch(const bf16* x, const bf16* w, const bf16* bias, OutT* out, int M, int N, int K,
              cudaStream_t s) {
  if (M <= 1) return launch_fast<1, 4, 4>(x, w, bias, out, M, N, K, s);
  if (M <= 2) return launch_fast<2, 4, 4>(x, w, bias, out, M, N, K, s);
  if (M <= 4) return launch_fast<4, 4, 2>(x, w, bias, out, M, N, K, s);
  if (M <= 8) return launch_fast<8, 2, 2>(x, w, bias, out, M, N, K, s);
  return launch_fast<16, 2, 2>(x, w, bias, out, M, N, K, s);
}

template <typename OutT>
Status run(const bf16* x, const bf16* w, const bf16* bias, OutT* out, int M, int N, int K,
           cudaStream_t s) {
  const bool fast = K % 8 == 0 && detail::aligned16(x) && detail::aligned16(w);
  if (fast) {
    dispatch(x, w, bias, out, M, N, K, s);
  } else {
    constexpr int kWarps = 4;
    gemv_scalar_kernel<<<detail::ceil_div(N, kWarps), 32 * kWarps, 0, s>>>(x, w, bias, out, M, N, K);
  }
  CEILING_CUDA_RETURN_LAST();
  return Status();
}

}  // namespace

int gemv_ctas(int M, int N) { return static_cast<int>(detail::ceil_div(N, M <= 4 ? 4 : 2)); }

Status gemv(const bf16* x, const bf16* w, const bf16* bias, void* out, DType out_dtype, int M,
            int N, int K, cudaStream_t stream) {
  if (M < 1 || M > kGemvMaxM)
    return Status::error("gemv: M {} outside [1, {}] (use the cuBLASLt path)", M, kGemvMaxM);
  if (N <= 0 || K <= 0) return Status::error("gemv: bad shape N {} K {}", N, K);
  switch (out_dtype) {
    case DType::kBF16: return run(x, w, bias, static_cast<bf16*>(out), M, N, K, stream);
    case DType::kF32: return run(x, w, bias, static_cast<float*>(out), M, N, K, stream);
    default: return Status::error("gemv: out dtype {} not supported (bf16, f32)", dtype_name(out_dtype));
  }
}

}  // namespace ceiling::cuda
