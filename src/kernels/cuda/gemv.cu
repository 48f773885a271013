// Napkin math (H200, 4096 → 14336 at M = 1): 117 MB of weights, 8 KB of x; at the measured
// 4.65 TB/s the floor is 25.3 µs, and 4096 → 4096 (33.6 MB) is 7.2 µs. The streaming itself is
// easy; what is lost is a fixed ~2–4 µs per kernel (first-wave ramp, last-wave tail), which is
// 10–30 % of these shapes (bench/notes.md).
//
// The register kernel (M = 1): one CTA per kRows rows, 16-byte non-allocating loads,
// kUnroll·kRows loads in flight per thread before any math. 2 ≤ M ≤ 16: the tensor-core kernel of
// gemv_mma.cuh (same loads, the weights fed to mma.sync as they arrive). (A persistent ring kernel
// — one producer thread streaming W with cp.async.bulk into shared-memory stages — was built,
// measured at 52–80 % of read against this kernel's 74–97 % on every shape, and removed:
// bench/notes.md.)
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "core/check.h"
#include "kernels/cuda/activation.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/gemv_mma.cuh"
#include "kernels/cuda/pdl.cuh"

namespace ceiling::cuda {
namespace {

using detail::bf16;

__device__ __forceinline__ void store_out(bf16* p, float v) {
  *p = __float2bfloat16(v);
}
__device__ __forceinline__ void store_out(float* p, float v) {
  *p = v;
}

// ---- Register kernel (any M ≤ 16) ---------------------------------------------------------

// CTA b computes rows [b·kRows, b·kRows + kRows) of W for all M ≤ kMaxM rows of x. Thread t
// owns the 8-element K chunks t, t + kThreads, ...; partial sums are reduced across the CTA.
// kIn selects what the rows of x are (GemvInput): x itself, or RMSNorm(r)·γ of a residual row r:
// the dot product is taken with r·γ and scaled by rsqrt(mean(r²) + eps) at the end — each CTA
// reads all of r for its dot products anyway, so Σr² costs one FMA per element. `accumulate`:
// out = bf16(out + bf16(v)) (a residual add; each output element belongs to one CTA, so in place
// is race-free). `pairs`: CTA b takes the kRows/2 row pairs b·kRows/2 + j (pair p = rows a(p),
// b(p)) and writes per pair: with rope.D == 0 (W = [gate; up], N even) a = p, b = N/2 + p and out
// [M, N/2] = silu(bf16(gate)) · bf16(up) — silu_mul's values; with rope.D > 0 (W = fused QKV) a and
// b are elements i and i + D/2 of one head, rotated as rope_kv_write does: q heads back into out
// [M, N], k heads rotated and v heads as they are into the paged cache at the token's slot.
// Occupancy: the M = 1 kernel with the RMSNorm input (the decode step's QKV and gate/up, with
// their RoPE / SiLU epilogues) takes 71 registers unbounded: 7 CTAs (56 KB of weight loads in
// flight) per SM; bounded to 9 CTAs of 128 threads (18 of 64) it fits in 56 registers without
// spilling (the plain M = 1 kernel has 48: 10 CTAs). Four rows per CTA are left unbounded.
template <int kMaxM, int kRows, int kUnroll, int kThreads, GemvInput kIn, typename OutT>
__global__ void __launch_bounds__(kThreads, kMaxM == 1 && kIn == GemvInput::kRmsNorm && kRows == 2
                                                ? 9 * 128 / kThreads
                                                : 1)
    gemv_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w,
                const bf16* __restrict__ bias, OutT* __restrict__ out, int M, int N, int K,
                const bf16* __restrict__ gamma, float eps, bool accumulate, bool pairs,
                GemvRope rope) {
  static_assert(kMaxM * kRows <= kThreads, "one output per thread in the epilogue");
  static_assert(kRows % 2 == 0 || kRows == 1, "pairs split the rows in halves");
  constexpr int kHalf = kRows / 2;
  detail::pdl_launch_dependents();
  const int chunks = K / 8;
  const int half = N / 2;  // pairs: N/2 of them
  const int half_d = rope.D / 2;
  // The rows of pair p: its first (r = 0) or second (r = 1) element.
  const auto pair_row = [&](int p, int r) {
    if (rope.D == 0) return r == 0 ? p : half + p;
    return (p / half_d) * rope.D + p % half_d + r * half_d;
  };
  const int n0 = blockIdx.x * (pairs ? kHalf : kRows);
  const bf16* wrow[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int n = !pairs      ? min(n0 + r, N - 1)
                  : r < kHalf ? pair_row(min(n0 + r, half - 1), 0)
                              : pair_row(min(n0 + r - kHalf, half - 1), 1);
    wrow[r] = w + static_cast<int64_t>(n) * K;
  }

  // The RoPE epilogue's inputs (GemvRope: no kernel of the step writes them, like the weights)
  // are read and the rotation's sin/cos computed before pdl_wait, by the thread that will rotate
  // pair (m, j) = (threadIdx.x / kHalf, threadIdx.x % kHalf): off the kernel's tail.
  float rope_sn = 0.0f, rope_cs = 1.0f;
  int64_t rope_slot = -1;
  if constexpr (kHalf > 0) {
    const int m = threadIdx.x / kHalf, n = n0 + threadIdx.x % kHalf;
    if (pairs && rope.D > 0 && m < M && n < half) {
      sincosf(static_cast<float>(rope.positions[m]) * rope.inv_freq[n % half_d], &rope_sn,
              &rope_cs);
      if (n / half_d >= rope.Hq) rope_slot = rope.slot_mapping[m];
    }
  }

  float acc[kMaxM][kRows] = {};
  float ss[kIn == GemvInput::kRmsNorm ? kMaxM : 1] = {};  // Σ r² per row of x
  auto fma_chunk = [&](const detail::Bf16x8(&wv)[kRows], int c) {
    float wf[kRows][8];
#pragma unroll
    for (int r = 0; r < kRows; ++r) detail::to_float8(wv[r], wf[r]);
    float gf[8];  // the norm weight γ (kRmsNorm)
    if constexpr (kIn == GemvInput::kRmsNorm) detail::to_float8(detail::load8(gamma + c * 8), gf);
#pragma unroll
    for (int m = 0; m < kMaxM; ++m) {
      if (m < M) {
        float xf[8];
        detail::to_float8(detail::load8(x + static_cast<int64_t>(m) * K + c * 8), xf);
        if constexpr (kIn == GemvInput::kRmsNorm) {
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            ss[m] = fmaf(xf[e], xf[e], ss[m]);
            xf[e] *= gf[e];
          }
        }
#pragma unroll
        for (int r = 0; r < kRows; ++r)
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[m][r] = fmaf(xf[e], wf[r][e], acc[m][r]);
      }
    }
  };

