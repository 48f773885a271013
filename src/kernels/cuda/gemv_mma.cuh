// The tensor-core skinny GEMM of gemv.cu and gemv_quant.cu (2 ≤ M ≤ 16; include from those and
// gemv_kernel.cuh only), generic over the weights' format (gemv_weights.cuh).
//
// Why tensor cores for a memory-bound op (H100, 4096 → 4096, M = 16): 33.6 MB of weights, a
// ~10 µs floor at 3.3 TB/s. The register kernel spends per weight element one bf16 → fp32
// conversion, M FMAs and M/2 conversions of x (a CTA re-converts x for each pair of rows): ~25
// issue slots per element at M = 16, so it turns issue-bound from M ≈ 4 on (2026-11-21 H200 run:
// 45 µs at M = 16 against cuBLASLt's 14). One mma.sync.m16n8k16 takes 16 weight rows × 16 k × 8
// tokens straight from the 16-byte loads: ~1/16 of an issue slot per weight element, so the
// weights stream at the memory roof for every M ≤ 16.
//
// Fragment trick: a dot product does not care in which order k is summed, so the k index of the
// mma fragments is permuted to fit the 16-byte loads. Lane (g = lane / 4, q = lane % 4) loads 8
// consecutive k (a 16-byte piece) of weight rows g and g + 8 and of token g: the piece's 32-bit
// words 2h and 2h + 1 are what the m16n8k16 fragment layout calls columns {2q, 2q + 1} and
// {2q + 8, 2q + 9} of k step h ∈ {0, 1}, for A (rows g, g + 8) and B (column g) alike: the 4
// lanes of a row group cover 32 k with two mma.
// The C fragment: lane (g, q) holds rows g and g + 8 for tokens 2q and 2q + 1.
//
// CTA = kRowTiles × kKSlices warps: warp (rt, ks) owns 16 rows (tile rt; with kWarpTiles, below,
// 16·kWarpTiles) and the 64-wide k chunks ks, ks + kKSlices, ... (interleaved, so the CTA's warps
// read adjacent lines of each row); the slices are summed through shared memory and the ks = 0
// warps run the epilogue. Rows of a tile:
// plain, 16 consecutive rows; with `pairs`, the 8 pairs p0 + g (row g: the pair's first row, row
// g + 8: its second), so the SiLU or RoPE of a pair is local to one lane's C fragment.
#pragma once

#include <type_traits>
#include <utility>

#include "kernels/cuda/activation.cuh"
#include "kernels/cuda/carveout.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/gemv_weights.cuh"
#include "kernels/cuda/pdl.cuh"

