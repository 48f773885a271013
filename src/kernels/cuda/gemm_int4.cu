// The int4-weight GEMM (gemm_int4.h): mma.sync m16n8k16 on bf16 (q − zero) pieces dequantized in
// registers from a cp.async ring of the packed weights.
//
// Napkin math (H200, Llama-3.1-8B, one prefill chunk of M = 128): 7.0 G weights are 3.5 GB of
// nibbles + 0.22 GB of group words, 0.8 ms at 4.6 TB/s; 1.8 TFLOP at mma.sync's ~600 TFLOP/s is
// 3.0 ms, so from M ≈ 32 on the tensor cores decide. The path it replaces wrote and read a 14 GB
// bf16 image per step (~6 ms) before cuBLASLt's ~3 ms. Per k tile of 128 and warp (32 rows × 32
// tokens): 64 mma against 2 × 2 × 4 × 4 int4 words → bf16 pairs (a shift, a LOP3, a bf16
// subtraction each: 192 lane ops) and 20 shared loads; the dequantization is shared by the 32
// tokens, the x fragments by the 32 rows. Measured (r77–r81, bench/lowprec_notes.md): ~500
// instructions a warp and k tile and ~200 TFLOP/s at most, latency-bound at 8–12 warps an SM
// (ncu); hence kGemmInt4MaxM. Warps of 8 or 16 tokens (decode batches ≤ 16, r82–r86): ~417
// instructions a warp and 128-k tile at 8 tokens (ncu r84, gate/up at M = 1), issue ~48 % busy,
// ~50 % of read; faster than the GEMV only on gate/up (its norm-input and SiLU variant).
//
// Layout of one stage in shared memory (k tile kt, 128 k):
//   W:      [rows][64 bytes], row r = the tile's row n0 + r (with SiLU pairs: the kernel's
//           tile_row), its 128 k as gemv_quant.h packs them
//           (16 bytes = 32 k); lane (g, q) of a 16-row tile reads 16 bytes q of rows g and g + 8,
//           two rows = 128 contiguous bytes per quarter warp: no bank conflict.
//   x:      [tokens][256 bytes], 16-byte chunk c of token row t stored at c ^ (c >> 3 & 1) ^
//           (t & 1) << 1, so the quarter warp reading chunks 4q + v of tokens g, g + 1 hits 8
//           distinct bank groups.
//   groups: [rows] u32, the group word of row n0 + r for this k tile.
// The fragment trick of gemv_mma.cuh: lane q's 16-byte load (k 32q .. 32q + 31 of the tile) is
// four pieces of 8 k; piece v's words 2h, 2h + 1 are the m16n8k16 columns {2q, 2q + 1} and
// {2q + 8, 2q + 9} of k step h for W (rows g, g + 8) and x (token g) alike.
#include <fmt/format.h>

#include "core/check.h"
#include "kernels/cuda/activation.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemm_int4.h"
#include "kernels/cuda/gemv_weights.cuh"
#include "kernels/cuda/pdl.cuh"