  // The weights do not depend on the previous kernel, x and out do: the first weight loads are
  // issued before pdl_wait.
  // With `accumulate`, the thread that will write output i = threadIdx.x (< kMaxM·kRows) loads
  // the old value right after the wait, so that load overlaps the weight stream.
  bool waited = false;
  float prev = 0.0f;
  const auto wait_producer = [&] {
    if (waited) return;
    detail::pdl_wait();
    waited = true;
    if constexpr (std::is_same_v<OutT, bf16>) {
      const int i = threadIdx.x, m = i / kRows, n = n0 + i % kRows;
      if (accumulate && !pairs && i < kMaxM * kRows && m < M && n < N)
        prev = __bfloat162float(out[static_cast<int64_t>(m) * N + n]);
    }
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
  constexpr int kSums = kMaxM * kRows + (kIn == GemvInput::kRmsNorm ? kMaxM : 0);
  __shared__ float partial[kWarps][kSums];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int m = 0; m < kMaxM; ++m) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float s = detail::warp_sum(acc[m][r]);
      if (lane == 0) partial[warp][m * kRows + r] = s;
    }
    if constexpr (kIn == GemvInput::kRmsNorm) {
      const float s = detail::warp_sum(ss[m]);
      if (lane == 0) partial[warp][kMaxM * kRows + m] = s;
    }
  }
  __syncthreads();
  const auto row_scale = [&](int m) {
    if constexpr (kIn != GemvInput::kRmsNorm) return 1.0f;
    float sq = 0.0f;
#pragma unroll
    for (int j = 0; j < kWarps; ++j) sq += partial[j][kMaxM * kRows + m];
    return rsqrtf(sq / static_cast<float>(K) + eps);
  };
  if constexpr (kHalf > 0) {
    if (pairs) {
      for (int i = threadIdx.x; i < kMaxM * kHalf; i += kThreads) {
        const int m = i / kHalf, j = i % kHalf, n = n0 + j;
        if (m < M && n < half) {
          float g = 0.0f, u = 0.0f;
#pragma unroll
          for (int q = 0; q < kWarps; ++q) {
            g += partial[q][m * kRows + j];
            u += partial[q][m * kRows + kHalf + j];
          }
          const float sc = row_scale(m);
          const int ra = pair_row(n, 0), rb = pair_row(n, 1);
          g *= sc;
          u *= sc;
          if (bias) {
            g += __bfloat162float(bias[ra]);
            u += __bfloat162float(bias[rb]);
          }
          const float gb = __bfloat162float(__float2bfloat16(g));
          const float ub = __bfloat162float(__float2bfloat16(u));
          if (rope.D == 0) {
            store_out(out + static_cast<int64_t>(m) * half + n, detail::silu_times(gb, ub));
            continue;
          }
          if constexpr (std::is_same_v<OutT, bf16>)
            detail::rope_pair_store(rope, out + static_cast<int64_t>(m) * N, ra, rb, n, gb, ub,
                                    rope_sn, rope_cs, rope_slot);
        }
      }
      return;
    }
  }
  for (int i = threadIdx.x; i < kMaxM * kRows; i += kThreads) {
    const int m = i / kRows, n = n0 + i % kRows;
    if (m < M && n < N) {
      float s = 0.0f;
#pragma unroll
      for (int j = 0; j < kWarps; ++j) s += partial[j][i];
      s *= row_scale(m);
      if (bias) s += __bfloat162float(bias[n]);
      if constexpr (std::is_same_v<OutT, bf16>) {
        if (accumulate) s = __bfloat162float(__float2bfloat16(s)) + prev;  // i == threadIdx.x
      }
      store_out(out + static_cast<int64_t>(m) * N + n, s);
    }
  }
}

