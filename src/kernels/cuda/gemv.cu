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
#include "kernels/cuda/gemv_kernel.cuh"
#include "kernels/cuda/gemv_mma.cuh"
#include "kernels/cuda/pdl.cuh"

namespace ceiling::cuda {
namespace {

using detail::bf16;
using detail::gemv_kernel;
using detail::store_out;

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
                            f.silu_pairs || f.rope.D > 0, f.rope, GemvWeights{});
}

// The tensor-core kernel (gemv_mma.cuh) with kRowTiles 16-row tiles and kKSlices k slices per
// CTA, each warp owning kWarpTiles of them; M ≤ 8 takes one 8-token tile, M ≤ 16 two.
template <int kRowTiles, int kKSlices, int kUnroll, GemvInput kIn = GemvInput::kPlain,
          typename OutT, int kWarpTiles = 1>
cudaError_t launch_mma(const bf16* x, const bf16* w, const bf16* bias, OutT* out, int M, int N,
                       int K, cudaStream_t s, const GemvFusion& f = {}) {
  constexpr auto kW = GemvWeightFormat::kBF16;
  constexpr int R = kWarpTiles;
  const bool pairs = f.silu_pairs || f.rope.D > 0;
  const unsigned grid = detail::ceil_div(pairs ? N / 2 : N, (pairs ? 8 : 16) * kRowTiles * R);
  const auto go = [&](auto kernel) {
    return detail::launch_gemv_mma(kernel, grid, 32 * kRowTiles * kKSlices, s, x, w, bias, out, M,
                                   N, K, f.norm_weight, f.eps, f.accumulate, f.rope, GemvWeights{});
  };
  using detail::gemv_mma_kernel;
  if constexpr (std::is_same_v<OutT, bf16>) {
    if (pairs)
      return M <= 8 ? go(gemv_mma_kernel<1, kRowTiles, kKSlices, kUnroll, kIn, true, OutT, kW, R>)
                    : go(gemv_mma_kernel<2, kRowTiles, kKSlices, kUnroll, kIn, true, OutT, kW, R>);
  }
  return M <= 8 ? go(gemv_mma_kernel<1, kRowTiles, kKSlices, kUnroll, kIn, false, OutT, kW, R>)
                : go(gemv_mma_kernel<2, kRowTiles, kKSlices, kUnroll, kIn, false, OutT, kW, R>);
}

// The RMS-norm-input kernel at M = 1 takes eight rows a CTA up to this K (and with the RoPE
// epilogue from K = 4096), one-warp CTAs when N / 8 reaches kGemvOneWarpCtasMin (dispatch below).
constexpr int kGemvEightRowsMaxK = 2048, kGemvOneWarpCtasMin = 2048;

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
    // Short rows (K ≤ kGemvEightRowsMaxK: the 1B-class models): every CTA reads all of x and γ
    // (2 · 2K bytes) beside its rows, as many bytes as two rows of weights, and a 2-row CTA is a
    // few loads a thread; eight rows a CTA cut both per weight byte. H200 r149
    // (linear_gemv_fused_cfg, K = 2048): QKV + RoPE (N 3072) t128r8u1 4.59 µs against t64r2u2's
    // 5.42; gate/up + SiLU (N 16384) t32r8u1 16.33 against t128r2u2's 18.31 — one-warp CTAs where
    // N / 8 gives ≥ 2048 of them (~16 an SM), four-warp ones where few CTAs need more warps each.
    // In the 1B's decode step (r150, trace): gate/up 19.1 → 16.4 µs a layer; QKV's 1.6 µs moved
    // into the attention after it (which starts when the down's CTAs leave either way); batch 1
    // 0.769–0.782 → 0.736 ms a token.
    if (K <= kGemvEightRowsMaxK)
      return N / 8 >= kGemvOneWarpCtasMin
                 ? launch_fast<1, 8, 1, 32, kIn>(x, w, bias, out, M, N, K, s, f)
                 : launch_fast<1, 8, 1, 128, kIn>(x, w, bias, out, M, N, K, s, f);
    // The QKV projection with the RoPE epilogue at K ≥ 4096 takes eight rows a CTA too: H200
    // r149, the 8B's (N 6144) t128r8u1 14.51 µs against t128r4u2's 14.79 (H100 r9's pick over
    // 2-row CTAs: 18.1 against 19.1); in the step (r153, trace) its slot 16.8 → 15.6 µs a layer,
    // the 8B at batch 1 −0.8 % a token. Between 2048 and 4096 the H100's 64-thread CTAs stay
    // (not re-measured). Gate/up at K = 4096 keeps the 2-row CTAs (t128r8u1 59.1 against 54.6).
    if (f.rope.D > 0)
      return K >= 4096 ? launch_fast<1, 8, 1, 128, kIn>(x, w, bias, out, M, N, K, s, f)
                       : launch_fast<1, 2, 2, 64, kIn>(x, w, bias, out, M, N, K, s, f);
  }
  return launch_fast<1, 2, 2, 128, kIn>(x, w, bias, out, M, N, K, s, f);
}