namespace ceiling::cuda {
namespace detail {
namespace {

constexpr int kBK = 128;  // k per k tile: one int4 group (G ≥ 128)

// kWN × kWM warps of 32 rows × 8·kJ tokens, repeated for kKS k slices: a stage holds kKS
// consecutive k tiles, slice ks's warps compute tile ks of each stage.
template <int kWN, int kWM, int kKS, int kJ>
struct Int4Tile {
  static constexpr int kRows = 32 * kWN, kTokens = 8 * kJ * kWM, kThreads = 32 * kWN * kWM * kKS;
  static constexpr int kWBytes = kRows * kBK / 2, kXBytes = kTokens * kBK * 2, kGBytes = 4 * kRows;
  static constexpr int kTileBytes = kWBytes + kXBytes + kGBytes;  // one k tile
  static constexpr int kStageBytes = kKS * kTileBytes;
  // 16-byte copies of one k tile (x: 16 a token, W: 4 a row) and how many a copying thread
  // issues: x one token's run of chunks, W chunks rows apart; small tiles leave threads idle.
  static constexpr int kXChunks = kTokens * 16, kWChunks = kRows * 4;
  static constexpr int kXPerThread = kXChunks > kThreads ? kXChunks / kThreads : 1;
  static constexpr int kWPerThread = kWChunks > kThreads ? kWChunks / kThreads : 1;
  static constexpr int kXThreads = kXChunks / kXPerThread, kWThreads = kWChunks / kWPerThread;
  static_assert(kXChunks % kThreads == 0 || kThreads % kXChunks == 0, "x copies uneven");
  static_assert(kWChunks % kThreads == 0 || kThreads % kWChunks == 0, "W copies uneven");
  static_assert(kThreads >= kRows, "a thread per row's group word");
};

// Grid (ceil(N / rows), ceil(M / tokens)): the row tile varies fastest, so the CTAs of a wave
// share their x tile and the (small) int4 weights stay in L2 across the token tiles.
// Warp (wn, wm, ks) computes rows 32·wn + [0, 32) × tokens 8·kJ·wm + [0, 8·kJ) of the CTA's tile
// over k slice ks: two 16-row tiles i × kJ 8-token tiles j; the slices' sums meet in shared memory.
// `pairs` (SiLU-and-multiply, W = [gate; up], out [M, N/2]): warp wn's tile i = 0 holds gate rows
// p and tile i = 1 up rows N/2 + p of the pairs p = blockIdx.x · kRows/2 + 16 wn + [0, 16), so a
// lane holds both halves of its pairs.
template <int kWN, int kWM, int kKS, int kStages, int kJ>
__global__ void __launch_bounds__(32 * kWN * kWM * kKS)
    gemm_int4_kernel(const bf16* __restrict__ x, GemvWeights w, const bf16* __restrict__ bias,
                     bf16* __restrict__ out, int M, int N, int K, bool accumulate, bool pairs) {
  using T = Int4Tile<kWN, kWM, kKS, kJ>;
  constexpr int kWarpTokens = 8 * kJ;
  extern __shared__ __align__(128) unsigned char smem[];
  pdl_launch_dependents();
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, q = lane & 3;
  const int ks = warp / (kWN * kWM), wi = warp % (kWN * kWM), wn = wi % kWN, wm = wi / kWN;
  const int n0 = blockIdx.x * T::kRows, m0 = blockIdx.y * T::kTokens;
  const int ktiles = K / kBK, stages_total = (ktiles + kKS - 1) / kKS;
  const int gshift = __ffs(w.group_size / kBK) - 1;  // k tile kt lies in group kt >> gshift
  const uint32_t sbase = smem_addr(smem);
  const int half = N / 2, p0 = blockIdx.x * (T::kRows / 2);
  // W's row behind row r of the CTA's tile (clamped in range; `ok` whether it exists).
  const auto tile_row = [&](int r, bool& ok) {
    if (!pairs) {
      ok = n0 + r < N;
      return min(n0 + r, N - 1);
    }
    const int p = p0 + 16 * (r / 32) + r % 16;
    ok = p < half;
    return min(p, half - 1) + (r / 16 % 2) * half;
  };

  // This thread's copies of one k tile, addresses fixed but for the tile's k offset:
  // x: token xt, chunks xc0 + c, c < kXPerThread (chunk c of a token lands at
  // c ^ (c >> 3 & 1) ^ (t & 1) << 1; xc0 is a multiple of the run ≤ 8, so xc0 + c lands at
  // xp ^ c); W: chunk wc of rows wr + i · (kWThreads / 4); the group word of row tid.
  const int xt = tid / (16 / T::kXPerThread), xc0 = tid % (16 / T::kXPerThread) * T::kXPerThread;
  const bool x_copies = tid < T::kXThreads, x_ok = m0 + xt < M;
  const char* xsrc = reinterpret_cast<const char*>(x + int64_t{min(m0 + xt, M - 1)} * K) + xc0 * 16;
  const int xp = xc0 ^ ((xc0 >> 3) & 1) ^ ((xt & 1) << 1);
  const uint32_t xdst = T::kWBytes + xt * 256;
  const int wc = tid & 3, wr = tid >> 2;
  const bool w_copies = tid < T::kWThreads;
  const char* wsrc[T::kWPerThread];
  bool w_ok[T::kWPerThread];
#pragma unroll
  for (int i = 0; i < T::kWPerThread; ++i) {
    const int n = tile_row(wr + i * (T::kWThreads / 4), w_ok[i]);
    wsrc[i] = static_cast<const char*>(w.data) + int64_t{n} * (K / 2) + wc * 16;
  }
  bool g_ok = false;  // read by the threads tid < kRows only
  const int gn = tile_row(tid % T::kRows, g_ok);
  const uint32_t* gsrc = w.groups + int64_t{gn} * (K / w.group_size);

  // The kKS k tiles of stage st into slot `slot`. Weights and group words first: no kernel of
  // the step writes them, so the first stages' are requested before the PDL wait.
  const auto load_w = [&](int slot, int st) {
#pragma unroll
    for (int u = 0; u < kKS; ++u) {
      const int kt = st * kKS + u;
      if (kt >= ktiles) break;
      const uint32_t d = sbase + slot * T::kStageBytes + u * T::kTileBytes;
      if (w_copies) {
#pragma unroll
        for (int i = 0; i < T::kWPerThread; ++i)
          cp_async16(d + (wr + i * (T::kWThreads / 4)) * 64 + wc * 16, wsrc[i] + kt * (kBK / 2),
                     w_ok[i]);
      }
      if (tid < T::kRows)
        cp_async4(d + T::kWBytes + T::kXBytes + tid * 4, gsrc + (kt >> gshift), g_ok);
    }
  };
  const auto load_x = [&](int slot, int st) {
    if (!x_copies) return;
#pragma unroll
    for (int u = 0; u < kKS; ++u) {
      const int kt = st * kKS + u;
      if (kt >= ktiles) break;
      const uint32_t d = sbase + slot * T::kStageBytes + u * T::kTileBytes + xdst;
#pragma unroll
      for (int c = 0; c < T::kXPerThread; ++c)
        cp_async16(d + 16 * (xp ^ c), xsrc + kt * (kBK * 2) + 16 * c, x_ok);
    }
  };

  // The compute side's shared offsets within a k tile: this lane's 16 bytes of row g (+ 16 i
  // + 8 e) of the warp's rows, their group words, and its x chunk for piece v of token g (+ 8 j):
  // chunk 4q + v lands at 4q + (v ^ bs), bs = (q >> 1) ^ (g & 1) << 1.
  const int a_off = (32 * wn + g) * 64 + 16 * q,
            g_off = T::kWBytes + T::kXBytes + 4 * (32 * wn + g);
  const int b_off = T::kWBytes + (kWarpTokens * wm + g) * 256 + 64 * q,
            bs = (q >> 1) ^ ((g & 1) << 1);

  float acc[2][kJ][4] = {};
  // One k tile at `tile` (shared memory): per 16-row tile i this lane's two 16-byte loads (rows g
  // and g + 8, four pieces each) and their group words; per piece the x fragments of the kJ
  // token tiles, then 2 × kJ × 2 mma into the tile's partial sums, scaled into acc once per tile.
  const auto compute = [&](const unsigned char* tile) {
    uint4 wr4[2][2];
    uint32_t zw[2][2];
    float sc[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        wr4[i][e] = *reinterpret_cast<const uint4*>(tile + a_off + (16 * i + 8 * e) * 64);
        const uint32_t gw = *reinterpret_cast<const uint32_t*>(tile + g_off + 4 * (16 * i + 8 * e));
        zw[i][e] = int4_zero_word(gw);
        sc[i][e] = int4_scale(gw);
      }
    float part[2][kJ][4] = {};
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      uint4 b[kJ];
      const unsigned char* bp = tile + b_off + 16 * (v ^ bs);
#pragma unroll
      for (int j = 0; j < kJ; ++j) b[j] = *reinterpret_cast<const uint4*>(bp + j * 8 * 256);
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const uint4 a0 = dequant_bf16<GemvWeightFormat::kInt4>(wr4[i][0], v, zw[i][0]);
        const uint4 a1 = dequant_bf16<GemvWeightFormat::kInt4>(wr4[i][1], v, zw[i][1]);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint32_t af[4] = {h ? a0.z : a0.x, h ? a1.z : a1.x, h ? a0.w : a0.y,
                                  h ? a1.w : a1.y};
#pragma unroll
          for (int j = 0; j < kJ; ++j)
            mma_16816(part[i][j], af, h ? b[j].z : b[j].x, h ? b[j].w : b[j].y);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < kJ; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[i][j][c] = fmaf(sc[i][c >> 1], part[i][j][c], acc[i][j][c]);
  };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s)
    if (s < stages_total) load_w(s, s);
  pdl_wait();
  // Stage s's commit group closes with its x (the first also holds every early weight request).
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < stages_total) load_x(s, s);
    cp_async_commit();
  }
  int slot = 0, next_slot = kStages - 1;
  for (int st = 0; st < stages_total; ++st) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // stage st landed for every thread; the slot of stage st − 1 is free
    if (st + kStages - 1 < stages_total) {
      load_w(next_slot, st + kStages - 1);
      load_x(next_slot, st + kStages - 1);
    }
    cp_async_commit();
    if (st * kKS + ks < ktiles) compute(smem + slot * T::kStageBytes + ks * T::kTileBytes);
    slot = slot == kStages - 1 ? 0 : slot + 1;
    next_slot = next_slot == kStages - 1 ? 0 : next_slot + 1;
  }
  cp_async_wait<0>();

  // The k slices' sums: slices 1.. park theirs in the (drained) ring, slice 0 adds them in order.
  constexpr int kAcc = 2 * kJ * 4;  // accumulators a lane
  if constexpr (kKS > 1) {
    static_assert((kKS - 1) * kWN * kWM * 32 * kAcc * 4 <= kStages * T::kStageBytes,
                  "ring too small");
    float* red = reinterpret_cast<float*>(smem);
    __syncthreads();
    if (ks > 0) {
      float* r = red + ((ks - 1) * kWN * kWM + wi) * 32 * kAcc + lane;
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < kJ; ++j)
#pragma unroll
          for (int c = 0; c < 4; ++c) r[((i * kJ + j) * 4 + c) * 32] = acc[i][j][c];
    }
    __syncthreads();
    if (ks > 0) return;