// ---- Scalar kernel (any K, any alignment) -------------------------------------------------

// One warp per output row n, all M rows of x.
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

// ---- Launchers ------------------------------------------------------------------------------

template <int kMaxM, int kRows, int kUnroll, int kThreads = 128, GemvInput kIn = GemvInput::kPlain,
          typename OutT>
cudaError_t launch_fast(const bf16* x, const bf16* w, const bf16* bias, OutT* out, int M, int N,
                        int K, cudaStream_t s, const GemvFusion& f = {}) {
  return detail::launch_pdl(gemv_kernel<kMaxM, kRows, kUnroll, kThreads, kIn, OutT>,
                            dim3(detail::ceil_div(N, kRows)), dim3(kThreads), 0, s, x, w, bias, out,
                            M, N, K, f.norm_weight, f.eps, f.accumulate,
                            f.silu_pairs || f.rope.D > 0, f.rope);
}

// The tensor-core kernel (gemv_mma.cuh) with kRowTiles 16-row tiles and kKSlices k slices per
// CTA; M ≤ 8 takes one 8-token tile, M ≤ 16 two.
template <int kRowTiles, int kKSlices, int kUnroll, GemvInput kIn = GemvInput::kPlain,
          typename OutT>
cudaError_t launch_mma(const bf16* x, const bf16* w, const bf16* bias, OutT* out, int M, int N,
                       int K, cudaStream_t s, const GemvFusion& f = {}) {
  const bool pairs = f.silu_pairs || f.rope.D > 0;
  const unsigned grid = detail::ceil_div(pairs ? N / 2 : N, (pairs ? 8 : 16) * kRowTiles);
  const dim3 block(32 * kRowTiles * kKSlices);
  const auto go = [&](auto kernel) {
    return detail::launch_pdl(kernel, dim3(grid), block, 0, s, x, w, bias, out, M, N, K,
                              f.norm_weight, f.eps, f.accumulate, f.rope);
  };
  using detail::gemv_mma_kernel;
  if constexpr (std::is_same_v<OutT, bf16>) {
    if (pairs)
      return M <= 8 ? go(gemv_mma_kernel<1, kRowTiles, kKSlices, kUnroll, kIn, true, OutT>)
                    : go(gemv_mma_kernel<2, kRowTiles, kKSlices, kUnroll, kIn, true, OutT>);
  }
  return M <= 8 ? go(gemv_mma_kernel<1, kRowTiles, kKSlices, kUnroll, kIn, false, OutT>)
                : go(gemv_mma_kernel<2, kRowTiles, kKSlices, kUnroll, kIn, false, OutT>);
}