namespace ceiling::cuda::detail {

// The RoPE + KV write epilogue of one pair, as rope_kv_write (shared with gemv_kernel): pair p is
// element e = p % (D/2) of head p / (D/2), a = x_e and b = x_{e + D/2} of one token, already
// rounded to bf16. A q head is rotated into out_row (the token's row of out) at rows ra, rb; a k
// head rotated and a v head as it is go to the paged cache at `slot` (skipped outside the cache).
__device__ __forceinline__ void rope_pair_store(const GemvRope& rope, bf16* out_row, int ra, int rb,
                                                int p, float a, float b, float sn, float cs,
                                                int64_t slot) {
  const int half_d = rope.D / 2, head = p / half_d, e = p % half_d;
  const float y1 = a * cs - b * sn, y2 = b * cs + a * sn;
  if (head < rope.Hq) {
    out_row[ra] = __float2bfloat16(y1);
    out_row[rb] = __float2bfloat16(y2);
    return;
  }
  if (slot < 0 || slot >= static_cast<int64_t>(rope.num_blocks) * rope.block_size) return;
  const bool is_k = head < rope.Hq + rope.Hkv;
  const int kv_head = head - rope.Hq - (is_k ? 0 : rope.Hkv);
  const int64_t off =
      ((slot / rope.block_size * rope.Hkv + kv_head) * rope.block_size + slot % rope.block_size) *
          rope.D +
      e;
  bf16* cache = is_k ? rope.k_cache : rope.v_cache;
  cache[off] = __float2bfloat16(is_k ? y1 : a);
  cache[off + half_d] = __float2bfloat16(is_k ? y2 : b);
}

// x [M, K] (M ≤ 8·kTiles), W [N, K], K % 8 == 0, x and W 16-byte aligned. Arguments as
// gemv_kernel (gemv.cu). Grid: one CTA per 16·kRowTiles·kWarpTiles rows (pairs: 8·… pairs).
// kPairs: the `pairs` epilogue of gemv_kernel (SiLU, or RoPE with rope.D > 0), a template
// parameter so that the plain kernel carries none of its registers (nor sincosf's slow path).
//
// kW: fp8 / int4 weights (`wq`; `w` unused), each 16-byte load holding kE = 16 / 32 weights:
// lane (g, q) takes loads 8c + q + 4j (j ∈ {0, 1}) of chunk c, so the four lanes of a row group
// read 4 adjacent loads — 128 contiguous k for int4, one group when G ≥ 128 (gemv_quant_mma_ok)
// — and each load is dequantized to bf16 pieces of 8 k (dequant_bf16) that run the bf16 path's
// two mma each. int4: the pieces of one load accumulate apart and are scaled by the row's group
// scale; fp8: the row scale (× 2^8) is applied to the sums.
// Resident CTAs an SM for int4 weights with one token tile (M ≤ 8; ≤ 128 registers at 256
// threads). r55 ncu (H100, int4 down at M = 1): unbounded, 139 registers, one CTA of 8 warps an
// SM, issue 49 % busy, DRAM 45 % of peak — the register GEMV's situation (gemv_kernel.cuh,
// kQuantM1Warps). r57, bounded: int4 at M = 1 o 6.2 → 5.5 µs, down 14.8 → 13.2; at M = 4 QKV
// 9.7 → 8.3, o 7.0 → 5.9, gate/up 46.7 → 31.3, down 16.7 → 14.2 (against r54's unbounded run).
// fp8 bounded the same way: QKV better, o and down 6–12 % worse at M = 4: left unbounded. Two
// token tiles (M 9..16) spill at 128 registers: left unbounded.
constexpr int kInt4MmaCtas = 2;

// fp8 with two token tiles and a plain input: 128 registers held two CTAs an SM until the
// x-operand split of kWarpTiles cost it 7 more (H200, M = 16: o 7.9 µs in r68 → 10.8 in r69, down
// 20.8 → 28.2): bounded to the two CTAs it had (r70: 8.0, 21.3).
template <GemvWeightFormat kW, int kTiles, GemvInput kIn, int kWarpTiles>
constexpr int gemv_mma_min_ctas() {
  if (kWarpTiles != 1) return 1;
  if (kW == GemvWeightFormat::kInt4 && kTiles == 1) return kInt4MmaCtas;
  if (kW == GemvWeightFormat::kFP8 && kTiles == 2 && kIn == GemvInput::kPlain) return 2;
  return 1;
}

// kWarpTiles (R): each warp owns R consecutive 16-row tiles (pairs: 8-pair tiles) and feeds every
// x fragment it loads to all R, so x moves through L1 once per 16·R weight rows instead of once
// per 16 (a CTA then covers 16·kRowTiles·R rows). The quantized formats multiply that traffic: a
// 16-byte int4 load holds 4 pieces of 8 k, each taking its own 16-byte load of x per token tile.
template <int kTiles, int kRowTiles, int kKSlices, int kUnroll, GemvInput kIn, bool kPairs,
          typename OutT, GemvWeightFormat kW = GemvWeightFormat::kBF16, int kWarpTiles = 1>
__global__ void __launch_bounds__(32 * kRowTiles * kKSlices,
                                  gemv_mma_min_ctas<kW, kTiles, kIn, kWarpTiles>())
    gemv_mma_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w,
                    const bf16* __restrict__ bias, OutT* __restrict__ out, int M, int N, int K,
                    const bf16* __restrict__ gamma, float eps, bool accumulate, GemvRope rope,
                    GemvWeights wq) {
  static_assert(!kPairs || std::is_same_v<OutT, bf16>, "the pair epilogues write bf16");
  constexpr bool kNorm = kIn == GemvInput::kRmsNorm, pairs = kPairs;
  constexpr bool kQuant = kW != GemvWeightFormat::kBF16, kInt4 = kW == GemvWeightFormat::kInt4;
  constexpr int kE = weight_elems<kW>();  // weights per 16-byte load
  constexpr int R = kWarpTiles;
  pdl_launch_dependents();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int rt = warp % kRowTiles, ks = warp / kRowTiles;
  const int tile0 = (blockIdx.x * kRowTiles + rt) * R;  // this warp's tiles: tile0 + r, r < R
  const int half = N / 2, half_d = rope.D / 2;
  const auto pair_row = [&](int p, int e) {
    if (rope.D == 0) return e == 0 ? p : half + p;
    return (p / half_d) * rope.D + p % half_d + e * half_d;
  };
  // This lane's two weight rows of each tile r (g and g + 8), clamped for the loads; int4: their
  // group words (load pc is in group pc >> gshift).
  const int pieces = K / kE;  // 16-byte loads per row; 8 per chunk and row
  const char* wbase = kQuant ? static_cast<const char*>(wq.data) : reinterpret_cast<const char*>(w);
  const int gshift = kInt4 ? __ffs(wq.group_size / 32) - 1 : 0;
  int row[R][2];
  const char* wrow[R][2];
  const uint32_t* grow[R][2];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int tile = tile0 + r;
      row[r][e] =
          pairs ? pair_row(min(tile * 8 + g, half - 1), e) : min(tile * 16 + g + 8 * e, N - 1);
      wrow[r][e] = wbase + static_cast<int64_t>(row[r][e]) * pieces * 16;
      grow[r][e] =
          kInt4 ? wq.groups + static_cast<int64_t>(row[r][e]) * (K / wq.group_size) : nullptr;
    }

  // RoPE inputs (no kernel of the step writes them): sin/cos of this lane's pair for its tokens
  // 2q + i of each tile, before the wait.
  float rope_sn[R][kTiles][2] = {}, rope_cs[R][kTiles][2] = {};
  int64_t rope_slot[R][kTiles][2] = {};
  if (kPairs && rope.D > 0 && ks == 0) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int p = (tile0 + r) * 8 + g;