#pragma unroll
    for (int s = 1; s < kKS; ++s) {
      const float* r = red + ((s - 1) * kWN * kWM + wi) * 32 * kAcc + lane;
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < kJ; ++j)
#pragma unroll
          for (int c = 0; c < 4; ++c) acc[i][j][c] += r[((i * kJ + j) * 4 + c) * 32];
    }
  }

  // C fragment (i, j): rows g (c 0, 1) and g + 8 (c 2, 3) of tile i, tokens 2q + (c & 1) of tile j.
  if (pairs) {  // silu(bf16(gate)) · bf16(up), as silu_mul computes it
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int p = p0 + 16 * wn + g + 8 * (c >> 1);
      if (p >= half) continue;
      const float bg = bias ? __bfloat162float(bias[p]) : 0.0f;
      const float bu = bias ? __bfloat162float(bias[half + p]) : 0.0f;
#pragma unroll
      for (int j = 0; j < kJ; ++j) {
        const int m = m0 + kWarpTokens * wm + 8 * j + 2 * q + (c & 1);
        if (m >= M) continue;
        const float gv = __bfloat162float(__float2bfloat16(acc[0][j][c] + bg));
        const float uv = __bfloat162float(__float2bfloat16(acc[1][j][c] + bu));
        out[int64_t{m} * half + p] = __float2bfloat16(silu_times(gv, uv));
      }
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int n = n0 + 32 * wn + 16 * i + g + 8 * (c >> 1);
      if (n >= N) continue;
      const float bn = bias ? __bfloat162float(bias[n]) : 0.0f;
#pragma unroll
      for (int j = 0; j < kJ; ++j) {
        const int m = m0 + kWarpTokens * wm + 8 * j + 2 * q + (c & 1);
        if (m >= M) continue;
        bf16* o = out + int64_t{m} * N + n;
        float v = acc[i][j][c] + bn;
        if (accumulate) v += __bfloat162float(*o);
        *o = __float2bfloat16(v);
      }
    }
}

