// Napkin math (H100, 4096 → 14336 at M = 1): 117 MB of weights, 8 KB of x; at ~3 TB/s the floor is
// ~39 µs. The kernel is built to stream W at the memory roof: 16-byte non-allocating loads,
// kUnroll·kRows loads in flight per thread before any math, a few thousand CTAs, x re-read from L1.
#include "core/check.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemv.h"

namespace ceiling::cuda {
namespace {

using detail::bf16;

__device__ __forceinline__ void store_out(bf16* p, float v) {
  *p = __float2bfloat16(v);
}
__device__ __forceinline__ void store_out(float* p, float v) {
  *p = v;
}

// CTA b computes rows [b·kRows, b·kRows + kRows) of W for all M ≤ kMaxM rows of x. Thread t
// owns the 8-element K chunks t, t + kThreads, ...; partial sums are reduced across the CTA.
template <int kMaxM, int kRows, int kUnroll, int kThreads, typename OutT>
__global__ void __launch_bounds__(kThreads, 1)
    gemv_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w,
                const bf16* __restrict__ bias, OutT* __restrict__ out, int M, int N, int K) {
  // Programmatic dependent launch: a following PDL-launched kernel may start once every CTA of
  // this grid has started; it waits (griddepcontrol.wait) before touching what this one writes.
  asm volatile("griddepcontrol.launch_dependents;");
  const int chunks = K / 8;
  const int n0 = blockIdx.x * kRows;
  const bf16* wrow[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) wrow[r] = w + static_cast<int64_t>(min(n0 + r, N - 1)) * K;

  float acc[kMaxM][kRows] = {};
  auto fma_chunk = [&](const detail::Bf16x8(&wv)[kRows], int c) {
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

  // The weights do not depend on the previous kernel, x and out do: the first weight loads are
  // issued before waiting for the previous kernel (a no-op when launched without PDL), so a
  // PDL-launched GEMV streams weights during its predecessor's tail.
  bool waited = false;
  const auto wait_producer = [&] {
    if (!waited) asm volatile("griddepcontrol.wait;" ::: "memory");
    waited = true;
  };
  int c = threadIdx.x;
  for (; c + (kUnroll - 1) * kThreads < chunks; c += kUnroll * kThreads) {
    detail::Bf16x8 wv[kUnroll][kRows];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        wv[u][r] = detail::load8_stream(wrow[r] + (c + u * kThreads) * 8);
    wait_producer();
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) fma_chunk(wv[u], c + u * kThreads);
  }
  for (; c < chunks; c += kThreads) {
    detail::Bf16x8 wv[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) wv[r] = detail::load8_stream(wrow[r] + c * 8);
    wait_producer();
    fma_chunk(wv, c);
  }
  wait_producer();  // threads without chunks still write out below

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
    if (lane == 0)
      store_out(out + static_cast<int64_t>(m) * N + n,
                s + (bias ? __bfloat162float(bias[n]) : 0.0f));
  }
}

// Launched with programmatic stream serialization (PDL): see gemv_kernel.
template <int kMaxM, int kRows, int kUnroll, int kThreads = 128, typename OutT>
cudaError_t launch_fast(const bf16* x, const bf16* w, const bf16* bias, OutT* out, int M, int N,
                        int K, cudaStream_t s) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(detail::ceil_div(N, kRows));
  cfg.blockDim = dim3(kThreads);
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, gemv_kernel<kMaxM, kRows, kUnroll, kThreads, OutT>, x, w, bias,
                            out, M, N, K);
}

// The one place that maps M to a kernel configuration (rows per CTA shrink as M grows, keeping
// kMaxM·kRows accumulators and kUnroll·kRows in-flight loads within the register budget).
// M = 1: t128 r2 u2 was the most even of the configurations measured side by side
// (linear_gemv_cfg cases; bench/notes.md).
template <typename OutT>
cudaError_t dispatch(const bf16* x, const bf16* w, const bf16* bias, OutT* out, int M, int N, int K,
                     cudaStream_t s) {
  if (M <= 1) return launch_fast<1, 2, 2>(x, w, bias, out, M, N, K, s);
  if (M <= 2) return launch_fast<2, 2, 2>(x, w, bias, out, M, N, K, s);
  if (M <= 4) return launch_fast<4, 2, 2>(x, w, bias, out, M, N, K, s);
  if (M <= 8) return launch_fast<8, 2, 2>(x, w, bias, out, M, N, K, s);
  return launch_fast<16, 2, 2>(x, w, bias, out, M, N, K, s);
}