// The one place that maps M to a kernel: the register kernel at M = 1, the tensor-core kernel
// above, its CTA shape by N (H100, bench r13 linear_gemv_cfg at M = 8 and 16, 132 SMs): a grid
// of about one CTA per SM, or many small CTAs, beats a few per SM with the busiest SMs the tail —
//   N ≤ 2048: 16 rows × 16 k slices (128 CTAs at N = 2048; 4.7 µs against 5.3–5.7 for the others);
//   N ≤ 5120: 32 rows × 8 k slices (128 CTAs at N = 4096; 13.3 µs at 4096², 41.7 at 4096 × 14336);
//   above:   16 rows × 8 k slices (896 CTAs at N = 14336; 42.3 µs against 45.5 for 16 × 16).
template <GemvInput kIn = GemvInput::kPlain, typename OutT>
cudaError_t dispatch(const bf16* x, const bf16* w, const bf16* bias, OutT* out, int M, int N, int K,
                     cudaStream_t s, const GemvFusion& f = {}) {
  if (M > 1) {
    if (N <= 2048) return launch_mma<1, 16, 1, kIn>(x, w, bias, out, M, N, K, s, f);
    if (N <= 5120) return launch_mma<2, 8, 1, kIn>(x, w, bias, out, M, N, K, s, f);
    return launch_mma<1, 8, 1, kIn>(x, w, bias, out, M, N, K, s, f);
  }
  if constexpr (kIn == GemvInput::kRmsNorm) {
    // At M = 1 the QKV projection with the RoPE epilogue takes the configuration measured fastest
    // for its K (H100, bench r9, linear_gemv_fused_cfg): 4 rows per CTA at K = 4096 (18.1 vs
    // 19.1 µs), 64-thread CTAs at K = 2048 (6.25 vs 6.53 µs). Gate/up differed by ≤ 1.4 %.
    if (f.rope.D > 0)
      return K >= 4096 ? launch_fast<1, 4, 2, 128, kIn>(x, w, bias, out, M, N, K, s, f)
                       : launch_fast<1, 2, 2, 64, kIn>(x, w, bias, out, M, N, K, s, f);
  }
  return launch_fast<1, 2, 2, 128, kIn>(x, w, bias, out, M, N, K, s, f);
}

// The tensor-core configurations the benchmark compares (gemv_mma_with_config): GemvConfig's
// threads = 32 · row tiles · k slices, rows = 16 · row tiles.
bool dispatch_mma_config(const GemvConfig& c, const bf16* x, const bf16* w, const bf16* bias,
                         bf16* out, int M, int N, int K, cudaStream_t s, cudaError_t* err) {
  const auto is = [&](int t, int r, int u) {
    return c.threads == t && c.rows == r && c.unroll == u;
  };
  if (is(512, 16, 1))
    *err = launch_mma<1, 16, 1>(x, w, bias, out, M, N, K, s);
  else if (is(128, 16, 2))
    *err = launch_mma<1, 4, 2>(x, w, bias, out, M, N, K, s);
  else if (is(256, 16, 1))
    *err = launch_mma<1, 8, 1>(x, w, bias, out, M, N, K, s);
  else if (is(256, 16, 2))
    *err = launch_mma<1, 8, 2>(x, w, bias, out, M, N, K, s);
  else if (is(512, 32, 1))
    *err = launch_mma<2, 8, 1>(x, w, bias, out, M, N, K, s);
  else
    return false;
  return true;
}