#pragma unroll
      for (int t = 0; t < kTiles; ++t)
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const int m = t * 8 + 2 * q + i;
          if (m < M && p < half) {
            sincosf(static_cast<float>(rope.positions[m]) * rope.inv_freq[p % half_d],
                    &rope_sn[r][t][i], &rope_cs[r][t][i]);
            if (p / half_d >= rope.Hq) rope_slot[r][t][i] = rope.slot_mapping[m];
          }
        }
    }
  }

  const int chunks = (pieces + 7) / 8;  // bf16: 64-wide chunk c holds pieces 8c .. 8c + 7
  float acc[R][kTiles][4] = {};
  float ss[kTiles] = {};  // Σ x² of token t·8 + g over this lane's pieces (kRmsNorm)
  // With `accumulate`, the epilogue lanes load the old outputs right after the wait, so those
  // loads overlap the weight stream (prev[t][2e + i]: row g + 8e, token t·8 + 2q + i).
  float prev[R][kTiles][4] = {};
  const auto wait_producer = [&] {
    pdl_wait();
    if constexpr (std::is_same_v<OutT, bf16>) {
      if (!accumulate || pairs || ks != 0) return;
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < kTiles; ++t)
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int m = t * 8 + 2 * q + (j & 1), n = (tile0 + r) * 16 + g + 8 * (j >> 1);
            if (m < M && n < N)
              prev[r][t][j] = __bfloat162float(out[static_cast<int64_t>(m) * N + n]);
          }
    }
  };

  // A stage: kUnroll chunks c = c0 + u·kKSlices; lane (g, q) holds pieces 8c + 2q + j (j ∈ {0,
  // 1}, 32 contiguous bytes) of its rows g (a) and g + 8 (b), so one warp reads whole 128-byte
  // lines of 16 rows. Two stages alternate: the next one's loads are in flight while this one's
  // x is loaded and its mma run.
  struct Stage {
    uint4 a[kUnroll][2][R], b[kUnroll][2][R];
    uint32_t ga[kUnroll][2][R], gb[kUnroll][2][R];  // int4: the loads' group words
  };
  const auto piece = [&](int c0, int u, int j) {
    return 8 * (c0 + u * kKSlices) + (kQuant ? q + 4 * j : 2 * q + j);
  };
  const auto load_w = [&](Stage& st, int c0) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int pc = piece(c0, u, j);
        const bool ok = pc < pieces;