template <int kWN, int kWM, int kKS, int kStages, int kJ>
cudaError_t launch(const bf16* x, const GemvWeights& w, const bf16* bias, bf16* out, int M, int N,
                   int K, bool accumulate, bool pairs, cudaStream_t s) {
  using T = Int4Tile<kWN, kWM, kKS, kJ>;
  const auto kern = gemm_int4_kernel<kWN, kWM, kKS, kStages, kJ>;
  const int smem = kStages * T::kStageBytes;
  if (const cudaError_t e =
          cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      e != cudaSuccess)
    return e;
  const dim3 grid(pairs ? ceil_div(N / 2, T::kRows / 2) : ceil_div(N, T::kRows),
                  ceil_div(M, T::kTokens));
  return launch_pdl(kern, grid, dim3(T::kThreads), smem, s, x, w, bias, out, M, N, K, accumulate,
                    pairs);
}

}  // namespace
}  // namespace detail

namespace {

using bf16 = __nv_bfloat16;

Status check(const bf16* x, const GemvWeights& w, int M, int N, int K, bool accumulate,
             bool silu_pairs) {
  if (M < 1) return Status::error("gemm_int4: M {} < 1", M);
  if (silu_pairs && (N % 2 != 0 || accumulate))
    return Status::error("gemm_int4: SiLU pairs need an even N ({}) and no accumulation", N);
  if (const std::string why = gemm_int4_unsupported(w, N, K); !why.empty())
    return Status::error("gemm_int4: {}", why);
  if (!detail::aligned16(x)) return Status::error("gemm_int4: x is not 16-byte aligned");
  return Status();
}

}  // namespace