// M = 1 configurations the benchmark compares (gemv_with_config).
template <typename OutT>
bool dispatch_config(const GemvConfig& c, const bf16* x, const bf16* w, const bf16* bias, OutT* out,
                     int N, int K, cudaStream_t s, cudaError_t* err) {
  const auto is = [&](int t, int r, int u) {
    return c.threads == t && c.rows == r && c.unroll == u;
  };
  cudaError_t e;
  if (is(128, 4, 4))
    e = launch_fast<1, 4, 4, 128>(x, w, bias, out, 1, N, K, s);
  else if (is(128, 2, 4))
    e = launch_fast<1, 2, 4, 128>(x, w, bias, out, 1, N, K, s);
  else if (is(128, 1, 4))
    e = launch_fast<1, 1, 4, 128>(x, w, bias, out, 1, N, K, s);
  else if (is(128, 2, 2))
    e = launch_fast<1, 2, 2, 128>(x, w, bias, out, 1, N, K, s);
  else if (is(256, 1, 2))
    e = launch_fast<1, 1, 2, 256>(x, w, bias, out, 1, N, K, s);
  else if (is(256, 2, 2))
    e = launch_fast<1, 2, 2, 256>(x, w, bias, out, 1, N, K, s);
  else if (is(256, 1, 4))
    e = launch_fast<1, 1, 4, 256>(x, w, bias, out, 1, N, K, s);
  else if (is(64, 4, 4))
    e = launch_fast<1, 4, 4, 64>(x, w, bias, out, 1, N, K, s);
  else
    return false;
  *err = e;
  return true;
}

template <typename OutT>
Status run(const bf16* x, const bf16* w, const bf16* bias, OutT* out, int M, int N, int K,
           cudaStream_t s, const GemvConfig* cfg = nullptr) {
  const bool fast = K % 8 == 0 && detail::aligned16(x) && detail::aligned16(w);
  if (cfg) {
    if (!fast || M != 1)
      return Status::error("gemv_with_config: needs M 1 and K % 8 == 0 (M {} K {})", M, K);
    cudaError_t e = cudaSuccess;
    if (!dispatch_config(*cfg, x, w, bias, out, N, K, s, &e))
      return Status::error("gemv_with_config: threads {} rows {} unroll {} not built", cfg->threads,
                           cfg->rows, cfg->unroll);
    CEILING_CUDA_RETURN(e);
  } else if (fast) {
    CEILING_CUDA_RETURN(dispatch(x, w, bias, out, M, N, K, s));
  } else {
    constexpr int kWarps = 4;
    gemv_scalar_kernel<<<detail::ceil_div(N, kWarps), 32 * kWarps, 0, s>>>(x, w, bias, out, M, N,
                                                                           K);
  }
  CEILING_CUDA_RETURN_LAST();
  return Status();
}

}  // namespace

int gemv_ctas(int /*M*/, int N) {
  return static_cast<int>(detail::ceil_div(N, 2));
}

Status gemv_with_config(const GemvConfig& cfg, const bf16* x, const bf16* w, const bf16* bias,
                        bf16* out, int N, int K, cudaStream_t stream) {
  if (N <= 0 || K <= 0) return Status::error("gemv_with_config: bad shape N {} K {}", N, K);
  return run(x, w, bias, out, 1, N, K, stream, &cfg);
}

Status gemv(const bf16* x, const bf16* w, const bf16* bias, void* out, DType out_dtype, int M,
            int N, int K, cudaStream_t stream) {
  if (M < 1 || M > kGemvMaxM)
    return Status::error("gemv: M {} outside [1, {}] (use the cuBLASLt path)", M, kGemvMaxM);
  if (N <= 0 || K <= 0) return Status::error("gemv: bad shape N {} K {}", N, K);
  switch (out_dtype) {
    case DType::kBF16:
      return run(x, w, bias, static_cast<bf16*>(out), M, N, K, stream);
    case DType::kF32:
      return run(x, w, bias, static_cast<float*>(out), M, N, K, stream);
    default:
      return Status::error("gemv: out dtype {} not supported (bf16, f32)", dtype_name(out_dtype));
  }
}

}  // namespace ceiling::cuda