#pragma unroll
        for (int r = 0; r < R; ++r) {
          st.a[u][j][r] =
              ok ? load16_stream(wrow[r][0] + int64_t{pc} * 16) : make_uint4(0, 0, 0, 0);
          st.b[u][j][r] =
              ok ? load16_stream(wrow[r][1] + int64_t{pc} * 16) : make_uint4(0, 0, 0, 0);
          if constexpr (kInt4) {
            st.ga[u][j][r] = ok ? __ldg(grow[r][0] + (pc >> gshift)) : 0u;
            st.gb[u][j][r] = ok ? __ldg(grow[r][1] + (pc >> gshift)) : 0u;
          }
        }
      }
  };
  // x (and γ) of the stage first, then the mma. With the RMS-norm input the B operand x·γ is
  // fp32: it is fed as hi + lo, two bf16 terms (hi = bf16(v), lo = bf16(v − hi)), so the product
  // keeps ~16 bits as gemv_kernel's fp32 one does, not a bf16 rounding the unfused path lacks.
  // One 8-k piece: the B operands of x (and γ) of each token tile at k0 (hi, and lo with the
  // RMS-norm input; Σ x² counted once), then per weight tile the two mma per token tile with the
  // weight pieces wa (row g) and wb (row g + 8) into d.
  const auto x_operand = [&](const uint4(&xr)[kTiles], const uint4& gr, uint4(&hi)[kTiles],
                             uint4(&lo)[kTiles]) {
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
      hi[t] = xr[t];
      lo[t] = make_uint4(0, 0, 0, 0);
      if constexpr (kNorm) {
        float xf[8], gf[8], hf[8];
        to_float8(as_bf16x8(hi[t]), xf);
        to_float8(as_bf16x8(gr), gf);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          ss[t] = fmaf(xf[e], xf[e], ss[t]);
          xf[e] *= gf[e];
        }
        const Bf16x8 h8 = from_float8(xf);
        to_float8(h8, hf);
#pragma unroll
        for (int e = 0; e < 8; ++e) hf[e] = xf[e] - hf[e];
        hi[t] = as_uint4(h8);
        lo[t] = as_uint4(from_float8(hf));
      }
    }
  };
  const auto mma_piece = [&](const uint4& wa, const uint4& wb, const uint4(&hi)[kTiles],
                             const uint4(&lo)[kTiles], float(&d)[kTiles][4]) {
#pragma unroll
    for (int t = 0; t < kTiles; ++t)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t af[4] = {h ? wa.z : wa.x, h ? wb.z : wb.x, h ? wa.w : wa.y, h ? wb.w : wb.y};
        mma_16816(d[t], af, h ? hi[t].z : hi[t].x, h ? hi[t].w : hi[t].y);
        if constexpr (kNorm) mma_16816(d[t], af, h ? lo[t].z : lo[t].x, h ? lo[t].w : lo[t].y);
      }
  };
  // Quantized weights: per load, its kE / 8 pieces dequantized to bf16 (x loaded per piece).
  const auto compute_quant = [&](const Stage& st, int c0) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int pc = piece(c0, u, j);
        const bool ok = pc < pieces;  // else x is zero: the load adds nothing
        uint32_t za[R], zb[R];