std::string gemm_int4_config_name(const GemmInt4Config& c) {
  return fmt::format("n{}m{}k{}s{}", c.rows, c.tokens, c.slices, c.stages);
}

// Built: every tile with one k slice and 4 stages; more slices where the tile alone gives few
// warps (the small-M shapes), at 3 stages where 4 would not leave room for two CTAs an SM; for
// decode batches of ≤ 16, warps of 8 or 16 tokens: the defaults, their runners-up and the best
// on the long-K shapes (n32m8k8s6: down at M = 1). r82–r86 swept 10 more small tiles (1–8
// slices, 3–8 stages), slower on every shape; they are not built.
std::vector<GemmInt4Config> gemm_int4_configs() {
  return {{128, 64, 1, 4}, {128, 32, 1, 4}, {64, 64, 1, 4}, {64, 32, 1, 4}, {128, 32, 2, 3},
          {64, 64, 2, 3},  {64, 32, 2, 4},  {64, 32, 4, 3}, {128, 8, 2, 4}, {64, 8, 4, 3},
          {32, 8, 8, 6},   {64, 16, 2, 4},  {64, 16, 4, 3}};
}

// From r78's sweep (H200, the 8B's four projections at M = 32, 64, 128, 256, 2048, every built
// configuration): 32-token tiles won at every M (n128m32k1s4 holds 3 CTAs an SM, the 64-token
// tiles one), and the k slices won where the tiles alone leave the SMs short of warps. With C the
// CTA count of n128m32k1s4 on the GPU's `sms`: C < 0.7 · sms (o and down at M ≤ 64, QKV at 32)
// 64 × 32 tiles in 4 k slices; C < 3 · sms two k slices of 128 × 32; else n128m32k1s4 (gate/up
// from M = 64). Against the sweep's best at M ≤ 128 (the engine's range): the best on eleven of
// the twelve shapes, QKV at 128 rows 11 % behind it.
// Decode batches ≤ 16 (r85–r86, H200, the 8B's gate/up with SiLU at M = 1, 4, 8, 16, where the
// engine runs these tiles, every built tile of ≤ 16 tokens): 128 × 8 tiles in 2 k slices to 8
// rows (27.2–27.4 µs, the GEMV 33.6 with its norm prologue at M = 1, 30.4 at 4), 64 × 16 in 2
// slices above (33.5 µs at M = 16, the GEMV 40.8). More CTAs an SM were slower (128 × 8 at 3
// stages, three CTAs an SM: 37.1 µs at M = 1).
GemmInt4Config gemm_int4_default_config(int M, int N, int sms) {
  if (M <= 16) return M <= 8 ? GemmInt4Config{128, 8, 2, 4} : GemmInt4Config{64, 16, 2, 4};
  const int64_t ctas = int64_t{(N + 127) / 128} * ((M + 31) / 32);
  if (ctas * 10 < 7 * int64_t{sms}) return {64, 32, 4, 3};
  if (ctas < 3 * int64_t{sms}) return {128, 32, 2, 3};
  return {128, 32, 1, 4};
}

