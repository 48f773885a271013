// Low-precision GEMV launchers (gemv_quant.h): the register kernel of gemv_kernel.cuh
// instantiated for fp8 and int4 weights, the dequantize kernel of the GEMM path, and the host
// packing of the int4 layout.
//
// Napkin math (H100, Llama-3.1-8B decode at M = 1, 7.0 G projection weights): bf16 streams 14 GB,
// fp8 7 GB, int4 3.5 GB + 0.22 GB of groups (G = 128, 4 bytes each). The dequantization is integer
// work on the CUDA cores: fp8 ~2.75 ops per weight (shifts and masks into bf16 position, a shift
// to fp32), int4 ~2 (a shift and a mask per pair, a bf16 subtraction, a shift to fp32), plus one
// FMA per weight and row of x. At 64 integer ops per SM and clock (132 SMs, 1.755 GHz) that is
// 1.3 ms (fp8) and 0.95 ms (int4) of issue against memory floors of 2.1 and 1.1 ms at 3.35 TB/s:
// fp8 stays memory-bound, int4 is at the edge, and both turn issue-bound as M grows (M FMAs per
// weight): the tensor-core path (Marlin-style) is what batch 16 needs.
#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <string>

#include "core/check.h"
#include "kernels/cuda/gemv_kernel.cuh"
#include "kernels/cuda/gemv_quant.h"