// The tensor-core configurations the benchmark compares (gemv_mma_with_config): GemvConfig's
// threads = 32 · row tiles · k slices, rows = 16 · row tiles.
bool dispatch_mma_config(const GemvConfig& c, const bf16* x, const bf16* w, const bf16* bias,
                         bf16* out, int M, int N, int K, cudaStream_t s, cudaError_t* err) {
  const auto is = [&](int t, int r, int u, int wt = 1) {
    return c.threads == t && c.rows == r && c.unroll == u && c.warp_tiles == wt;
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
  else if (is(256, 32, 1, 2))
    *err = launch_mma<1, 8, 1, GemvInput::kPlain, bf16, 2>(x, w, bias, out, M, N, K, s);
  else
    return false;
  return true;
}

// M = 1 register configurations the benchmark compares (gemv_with_config).
template <typename OutT>
bool dispatch_config(const GemvConfig& c, const bf16* x, const bf16* w, const bf16* bias, OutT* out,
                     int N, int K, cudaStream_t s, cudaError_t* err) {
  const auto is = [&](int t, int r, int u) {
    return c.threads == t && c.rows == r && c.unroll == u && c.warp_tiles == 1;
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
  else if (is(64, 4, 2))
    *err = launch_fast<1, 4, 2, 64>(x, w, bias, out, 1, N, K, s);
  else if (is(64, 8, 1))
    *err = launch_fast<1, 8, 1, 64>(x, w, bias, out, 1, N, K, s);
  else if (is(32, 8, 1))
    *err = launch_fast<1, 8, 1, 32>(x, w, bias, out, 1, N, K, s);
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
    return c.threads == t && c.rows == r && c.unroll == u && c.warp_tiles == 1;
  };
  if (is(128, 2, 2))
    *err = launch_fast<1, 2, 2, 128, kIn>(x, w, bias, out, 1, N, K, s, f);
  else if (is(128, 4, 2))
    *err = launch_fast<1, 4, 2, 128, kIn>(x, w, bias, out, 1, N, K, s, f);
  else if (is(64, 2, 2))
    *err = launch_fast<1, 2, 2, 64, kIn>(x, w, bias, out, 1, N, K, s, f);
  else if (is(64, 4, 2))
    *err = launch_fast<1, 4, 2, 64, kIn>(x, w, bias, out, 1, N, K, s, f);
  else if (is(128, 8, 1))
    *err = launch_fast<1, 8, 1, 128, kIn>(x, w, bias, out, 1, N, K, s, f);
  else if (is(64, 8, 1))
    *err = launch_fast<1, 8, 1, 64, kIn>(x, w, bias, out, 1, N, K, s, f);
  else if (is(32, 8, 1))
    *err = launch_fast<1, 8, 1, 32, kIn>(x, w, bias, out, 1, N, K, s, f);
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
  return c.warp_tiles > 1 ? fmt::format("t{}r{}u{}w{}", c.threads, c.rows, c.unroll, c.warp_tiles)
                          : fmt::format("t{}r{}u{}", c.threads, c.rows, c.unroll);
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
  if (const std::string why = gemv_fusion_unsupported(f, N); !why.empty())
    return Status::error("gemv_fused: {}", why);
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

std::string gemv_fusion_unsupported(const GemvFusion& f, int N) {
  if (f.silu_pairs && (N % 2 != 0 || f.accumulate || f.rope.D > 0))
    return fmt::format("SiLU pairs need an even N, no accumulate, no RoPE (N {})", N);
  if (const GemvRope& r = f.rope; r.D != 0) {
    if (r.D < 2 || r.D % 2 != 0 || r.Hq < 1 || r.Hkv < 1 || N != (r.Hq + 2 * r.Hkv) * r.D)
      return fmt::format("RoPE needs N = (Hq + 2·Hkv)·D with D even (N {} Hq {} Hkv {} D {})", N,
                         r.Hq, r.Hkv, r.D);
    if (!r.positions || !r.slot_mapping || !r.inv_freq || !r.k_cache || !r.v_cache ||
        r.block_size < 1 || r.num_blocks < 1 || f.accumulate)
      return "RoPE needs positions, slots, inv_freq, a K/V cache and no accumulate";
  }
  if (f.input == GemvInput::kRmsNorm && (!(f.eps > 0) || !detail::aligned16(f.norm_weight)))
    return fmt::format("RMS-norm input needs eps > 0 (got {}) and a 16-byte aligned norm weight",
                       f.eps);
  return "";
}

bool gemv_fused_supported(int K, const void* x, const void* w) {
  return K % 8 == 0 && detail::aligned16(x) && detail::aligned16(w);
}

}  // namespace ceiling::cuda