#pragma unroll
        for (int r = 0; r < R; ++r) {
          za[r] = kInt4 ? int4_zero_word(st.ga[u][j][r]) : 0u;
          zb[r] = kInt4 ? int4_zero_word(st.gb[u][j][r]) : 0u;
        }
        float part[R][kTiles][4] = {};
#pragma unroll
        for (int v = 0; v < kE / 8; ++v) {
          const int64_t k0 = int64_t{pc} * kE + 8 * v;
          uint4 xr[kTiles], gr = make_uint4(0, 0, 0, 0);
          if constexpr (kNorm)
            if (ok) gr = as_uint4(load8(gamma + k0));
#pragma unroll
          for (int t = 0; t < kTiles; ++t) {
            const int m = t * 8 + g;
            xr[t] = ok && m < M ? as_uint4(load8(x + static_cast<int64_t>(m) * K + k0))
                                : make_uint4(0, 0, 0, 0);
          }
          uint4 hi[kTiles], lo[kTiles];
          x_operand(xr, gr, hi, lo);
#pragma unroll
          for (int r = 0; r < R; ++r)
            mma_piece(dequant_bf16<kW>(st.a[u][j][r], v, za[r]),
                      dequant_bf16<kW>(st.b[u][j][r], v, zb[r]), hi, lo, kInt4 ? part[r] : acc[r]);
        }
        if constexpr (kInt4) {
#pragma unroll
          for (int r = 0; r < R; ++r) {
            const float sa = int4_scale(st.ga[u][j][r]), sb = int4_scale(st.gb[u][j][r]);
#pragma unroll
            for (int t = 0; t < kTiles; ++t) {
              acc[r][t][0] = fmaf(sa, part[r][t][0], acc[r][t][0]);
              acc[r][t][1] = fmaf(sa, part[r][t][1], acc[r][t][1]);
              acc[r][t][2] = fmaf(sb, part[r][t][2], acc[r][t][2]);
              acc[r][t][3] = fmaf(sb, part[r][t][3], acc[r][t][3]);
            }
          }
        }
      }
  };
  const auto compute = [&](const Stage& st, int c0) {
    if constexpr (kQuant) {
      compute_quant(st, c0);
    } else {
      uint4 xr[kUnroll][2][kTiles];
      uint4 gr[kUnroll][2] = {};
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int pc = piece(c0, u, j);
          const bool ok = pc < pieces;
          if constexpr (kNorm)
            gr[u][j] = ok ? as_uint4(load8(gamma + pc * 8)) : make_uint4(0, 0, 0, 0);
#pragma unroll
          for (int t = 0; t < kTiles; ++t) {
            const int m = t * 8 + g;
            xr[u][j][t] = ok && m < M ? as_uint4(load8(x + static_cast<int64_t>(m) * K + pc * 8))
                                      : make_uint4(0, 0, 0, 0);
          }
        }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          uint4 hi[kTiles], lo[kTiles];
          x_operand(xr[u][j], gr[u][j], hi, lo);
#pragma unroll
          for (int r = 0; r < R; ++r) mma_piece(st.a[u][j][r], st.b[u][j][r], hi, lo, acc[r]);
        }
    }
  };

  // The weights do not depend on the previous kernel: the first stage is loaded before the wait.
  constexpr int kStride = kKSlices * kUnroll;
  Stage s0, s1;
  int c0 = ks;
  load_w(s0, c0);
  wait_producer();
  while (c0 < chunks) {
    load_w(s1, c0 + kStride);
    compute(s0, c0);
    c0 += kStride;
    if (c0 >= chunks) break;
    load_w(s0, c0 + kStride);
    compute(s1, c0);
    c0 += kStride;
  }

  if constexpr (kW == GemvWeightFormat::kFP8) {  // the row scales, with dequant_bf16's 2^8
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float sa = wq.row_scale[row[r][0]] * kFp8Bf16Unscale,
                  sb = wq.row_scale[row[r][1]] * kFp8Bf16Unscale;
#pragma unroll
      for (int t = 0; t < kTiles; ++t) {
        acc[r][t][0] *= sa;
        acc[r][t][1] *= sa;
        acc[r][t][2] *= sb;
        acc[r][t][3] *= sb;
      }
    }
  }

  // Sum the k slices; the ks = 0 warps keep the totals. Σ x²: over the 4 lanes of a token, then
  // over the slices (the row tiles of one slice read the same x: rt = 0 publishes).
  __shared__ float red[kKSlices > 1 ? kKSlices - 1 : 1][kRowTiles][R][kTiles][4][32];
  __shared__ float ss_part[kKSlices][kTiles * 8];
  if constexpr (kNorm) {
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
      ss[t] += __shfl_xor_sync(0xffffffffu, ss[t], 1);
      ss[t] += __shfl_xor_sync(0xffffffffu, ss[t], 2);
      if (rt == 0 && q == 0) ss_part[ks][t * 8 + g] = ss[t];
    }
  }
  if (ks > 0) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int t = 0; t < kTiles; ++t)