namespace ceiling::cuda {
namespace {

using detail::bf16;
using W = GemvWeightFormat;

template <int kMaxM, int kRows, int kUnroll, int kThreads, GemvInput kIn, W kW>
cudaError_t launch(const GemvFusion& f, const bf16* x, const GemvWeights& w, const bf16* bias,
                   bf16* out, int M, int N, int K, cudaStream_t s) {
  return detail::launch_pdl(detail::gemv_kernel<kMaxM, kRows, kUnroll, kThreads, kIn, bf16, kW>,
                            dim3(detail::ceil_div(N, kRows)), dim3(kThreads), 0, s, x,
                            static_cast<const bf16*>(nullptr), bias, out, M, N, K, f.norm_weight,
                            f.eps, f.accumulate, f.silu_pairs || f.rope.D > 0, f.rope, w);
}

// The tensor-core kernel (gemv_mma.cuh) with quantized weights: one 16-row tile a warp (or
// kWarpTiles) and kKSlices k slices per CTA; M ≤ 8 takes one 8-token tile, M ≤ 16 two.
template <GemvInput kIn, W kW, int kKSlices = 8, int kWarpTiles = 1>
cudaError_t launch_mma(const GemvFusion& f, const bf16* x, const GemvWeights& w, const bf16* bias,
                       bf16* out, int M, int N, int K, cudaStream_t s) {
  constexpr int kRowTiles = 1, R = kWarpTiles;
  const bool pairs = f.silu_pairs || f.rope.D > 0;
  const unsigned grid = detail::ceil_div(pairs ? N / 2 : N, (pairs ? 8 : 16) * kRowTiles * R);
  const auto go = [&](auto kernel) {
    return detail::launch_gemv_mma(kernel, grid, 32 * kRowTiles * kKSlices, s, x,
                                   static_cast<const bf16*>(nullptr), bias, out, M, N, K,
                                   f.norm_weight, f.eps, f.accumulate, f.rope, w);
  };
  using detail::gemv_mma_kernel;
  if (pairs)
    return M <= 8 ? go(gemv_mma_kernel<1, kRowTiles, kKSlices, 1, kIn, true, bf16, kW, R>)
                  : go(gemv_mma_kernel<2, kRowTiles, kKSlices, 1, kIn, true, bf16, kW, R>);
  return M <= 8 ? go(gemv_mma_kernel<1, kRowTiles, kKSlices, 1, kIn, false, bf16, kW, R>)
                : go(gemv_mma_kernel<2, kRowTiles, kKSlices, 1, kIn, false, bf16, kW, R>);
}

// The tensor-core kernel needs one int4 group across a row group's four adjacent loads (128 k).
bool mma_ok(const GemvWeights& w) {
  return w.format == W::kFP8 || w.group_size >= 128;
}

// int4 at 9 ≤ M ≤ 16 (two token tiles): two 16-row tiles a warp, so each x fragment feeds both
// (r69, H200, the 8B's shapes at M = 16, against one tile a warp: QKV 16.2 → 10.8 µs, o 10.7 →
// 8.5, gate/up 72.1 → 40.8, down 27.5 → 19.6). With one tile a warp, a lane's two 16-byte int4
// loads (rows g, g + 8; 32 k each) take 8 loads of x (4 pieces × 2 token tiles): 128 bytes through
// L1 for 32 bytes of weights. Two tiles halve that. 4 k slices where the halved grid still fills
// the GPU twice over (N ≥ 6144: QKV, gate/up), else 8 (o, down); one tile below N = 4096, where
// fewer than 128 CTAs would remain. Plain input only (what the engine runs above one row): with
// the RMS-norm input two tiles spill (ptxas: 388 bytes once the int4 dequantization's LOP3 reads
// the zero word, 2026-11-28 r106). fp8 (16 weights a load) and M ≤ 8 lost or tied with two
// tiles (same run): one tile.
constexpr int kInt4TwoTilesMinN = 4096;

// fp8 with the RMS-norm input at M = 1: eight rows a CTA. Every CTA of the norm-input kernel
// reads all of x and γ (2 × 8 KB at K = 4096) and normalizes it, so with four rows a CTA the 8B's
// gate/up read as many bytes of x and γ from L2 (7168 CTAs × 16 KB) as of weights from DRAM, and
// the x work took a large share of an issue-bound kernel (r112). Eight rows halve both. H200
// r118 (2026-11-29r118_h200_kernels_fp8rows.json), µs at M = 1, t64r4u2 → t64r8u1 / t32r8u1:
// QKV + RoPE 10.87 → 8.33 / 12.86, gate/up + SiLU 33.63 → 34.12 / 31.66. One-warp CTAs win
// where they are many (gate/up: 3584 of them), two-warp CTAs where one warp a CTA would leave the
// SMs few warps (QKV: 768 CTAs): one-warp CTAs from kFp8OneWarpCtasMin of them (~16 an SM of
// a 132-SM GPU; the 1B's gate/up, N = 16384, falls on that side, not measured), two-warp ones
// down to the 8B's QKV (kFp8EightRowsCtasMin); fewer rows than that (the 1B's QKV, 3072) keep
// t64r4u2, as eight-row CTAs there were not measured. fp8 with 8 rows takes 116 (t32) / 149
// (t64) registers, no spill; int4's kernel (≤ 128 registers) spills with 8 rows and keeps 4.
constexpr int kFp8OneWarpCtasMin = 2048, kFp8EightRowsCtasMin = 768;

// M = 1: the register kernel in 64-thread CTAs: a 16-byte load holds 2× (fp8) or 4× (int4) the
// weights of a bf16 one, so the bf16 kernel's 128 threads × 2 rows would leave each CTA one or
// two loads per thread and row (bench r41: int4 at 29–56 % of read bandwidth with it). The
// configuration per format and input is r54's best of each (H100, one run, the 8B's shapes,
// 2026-11-28r54b_h100_kernels_gemv_m1.json): int4 with the RMS-norm input (QKV + RoPE, gate/up)
// t64r4u1, 10.8 / 40.1 µs against t64r4u2's 12.3 / 44.2; int4 with a plain input (o, down) the
// tensor-core kernel, 6.2 / 14.8 µs against 6.4 / 16.7 (its per-piece x·γ split is what makes it
// lose with the norm input); fp8 plain t64r2u2, 7.3 / 21.0 µs against 7.6 / 22.6; fp8 with the
// norm input t64r4u2 (since r119 eight rows from N = 6144: kFp8EightRowsCtasMin). Neither fewer
// integer ops in the int4 dequantization nor a software-pipelined main loop moved the int4 kernels
// (r54, bench/lowprec_notes.md), nor did asking L2 for the loads ahead (r71). Since r56 bounded the
// int4 register kernel to 16 warps an SM, two loads in flight per row beat one with the norm input
// (H200 r71, t64r4u2 against t64r4u1: QKV + RoPE 9.31 / 10.73 µs, gate/up 33.58 / 35.17; not
// re-measured on an H100). 2 ≤ M ≤ 16: the tensor-core kernel, whose mma takes the weights once for
// all rows of x (the register kernel spends M FMAs per weight: r42, fp8 gate/up at M = 16 in 263 µs
// against bf16's 95).
template <GemvInput kIn, W kW>
cudaError_t dispatch(const GemvFusion& f, const bf16* x, const GemvWeights& w, const bf16* bias,
                     bf16* out, int M, int N, int K, cudaStream_t s) {
  // M = 1: the norm input t64r4u2, fp8 eight rows a CTA from N = 6144 (kFp8EightRowsCtasMin,
  // kFp8OneWarpCtasMin); the plain input int4 the tensor-core kernel (t64r4u1 for groups under
  // 128), fp8 t64r2u2.
  if (M == 1) {
    if constexpr (kIn == GemvInput::kRmsNorm && kW == W::kFP8) {
      if (N / 8 >= kFp8OneWarpCtasMin)
        return launch<1, 8, 1, 32, kIn, kW>(f, x, w, bias, out, M, N, K, s);
      if (N / 8 >= kFp8EightRowsCtasMin)
        return launch<1, 8, 1, 64, kIn, kW>(f, x, w, bias, out, M, N, K, s);
    }
    if constexpr (kIn == GemvInput::kRmsNorm)
      return launch<1, 4, 2, 64, kIn, kW>(f, x, w, bias, out, M, N, K, s);
    if constexpr (kW == W::kInt4)
      return mma_ok(w) ? launch_mma<kIn, kW>(f, x, w, bias, out, M, N, K, s)
                       : launch<1, 4, 1, 64, kIn, kW>(f, x, w, bias, out, M, N, K, s);
    return launch<1, 2, 2, 64, kIn, kW>(f, x, w, bias, out, M, N, K, s);
  }
  if (mma_ok(w)) {
    if constexpr (kIn == GemvInput::kPlain)
      if (kW == W::kInt4 && M > 8 && N >= kInt4TwoTilesMinN)
        return N >= 6144 ? launch_mma<kIn, kW, 4, 2>(f, x, w, bias, out, M, N, K, s)
                         : launch_mma<kIn, kW, 8, 2>(f, x, w, bias, out, M, N, K, s);
    return launch_mma<kIn, kW>(f, x, w, bias, out, M, N, K, s);
  }
  if (M <= 4) return launch<4, 2, 1, 128, kIn, kW>(f, x, w, bias, out, M, N, K, s);
  return launch<16, 2, 1, 128, kIn, kW>(f, x, w, bias, out, M, N, K, s);
}

// Configurations the benchmark compares (gemv_fused_quant_with_config): the register kernel's at
// M = 1, the tensor-core kernel's (threads = 32 · k slices, rows = 16 · warp tiles) at any M.
template <GemvInput kIn, W kW>
bool dispatch_config(const GemvConfig& c, const GemvFusion& f, const bf16* x, const GemvWeights& w,
                     const bf16* bias, bf16* out, int M, int N, int K, cudaStream_t s,
                     cudaError_t* err) {
  const auto is = [&](int t, int r, int u, int wt = 1) {
    return c.threads == t && c.rows == r && c.unroll == u && c.warp_tiles == wt;
  };
  if (c.rows >= 16 && !mma_ok(w)) return false;
  // Two warp tiles for the plain input only (kInt4TwoTilesMinN); kWt keeps the RMS-norm input's
  // two-tile kernels from being instantiated where the runtime test already rejects them.
  constexpr bool kTwoTiles = kIn == GemvInput::kPlain;
  constexpr int kWt = kTwoTiles ? 2 : 1;
  // Eight rows a CTA at M = 1: fp8 only (int4's kernel is bounded to 128 registers and spills
  // with them); kR keeps int4's from being instantiated.
  constexpr bool kEightRows = kW == W::kFP8;
  constexpr int kR = kEightRows ? 8 : 4;
  if (is(256, 16, 1))
    *err = launch_mma<kIn, kW>(f, x, w, bias, out, M, N, K, s);
  else if (kTwoTiles && is(256, 32, 1, 2))
    *err = launch_mma<kIn, kW, 8, kWt>(f, x, w, bias, out, M, N, K, s);
  else if (kTwoTiles && is(128, 32, 1, 2))
    *err = launch_mma<kIn, kW, 4, kWt>(f, x, w, bias, out, M, N, K, s);
  else if (M != 1)
    return false;
  else if (is(128, 2, 2))
    *err = launch<1, 2, 2, 128, kIn, kW>(f, x, w, bias, out, 1, N, K, s);
  else if (is(64, 4, 2))
    *err = launch<1, 4, 2, 64, kIn, kW>(f, x, w, bias, out, 1, N, K, s);
  else if (is(64, 4, 1))
    *err = launch<1, 4, 1, 64, kIn, kW>(f, x, w, bias, out, 1, N, K, s);
  else if (is(64, 2, 2))
    *err = launch<1, 2, 2, 64, kIn, kW>(f, x, w, bias, out, 1, N, K, s);
  else if (kEightRows && is(64, 8, 1))
    *err = launch<1, kR, 1, 64, kIn, kW>(f, x, w, bias, out, 1, N, K, s);
  else if (kEightRows && is(32, 8, 1))
    *err = launch<1, kR, 1, 32, kIn, kW>(f, x, w, bias, out, 1, N, K, s);
  else
    return false;
  return true;
}

template <W kW>
cudaError_t dispatch_input(const GemvFusion& f, const bf16* x, const GemvWeights& w,
                           const bf16* bias, bf16* out, int M, int N, int K, cudaStream_t s) {
  return f.input == GemvInput::kRmsNorm
             ? dispatch<GemvInput::kRmsNorm, kW>(f, x, w, bias, out, M, N, K, s)
             : dispatch<GemvInput::kPlain, kW>(f, x, w, bias, out, M, N, K, s);
}

// One thread per 16-byte load of W: its kElems weights, scaled, rounded to bf16.
template <W kW>
__global__ void dequantize_kernel(GemvWeights w, int N, int K, bf16* __restrict__ out) {
  constexpr int kElems = detail::weight_elems<kW>();
  const int chunks = K / kElems;
  const int64_t total = int64_t{N} * chunks;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t n = i / chunks;
    const int c = static_cast<int>(i % chunks);
    const uint4 raw = *reinterpret_cast<const uint4*>(static_cast<const char*>(w.data) + i * 16);
    float scale = 0.0f;
    uint32_t zw = 0;
    if constexpr (kW == W::kFP8) {
      scale = w.row_scale[n];
    } else {
      const uint32_t g = w.groups[n * (K / w.group_size) + c * kElems / w.group_size];
      scale = detail::int4_scale(g);
      zw = detail::int4_zero_word(g);
    }
#pragma unroll
    for (int j = 0; j < kElems / 8; ++j) {
      float f[8];
      detail::dequant8<kW>(raw, j, zw, f);
#pragma unroll
      for (int e = 0; e < 8; ++e) f[e] *= scale;
      detail::store8(out + n * K + c * kElems + j * 8, detail::from_float8(f));
    }
  }
}

std::string quant_unsupported(const GemvWeights& w, int N, int K) {
  if (w.format == W::kBF16) return "the weights are bf16 (use gemv_fused)";
  if (N <= 0 || K <= 0) return fmt::format("bad shape N {} K {}", N, K);
  const int e = gemv_weight_elems_per_load(w.format);
  if (K % e != 0)
    return fmt::format("{} weights need K % {} == 0 (K {})", gemv_weight_format_name(w.format), e,
                       K);
  if (!w.data || !detail::aligned16(w.data))
    return "the weight data is null or not 16-byte aligned";
  if (w.format == W::kFP8 && !w.row_scale) return "fp8 weights need their row scales";
  if (w.format == W::kInt4) {
    const int G = w.group_size;
    if (G < 32 || (G & (G - 1)) != 0 || K % G != 0)
      return fmt::format("int4 group size {} must be a power of two ≥ 32 dividing K {}", G, K);
    if (!w.groups) return "int4 weights need their group scales and zero points";
  }
  return "";
}

// gemv_fused_quant's argument rules (the fusions' are gemv_fused's: gemv_fusion_unsupported).
Status check_quant(const GemvFusion& f, const bf16* x, const GemvWeights& w, int M, int N, int K) {
  if (M < 1 || M > kGemvMaxM)
    return Status::error("gemv_fused_quant: M {} outside [1, {}] (dequantize for the GEMM)", M,
                         kGemvMaxM);
  if (const std::string why = quant_unsupported(w, N, K); !why.empty())
    return Status::error("gemv_fused_quant: {}", why);
  if (!detail::aligned16(x)) return Status::error("gemv_fused_quant: x is not 16-byte aligned");
  if (const std::string why = gemv_fusion_unsupported(f, N); !why.empty())
    return Status::error("gemv_fused_quant: {}", why);
  return Status();
}

}  // namespace

