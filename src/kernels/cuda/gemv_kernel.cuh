// The register GEMV kernel (M ≤ 16, CUDA cores) of gemv.cu and gemv_quant.cu, generic over the
// weights' format (bf16, fp8, int4: gemv_quant.h). Include from those two files only.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/activation.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/gemv_mma.cuh"
#include "kernels/cuda/gemv_quant.h"
#include "kernels/cuda/gemv_weights.cuh"
#include "kernels/cuda/pdl.cuh"

namespace ceiling::cuda::detail {

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
// spilling (the plain M = 1 kernel has 48: 10 CTAs). The int4 M = 1 kernel is bounded to
// kQuantM1Warps resident warps an SM; the other quantized shapes are left unbounded.
// kW: the weights' format (gemv_quant.h): W [N, K] in `w` (bf16), or `wq` (fp8 / int4, `w`
// unused), dequantized per 16-byte load by dequant8; fp8's row scale is applied to the row's sum,
// int4's group scale to each 32-wide chunk's partial sums.
// The int4 M = 1 kernel's resident warps per SM (the register budget: 64K / (warps · 32)). r55
// ncu (H100, int4 gate/up, t64r4u1): unbounded, 165 registers, 12 warps an SM (2.7 active a
// scheduler, 1.1 eligible), issue slots 62 % busy, DRAM 36 % of peak. r56, bounded to 16 warps
// (128 registers, no spill): gate/up 40.0 → 35.4 µs, QKV + RoPE 10.8 → 11.4, batch-1 decode
// 1.82 → 1.90× bf16; fp8 bounded the same way lost as much as it gained (QKV +0.7 µs, down +0.8,
// gate/up −0.9): left unbounded.
constexpr int kQuantM1Warps = 16;  // ≤ 128 registers

template <int kMaxM, int kRows, int kUnroll, int kThreads, GemvInput kIn, typename OutT,
          GemvWeightFormat kW = GemvWeightFormat::kBF16>
__global__ void __launch_bounds__(kThreads, kMaxM == 1 && kIn == GemvInput::kRmsNorm &&
                                                    kRows == 2 && kW == GemvWeightFormat::kBF16
                                                ? 9 * 128 / kThreads
                                            : kMaxM == 1 && kW == GemvWeightFormat::kInt4
                                                ? kQuantM1Warps * 32 / kThreads
                                                : 1)
    gemv_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w,
                const bf16* __restrict__ bias, OutT* __restrict__ out, int M, int N, int K,
                const bf16* __restrict__ gamma, float eps, bool accumulate, bool pairs,
                GemvRope rope, GemvWeights wq) {
  static_assert(kMaxM * kRows <= kThreads, "one output per thread in the epilogue");
  static_assert(kRows % 2 == 0 || kRows == 1, "pairs split the rows in halves");
  constexpr int kHalf = kRows / 2;
  constexpr int kElems = weight_elems<kW>();  // weights per 16-byte load
  constexpr bool kInt4 = kW == GemvWeightFormat::kInt4;
  pdl_launch_dependents();
  const int chunks = K / kElems;
  const int half = N / 2;  // pairs: N/2 of them
  const int half_d = rope.D / 2;
  // The rows of pair p: its first (r = 0) or second (r = 1) element.
  const auto pair_row = [&](int p, int r) {
    if (rope.D == 0) return r == 0 ? p : half + p;
    return (p / half_d) * rope.D + p % half_d + r * half_d;
  };
  const int n0 = blockIdx.x * (pairs ? kHalf : kRows);
  const char* wrow[kRows];           // row n's bytes: 16 per chunk
  const uint32_t* grow[kRows] = {};  // int4: row n's groups
  const char* wbase = kW == GemvWeightFormat::kBF16 ? reinterpret_cast<const char*>(w)
                                                    : static_cast<const char*>(wq.data);
  // int4 chunk c (32 k) is in group c >> gshift (G a power of two ≥ 32).
  const int gshift = kInt4 ? __ffs(wq.group_size / 32) - 1 : 0;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int n = !pairs      ? min(n0 + r, N - 1)
                  : r < kHalf ? pair_row(min(n0 + r, half - 1), 0)
                              : pair_row(min(n0 + r - kHalf, half - 1), 1);
    wrow[r] = wbase + static_cast<int64_t>(n) * chunks * 16;
    if constexpr (kInt4) grow[r] = wq.groups + static_cast<int64_t>(n) * (K / wq.group_size);
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
  // Chunk c: kElems weights of each row (one 16-byte load each; gw: int4 groups), in pieces of 8.
  auto fma_chunk = [&](const uint4(&wv)[kRows], const uint32_t(&gw)[kRows], int c) {
    float part[kInt4 ? kMaxM : 1][kInt4 ? kRows : 1] = {};  // int4: the chunk's unscaled sums
    uint32_t zw[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) zw[r] = kInt4 ? int4_zero_word(gw[r]) : 0u;
#pragma unroll
    for (int j = 0; j < kElems / 8; ++j) {
      const int k0 = c * kElems + j * 8;
      float wf[kRows][8];
#pragma unroll
      for (int r = 0; r < kRows; ++r) dequant8<kW>(wv[r], j, zw[r], wf[r]);
      float gf[8];  // the norm weight γ (kRmsNorm)
      if constexpr (kIn == GemvInput::kRmsNorm) to_float8(load8(gamma + k0), gf);
#pragma unroll
      for (int m = 0; m < kMaxM; ++m) {
        if (m < M) {
          float xf[8];
          to_float8(load8(x + static_cast<int64_t>(m) * K + k0), xf);
          if constexpr (kIn == GemvInput::kRmsNorm) {
#pragma unroll
            for (int e = 0; e < 8; ++e) {
              ss[m] = fmaf(xf[e], xf[e], ss[m]);
              xf[e] *= gf[e];
            }
          }
#pragma unroll
          for (int r = 0; r < kRows; ++r) {
            float& a = kInt4 ? part[kInt4 ? m : 0][kInt4 ? r : 0] : acc[m][r];
#pragma unroll
            for (int e = 0; e < 8; ++e) a = fmaf(xf[e], wf[r][e], a);
          }
        }
      }
    }
    if constexpr (kInt4) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const float sc = int4_scale(gw[r]);
#pragma unroll
        for (int m = 0; m < kMaxM; ++m)
          if (m < M) acc[m][r] = fmaf(sc, part[m][r], acc[m][r]);
      }
    }
  };
  // The sum of weight row n (fp8: times its scale).
  const auto row_sum = [&](float v, int n) {
    if constexpr (kW == GemvWeightFormat::kFP8) return v * wq.row_scale[n];
    return v;
  };

  // The weights do not depend on the previous kernel, x and out do: the first weight loads are
  // issued before pdl_wait.
  // With `accumulate`, the thread that will write output i = threadIdx.x (< kMaxM·kRows) loads
  // the old value right after the wait, so that load overlaps the weight stream.
  bool waited = false;
  float prev = 0.0f;
  const auto wait_producer = [&] {
    if (waited) return;
    pdl_wait();
    waited = true;
    if constexpr (std::is_same_v<OutT, bf16>) {
      const int i = threadIdx.x, m = i / kRows, n = n0 + i % kRows;
      if (accumulate && !pairs && i < kMaxM * kRows && m < M && n < N)
        prev = __bfloat162float(out[static_cast<int64_t>(m) * N + n]);
    }
  };
  int c = threadIdx.x;
  for (; c + (kUnroll - 1) * kThreads < chunks; c += kUnroll * kThreads) {
    uint4 wv[kUnroll][kRows];
    uint32_t gw[kUnroll][kRows] = {};
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        wv[u][r] = load16_stream(wrow[r] + int64_t{c + u * kThreads} * 16);
        if constexpr (kInt4) gw[u][r] = __ldg(grow[r] + ((c + u * kThreads) >> gshift));
      }
    wait_producer();
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) fma_chunk(wv[u], gw[u], c + u * kThreads);
  }
  for (; c < chunks; c += kThreads) {
    uint4 wv[kRows];
    uint32_t gw[kRows] = {};
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      wv[r] = load16_stream(wrow[r] + int64_t{c} * 16);
      if constexpr (kInt4) gw[r] = __ldg(grow[r] + (c >> gshift));
    }
    wait_producer();
    fma_chunk(wv, gw, c);
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
      const float s = warp_sum(acc[m][r]);
      if (lane == 0) partial[warp][m * kRows + r] = s;
    }
    if constexpr (kIn == GemvInput::kRmsNorm) {
      const float s = warp_sum(ss[m]);
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
          g = row_sum(g, ra) * sc;
          u = row_sum(u, rb) * sc;
          if (bias) {
            g += __bfloat162float(bias[ra]);
            u += __bfloat162float(bias[rb]);
          }
          const float gb = __bfloat162float(__float2bfloat16(g));
          const float ub = __bfloat162float(__float2bfloat16(u));
          if (rope.D == 0) {
            store_out(out + static_cast<int64_t>(m) * half + n, silu_times(gb, ub));
            continue;
          }
          if constexpr (std::is_same_v<OutT, bf16>)
            rope_pair_store(rope, out + static_cast<int64_t>(m) * N, ra, rb, n, gb, ub, rope_sn,
                            rope_cs, rope_slot);
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
      s = row_sum(s, n) * row_scale(m);
      if (bias) s += __bfloat162float(bias[n]);
      if constexpr (std::is_same_v<OutT, bf16>) {
        if (accumulate) s = __bfloat162float(__float2bfloat16(s)) + prev;  // i == threadIdx.x
      }
      store_out(out + static_cast<int64_t>(m) * N + n, s);
    }
  }
}

}  // namespace ceiling::cuda::detail