#pragma unroll
        for (int i = 0; i < 4; ++i) red[ks - 1][rt][r][t][i][lane] = acc[r][t][i];
  }
  if constexpr (kKSlices > 1 || kNorm) __syncthreads();
  if (ks > 0) return;
#pragma unroll
  for (int j = 0; j + 1 < kKSlices; ++j)
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int t = 0; t < kTiles; ++t)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[r][t][i] += red[j][rt][r][t][i][lane];

  // Epilogue: lane (g, q) holds, per token tile t and i ∈ {0, 1}, token m = t·8 + 2q + i of row
  // g (acc[t][i]) and row g + 8 (acc[t][2 + i]).
  const auto row_scale = [&](int m) {
    if constexpr (!kNorm) return 1.0f;
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < kKSlices; ++j) s += ss_part[j][m];
    return rsqrtf(s / static_cast<float>(K) + eps);
  };
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int tile = tile0 + r;
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int m = t * 8 + 2 * q + i;
        if (m >= M) continue;
        const float sc = row_scale(m);
        if constexpr (!kPairs) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int n = tile * 16 + g + 8 * e;
            if (n >= N) continue;
            float v = acc[r][t][2 * e + i] * sc;
            if (bias) v += __bfloat162float(bias[n]);
            OutT* o = out + static_cast<int64_t>(m) * N + n;
            if constexpr (std::is_same_v<OutT, bf16>) {
              if (accumulate) v = __bfloat162float(__float2bfloat16(v)) + prev[r][t][2 * e + i];
              *o = __float2bfloat16(v);
            } else {
              *o = v;
            }
          }
        } else {
          const int p = tile * 8 + g;
          if (p >= half) continue;
          const int ra = pair_row(p, 0), rb = pair_row(p, 1);
          float a = acc[r][t][i] * sc, b = acc[r][t][2 + i] * sc;
          if (bias) {
            a += __bfloat162float(bias[ra]);
            b += __bfloat162float(bias[rb]);
          }
          a = __bfloat162float(__float2bfloat16(a));
          b = __bfloat162float(__float2bfloat16(b));
          if (rope.D == 0) {
            out[static_cast<int64_t>(m) * half + p] = __float2bfloat16(silu_times(a, b));
            continue;
          }
          rope_pair_store(rope, out + static_cast<int64_t>(m) * N, ra, rb, p, a, b,
                          rope_sn[r][t][i], rope_cs[r][t][i], rope_slot[r][t][i]);
        }
      }
    }
  }
}

// Launches a gemv_mma_kernel instantiation with PDL after asking (once per kernel and device) for
// its L1 / shared-memory split: it reads x through L1 at every M (carveout.h).
template <typename... KernelArgs, typename... Args>
cudaError_t launch_gemv_mma(void (*kernel)(KernelArgs...), unsigned grid, int threads,
                            cudaStream_t s, Args&&... args) {
  if (const cudaError_t e =
          prefer_l1_at_full_occupancy(reinterpret_cast<const void*>(kernel), threads);
      e != cudaSuccess)
    return e;
  return launch_pdl(kernel, dim3(grid), dim3(threads), 0, s, std::forward<Args>(args)...);
}

}  // namespace ceiling::cuda::detail