const char* gemv_weight_format_name(GemvWeightFormat f) {
  switch (f) {
    case W::kBF16:
      return "bf16";
    case W::kFP8:
      return "fp8";
    case W::kInt4:
      return "int4";
  }
  return "?";
}

int gemv_weight_elems_per_load(GemvWeightFormat f) {
  return f == W::kBF16  ? detail::weight_elems<W::kBF16>()
         : f == W::kFP8 ? detail::weight_elems<W::kFP8>()
                        : detail::weight_elems<W::kInt4>();
}

int64_t gemv_weight_bytes(GemvWeightFormat f, int64_t N, int64_t K, int group_size) {
  switch (f) {
    case W::kBF16:
      return 2 * N * K;
    case W::kFP8:
      return N * K + 4 * N;
    case W::kInt4:
      return N * K / 2 + 4 * N * (K / group_size);
  }
  return 0;
}

std::string gemv_quant_unsupported(const GemvWeights& w, int N, int K) {
  return quant_unsupported(w, N, K);
}

Status gemv_fused_quant(const GemvFusion& f, const bf16* x, const GemvWeights& w, const bf16* bias,
                        bf16* out, int M, int N, int K, cudaStream_t stream) {
  CEILING_RETURN_IF_ERROR(check_quant(f, x, w, M, N, K));
  const cudaError_t e = w.format == W::kFP8
                            ? dispatch_input<W::kFP8>(f, x, w, bias, out, M, N, K, stream)
                            : dispatch_input<W::kInt4>(f, x, w, bias, out, M, N, K, stream);
  CEILING_CUDA_RETURN(e);
  return Status();
}