// M = 1 register configurations the benchmark compares (gemv_with_config).
template <typename OutT>
bool dispatch_config(const GemvConfig& c, const bf16* x, const bf16* w, const bf16* bias, OutT* out,
                     int N, int K, cudaStream_t s, cudaError_t* err) {
  const auto is = [&](int t, int r, int u) {
    return c.threads == t && c.rows == r && c.unroll == u;
  };
  if (is(128, 2, 2))
    *err = launch_fast<1, 2, 2, 128>(x, w, bias, out, 1, N, K, s);
  else if (is(128, 2, 4))
    *err = launch_fast<1, 2, 4, 128>(x, w, bias, out, 1, N, K, s);
  else if (is(256, 2, 2))
    *err = launch_fast<1, 2, 2, 256>(x, w, bias, out, 1, N, K, s);
  else if (is(128, 4, 2))
    *err = launch_fast<1, 4, 2, 128>(x, w, bias, out, 1, N, K, s);
  else if (is(64, 2, 2))
    *err = launch_fast<1, 2, 2, 64>(x, w, bias, out, 1, N, K, s);
  else
    return false;
  return true;
}

// M = 1 RMSNorm-input configurations the benchmark compares (gemv_fused_with_config): each CTA
// reads all of x and γ besides its kRows weight rows, so at small K more rows per CTA cut that
// L2 traffic per weight byte.
bool dispatch_fused_config(const GemvConfig& c, const GemvFusion& f, const bf16* x, const bf16* w,
                           const bf16* bias, bf16* out, int N, int K, cudaStream_t s,
                           cudaError_t* err) {
  constexpr GemvInput kIn = GemvInput::kRmsNorm;
  const auto is = [&](int t, int r, int u) {
    return c.threads == t && c.rows == r && c.unroll == u;
  };
  if (is(128, 2, 2))
    *err = launch_fast<1, 2, 2, 128, kIn>(x, w, bias, out, 1, N, K, s, f);
  else if (is(128, 4, 2))
    *err = launch_fast<1, 4, 2, 128, kIn>(x, w, bias, out, 1, N, K, s, f);
  else if (is(64, 2, 2))
    *err = launch_fast<1, 2, 2, 64, kIn>(x, w, bias, out, 1, N, K, s, f);
  else
    return false;
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
      return Status::error("gemv_with_config: {} not built", gemv_config_name(*cfg));
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

std::string gemv_config_name(const GemvConfig& c) {
  return fmt::format("t{}r{}u{}", c.threads, c.rows, c.unroll);
}

int gemv_ctas(int M, int N) {  // dispatch()'s grids (plain output)
  if (M <= 1) return static_cast<int>(detail::ceil_div(N, 2));
  return static_cast<int>(detail::ceil_div(N, N > 2048 && N <= 5120 ? 32 : 16));
}

Status gemv_with_config(const GemvConfig& cfg, const bf16* x, const bf16* w, const bf16* bias,
                        void* out, DType out_dtype, int N, int K, cudaStream_t stream) {
  if (N <= 0 || K <= 0) return Status::error("gemv_with_config: bad shape N {} K {}", N, K);
  switch (out_dtype) {
    case DType::kBF16:
      return run(x, w, bias, static_cast<bf16*>(out), 1, N, K, stream, &cfg);
    case DType::kF32:
      return run(x, w, bias, static_cast<float*>(out), 1, N, K, stream, &cfg);
    default:
      return Status::error("gemv_with_config: out dtype {} not supported (bf16, f32)",
                           dtype_name(out_dtype));
  }
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

namespace {

Status check_fused(const GemvFusion& f, const bf16* x, const bf16* w, int M, int N, int K) {
  if (M < 1 || M > kGemvMaxM)
    return Status::error("gemv_fused: M {} outside [1, {}] (use the unfused path)", M, kGemvMaxM);
  if (N <= 0 || K <= 0) return Status::error("gemv_fused: bad shape N {} K {}", N, K);
  if (!gemv_fused_supported(K, x, w))
    return Status::error("gemv_fused: needs K % 8 == 0 and 16-byte aligned x, W (K {})", K);
  if (f.silu_pairs && (N % 2 != 0 || f.accumulate || f.rope.D > 0))
    return Status::error("gemv_fused: SiLU pairs need an even N, no accumulate, no RoPE (N {})", N);
  if (const GemvRope& r = f.rope; r.D != 0) {
    if (r.D < 2 || r.D % 2 != 0 || r.Hq < 1 || r.Hkv < 1 || N != (r.Hq + 2 * r.Hkv) * r.D)
      return Status::error(
          "gemv_fused: RoPE needs N = (Hq + 2·Hkv)·D with D even (N {} Hq {} Hkv "
          "{} D {})",
          N, r.Hq, r.Hkv, r.D);
    if (!r.positions || !r.slot_mapping || !r.inv_freq || !r.k_cache || !r.v_cache ||
        r.block_size < 1 || r.num_blocks < 1 || f.accumulate)
      return Status::error(
          "gemv_fused: RoPE needs positions, slots, inv_freq, a K/V cache and no "
          "accumulate");
  }
  if (f.input == GemvInput::kRmsNorm && (!(f.eps > 0) || !detail::aligned16(f.norm_weight)))
    return Status::error(
        "gemv_fused: RMS-norm input needs eps > 0 (got {}) and a 16-byte aligned "
        "norm weight",
        f.eps);
  return Status();
}

}  // namespace

Status gemv_fused(const GemvFusion& f, const bf16* x, const bf16* w, const bf16* bias, bf16* out,
                  int M, int N, int K, cudaStream_t stream) {
  CEILING_RETURN_IF_ERROR(check_fused(f, x, w, M, N, K));
  cudaError_t e = cudaSuccess;
  switch (f.input) {
    case GemvInput::kPlain:
      e = dispatch<GemvInput::kPlain>(x, w, bias, out, M, N, K, stream, f);
      break;
    case GemvInput::kRmsNorm:
      e = dispatch<GemvInput::kRmsNorm>(x, w, bias, out, M, N, K, stream, f);
      break;
  }
  CEILING_CUDA_RETURN(e);
  return Status();
}

Status gemv_mma_with_config(const GemvConfig& cfg, const bf16* x, const bf16* w, const bf16* bias,
                            bf16* out, int M, int N, int K, cudaStream_t stream) {
  if (M < 2 || M > kGemvMaxM || N <= 0 || K <= 0 || !gemv_fused_supported(K, x, w))
    return Status::error(
        "gemv_mma_with_config: needs 2 ≤ M ≤ {}, K % 8 == 0, aligned x and W (M {} N {} K {})",
        kGemvMaxM, M, N, K);
  cudaError_t e = cudaSuccess;
  if (!dispatch_mma_config(cfg, x, w, bias, out, M, N, K, stream, &e))
    return Status::error("gemv_mma_with_config: {} not built", gemv_config_name(cfg));
  CEILING_CUDA_RETURN(e);
  return Status();
}

Status gemv_fused_with_config(const GemvConfig& cfg, const GemvFusion& f, const bf16* x,
                              const bf16* w, const bf16* bias, bf16* out, int N, int K,
                              cudaStream_t stream) {
  CEILING_RETURN_IF_ERROR(check_fused(f, x, w, 1, N, K));
  if (f.input != GemvInput::kRmsNorm)
    return Status::error("gemv_fused_with_config: only the RMS-norm input has configurations");
  cudaError_t e = cudaSuccess;
  if (!dispatch_fused_config(cfg, f, x, w, bias, out, N, K, stream, &e))
    return Status::error("gemv_fused_with_config: {} not built", gemv_config_name(cfg));
  CEILING_CUDA_RETURN(e);
  return Status();
}

bool gemv_fused_supported(int K, const void* x, const void* w) {
  return K % 8 == 0 && detail::aligned16(x) && detail::aligned16(w);
}

}  // namespace ceiling::cuda