std::string gemm_int4_unsupported(const GemvWeights& w, int N, int K) {
  if (w.format != GemvWeightFormat::kInt4) return "weights are not int4";
  if (N < 1 || K < 1) return fmt::format("empty weight [{}, {}]", N, K);
  if (K % detail::kBK != 0) return fmt::format("K {} is not a multiple of {}", K, detail::kBK);
  const int G = w.group_size;
  if (G < detail::kBK || (G & (G - 1)) != 0 || K % G != 0)
    return fmt::format("int4 group size {} must be a power of two ≥ {} dividing K {}", G,
                       detail::kBK, K);
  if (!w.data || !w.groups) return "int4 weights need their data and group words";
  if (!detail::aligned16(w.data)) return "int4 weight data is not 16-byte aligned";
  return "";
}

Status gemm_int4_with_config(const GemmInt4Config& cfg, const bf16* x, const GemvWeights& w,
                             const bf16* bias, bf16* out, int M, int N, int K, bool accumulate,
                             cudaStream_t stream, bool silu_pairs) {
  CEILING_RETURN_IF_ERROR(check(x, w, M, N, K, accumulate, silu_pairs));
  cudaError_t e = cudaErrorInvalidValue;
  bool built = false;
  const auto pick = [&]<int kWN, int kWM, int kKS, int kStages, int kJ = 4>() {
    if (cfg.rows != 32 * kWN || cfg.tokens != 8 * kJ * kWM || cfg.slices != kKS ||
        cfg.stages != kStages)
      return;
    built = true;
    e = detail::launch<kWN, kWM, kKS, kStages, kJ>(x, w, bias, out, M, N, K, accumulate, silu_pairs,
                                                   stream);
  };
  pick.template operator()<4, 2, 1, 4>();
  pick.template operator()<4, 1, 1, 4>();
  pick.template operator()<2, 2, 1, 4>();
  pick.template operator()<2, 1, 1, 4>();
  pick.template operator()<4, 1, 2, 3>();
  pick.template operator()<2, 2, 2, 3>();
  pick.template operator()<2, 1, 2, 4>();
  pick.template operator()<2, 1, 4, 3>();
  pick.template operator()<4, 1, 2, 4, 1>();
  pick.template operator()<2, 1, 4, 3, 1>();
  pick.template operator()<1, 1, 8, 6, 1>();
  pick.template operator()<2, 1, 2, 4, 2>();
  pick.template operator()<2, 1, 4, 3, 2>();
  if (!built)
    return Status::error("gemm_int4: configuration {} is not built", gemm_int4_config_name(cfg));
  CEILING_CUDA_RETURN(e);
  return Status();
}

Status gemm_int4(const bf16* x, const GemvWeights& w, const bf16* bias, bf16* out, int M, int N,
                 int K, bool accumulate, cudaStream_t stream, bool silu_pairs) {
  int dev = 0, sms = 0;
  CEILING_CUDA_RETURN(cudaGetDevice(&dev));
  CEILING_CUDA_RETURN(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return gemm_int4_with_config(gemm_int4_default_config(M, N, sms), x, w, bias, out, M, N, K,
                               accumulate, stream, silu_pairs);
}

}  // namespace ceiling::cuda