Status gemv_fused_quant_with_config(const GemvConfig& cfg, const GemvFusion& f, const bf16* x,
                                    const GemvWeights& w, const bf16* bias, bf16* out, int M, int N,
                                    int K, cudaStream_t stream) {
  CEILING_RETURN_IF_ERROR(check_quant(f, x, w, M, N, K));
  cudaError_t e = cudaSuccess;
  const bool norm = f.input == GemvInput::kRmsNorm, fp8 = w.format == W::kFP8;
  const bool built = norm ? (fp8 ? dispatch_config<GemvInput::kRmsNorm, W::kFP8>(
                                       cfg, f, x, w, bias, out, M, N, K, stream, &e)
                                 : dispatch_config<GemvInput::kRmsNorm, W::kInt4>(
                                       cfg, f, x, w, bias, out, M, N, K, stream, &e))
                          : (fp8 ? dispatch_config<GemvInput::kPlain, W::kFP8>(
                                       cfg, f, x, w, bias, out, M, N, K, stream, &e)
                                 : dispatch_config<GemvInput::kPlain, W::kInt4>(
                                       cfg, f, x, w, bias, out, M, N, K, stream, &e));
  if (!built)
    return Status::error("gemv_fused_quant_with_config: {} not built for M {} with the {} input",
                         gemv_config_name(cfg), M, norm ? "RMS-norm" : "plain");
  CEILING_CUDA_RETURN(e);
  return Status();
}

Status dequantize_weights(const GemvWeights& w, int N, int K, bf16* out, cudaStream_t stream) {
  if (const std::string why = gemv_quant_unsupported(w, N, K); !why.empty())
    return Status::error("dequantize_weights: {}", why);
  const int64_t loads = int64_t{N} * K / gemv_weight_elems_per_load(w.format);
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((loads + 255) / 256, 132 * 16));
  if (w.format == W::kFP8)
    dequantize_kernel<W::kFP8><<<blocks, 256, 0, stream>>>(w, N, K, out);
  else
    dequantize_kernel<W::kInt4><<<blocks, 256, 0, stream>>>(w, N, K, out);
  CEILING_CUDA_RETURN_LAST();
  return Status();
}

void pack_gemv_int4(const uint8_t* q, int64_t N, int64_t K, uint8_t* out) {
  CEILING_ENSURE(K % 32 == 0, "pack_gemv_int4: K {} is not a multiple of 32", K);
  for (int64_t n = 0; n < N; ++n) {
    const uint8_t* row = q + n * K;
    uint8_t* dst = out + n * (K / 2);
    for (int64_t w = 0; w < K / 8; ++w) {  // one 32-bit word: k = 8w + e
      uint32_t word = 0;
      for (int e = 0; e < 8; ++e) {
        const int nibble = e % 2 == 0 ? e / 2 : 4 + e / 2;
        word |= static_cast<uint32_t>(row[8 * w + e] & 0xF) << (4 * nibble);
      }
      std::memcpy(dst + 4 * w, &word, 4);  // little-endian, as the GPU reads it
    }
  }
}

uint32_t pack_gemv_int4_group(float scale, uint8_t zero) {
  uint32_t bits = std::bit_cast<uint32_t>(scale);
  if ((bits & 0x7F800000u) != 0x7F800000u) bits += 0x80u;  // round to nearest (finite scales)
  return (bits & 0xFFFFFF00u) | (zero & 0xFu);
}

}  // namespace ceiling::cuda
