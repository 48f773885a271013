// The int4-weight GEMM (gemm_int4.h): mma.sync m16n8k16 on bf16 (q − zero) pieces dequantized in
// registers from a cp.async ring of the packed weights.
//
// Napkin math (H200, Llama-3.1-8B, one prefill chunk of M = 128): 7.0 G weights are 3.5 GB of
// nibbles + 0.22 GB of group words, 0.8 ms at 4.6 TB/s; 1.8 TFLOP at mma.sync's ~600 TFLOP/s is
// 3.0 ms, so from M ≈ 32 on the tensor cores decide. The path it replaces wrote and read a 14 GB
// bf16 image per step (~6 ms) before cuBLASLt's ~3 ms. Per k tile of 128 and warp (32 rows × 32
// tokens): 64 mma against 2 × 2 × 4 × 4 int4 words → bf16 pairs (a shift, a LOP3, a bf16
// subtraction each: 192 lane ops) and 20 shared loads; the dequantization is shared by the 32
// tokens, the x fragments by the 32 rows.
//
// Layout of one stage in shared memory (k tile kt, 128 k):
//   W:      [rows][64 bytes], row r = the tile's row n0 + r, its 128 k as gemv_quant.h packs them
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

#include <algorithm>

#include "core/check.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemm_int4.h"
#include "kernels/cuda/gemv_weights.cuh"
#include "kernels/cuda/pdl.cuh"

namespace ceiling::cuda {
namespace detail {
namespace {

constexpr int kBK = 128;  // k per stage: one int4 group (G ≥ 128)

template <int kWN, int kWM>
struct Int4Tile {
  static constexpr int kRows = 32 * kWN, kTokens = 32 * kWM, kThreads = 32 * kWN * kWM;
  static constexpr int kWBytes = kRows * kBK / 2, kXBytes = kTokens * kBK * 2, kGBytes = 4 * kRows;
  static constexpr int kStageBytes = kWBytes + kXBytes + kGBytes;
};

__device__ __forceinline__ int x_chunk(int t, int c) {
  return c ^ ((c >> 3) & 1) ^ ((t & 1) << 1);
}

// Grid (ceil(N / rows), ceil(M / tokens)): the row tile varies fastest, so the CTAs of a wave
// share their x tile and the (small) int4 weights stay in L2 across the token tiles.
// Warp (wn, wm) computes rows 32·wn + [0, 32) × tokens 32·wm + [0, 32) of the CTA's tile: two
// 16-row tiles i × four 8-token tiles j.
template <int kWN, int kWM, int kStages>
__global__ void __launch_bounds__(32 * kWN * kWM)
    gemm_int4_kernel(const bf16* __restrict__ x, GemvWeights w, const bf16* __restrict__ bias,
                     bf16* __restrict__ out, int M, int N, int K, bool accumulate) {
  using T = Int4Tile<kWN, kWM>;
  extern __shared__ __align__(128) unsigned char smem[];
  pdl_launch_dependents();
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, q = lane & 3;
  const int wn = warp % kWN, wm = warp / kWN;
  const int n0 = blockIdx.x * T::kRows, m0 = blockIdx.y * T::kTokens;
  const int ktiles = K / kBK, groups_per_row = K / w.group_size;
  const int gshift = __ffs(w.group_size / kBK) - 1;  // k tile kt lies in group kt >> gshift
  const char* wdata = static_cast<const char*>(w.data);
  const uint32_t sbase = smem_addr(smem);

  // Weights and their group words: no kernel of the step writes them, so the first stages are
  // requested before the wait; x after it.
  const auto load_w = [&](int slot, int kt) {
    const uint32_t sw = sbase + slot * T::kStageBytes;
    for (int i = tid; i < T::kRows * 4; i += T::kThreads) {
      const int r = i >> 2, c = i & 3, n = min(n0 + r, N - 1);
      cp_async16(sw + r * 64 + c * 16, wdata + int64_t{n} * (K / 2) + kt * (kBK / 2) + c * 16,
                 n0 + r < N);
    }
    const uint32_t sg = sw + T::kWBytes + T::kXBytes;
    for (int r = tid; r < T::kRows; r += T::kThreads) {
      const int n = min(n0 + r, N - 1);
      cp_async4(sg + r * 4, w.groups + int64_t{n} * groups_per_row + (kt >> gshift), n0 + r < N);
    }
  };
  const auto load_x = [&](int slot, int kt) {
    const uint32_t sx = sbase + slot * T::kStageBytes + T::kWBytes;
    for (int i = tid; i < T::kTokens * 16; i += T::kThreads) {
      const int t = i >> 4, c = i & 15, m = min(m0 + t, M - 1);
      cp_async16(sx + t * 256 + x_chunk(t, c) * 16, x + int64_t{m} * K + kt * kBK + c * 8,
                 m0 + t < M);
    }
  };

  float acc[2][4][4] = {};
  // One k tile from slot `slot`: per 16-row tile i, this lane's 16 bytes of rows g and g + 8 (four
  // pieces each) and their group words; per piece the x fragments of the four token tiles, then
  // 2 × 4 × 2 mma into the tile's partial sums, scaled into acc once per tile.
  const auto compute = [&](int slot) {
    const unsigned char* sw = smem + slot * T::kStageBytes;
    const unsigned char* sx = sw + T::kWBytes;
    const uint32_t* sg = reinterpret_cast<const uint32_t*>(sx + T::kXBytes);
    uint4 wr[2][2];
    uint32_t zw[2][2];
    float sc[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int r = 32 * wn + 16 * i + g + 8 * e;
        wr[i][e] = *reinterpret_cast<const uint4*>(sw + r * 64 + q * 16);
        const uint32_t gw = sg[r];
        zw[i][e] = int4_zero_word(gw);
        sc[i][e] = int4_scale(gw);
      }
    float part[2][4][4] = {};
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      uint4 b[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int t = 32 * wm + 8 * j + g;
        b[j] = *reinterpret_cast<const uint4*>(sx + t * 256 + x_chunk(t, 4 * q + v) * 16);
      }
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const uint4 a0 = dequant_bf16<GemvWeightFormat::kInt4>(wr[i][0], v, zw[i][0]);
        const uint4 a1 = dequant_bf16<GemvWeightFormat::kInt4>(wr[i][1], v, zw[i][1]);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint32_t af[4] = {h ? a0.z : a0.x, h ? a1.z : a1.x, h ? a0.w : a0.y,
                                  h ? a1.w : a1.y};
#pragma unroll
          for (int j = 0; j < 4; ++j)
            mma_16816(part[i][j], af, h ? b[j].z : b[j].x, h ? b[j].w : b[j].y);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[i][j][c] = fmaf(sc[i][c >> 1], part[i][j][c], acc[i][j][c]);
  };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s)
    if (s < ktiles) load_w(s, s);
  pdl_wait();
  // Stage s's commit group closes with its x (the first also holds every early weight request).
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ktiles) load_x(s, s);
    cp_async_commit();
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // tile kt landed for every thread; slot (kt − 1) % kStages is free
    const int next = kt + kStages - 1;
    if (next < ktiles) {
      load_w(next % kStages, next);
      load_x(next % kStages, next);
    }
    cp_async_commit();
    compute(kt % kStages);
  }
  cp_async_wait<0>();

  // C fragment (i, j): rows g (c 0, 1) and g + 8 (c 2, 3) of tile i, tokens 2q + (c & 1) of tile j.
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int n = n0 + 32 * wn + 16 * i + g + 8 * (c >> 1);
      if (n >= N) continue;
      const float bn = bias ? __bfloat162float(bias[n]) : 0.0f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int m = m0 + 32 * wm + 8 * j + 2 * q + (c & 1);
        if (m >= M) continue;
        bf16* o = out + int64_t{m} * N + n;
        float v = acc[i][j][c] + bn;
        if (accumulate) v += __bfloat162float(*o);
        *o = __float2bfloat16(v);
      }
    }
}

template <int kWN, int kWM, int kStages>
cudaError_t launch(const bf16* x, const GemvWeights& w, const bf16* bias, bf16* out, int M, int N,
                   int K, bool accumulate, cudaStream_t s) {
  using T = Int4Tile<kWN, kWM>;
  const auto kern = gemm_int4_kernel<kWN, kWM, kStages>;
  const int smem = kStages * T::kStageBytes;
  if (const cudaError_t e =
          cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      e != cudaSuccess)
    return e;
  const dim3 grid(ceil_div(N, T::kRows), ceil_div(M, T::kTokens));
  return launch_pdl(kern, grid, dim3(T::kThreads), smem, s, x, w, bias, out, M, N, K, accumulate);
}

}  // namespace
}  // namespace detail

namespace {

using bf16 = __nv_bfloat16;

Status check(const bf16* x, const GemvWeights& w, int M, int N, int K) {
  if (M < 1) return Status::error("gemm_int4: M {} < 1", M);
  if (const std::string why = gemm_int4_unsupported(w, N, K); !why.empty())
    return Status::error("gemm_int4: {}", why);
  if (!detail::aligned16(x)) return Status::error("gemm_int4: x is not 16-byte aligned");
  return Status();
}

}  // namespace

std::string gemm_int4_config_name(const GemmInt4Config& c) {
  return fmt::format("n{}m{}s{}", c.rows, c.tokens, c.stages);
}

std::vector<GemmInt4Config> gemm_int4_configs() {
  std::vector<GemmInt4Config> v;
  for (int rows : {64, 128})
    for (int tokens : {32, 64})
      for (int stages : {3, 4}) v.push_back({rows, tokens, stages});
  return v;
}

GemmInt4Config gemm_int4_default_config(int M, int N, int sms) {
  GemmInt4Config c;
  c.tokens = M <= 32 ? 32 : 64;
  const int64_t tiles128 = int64_t{(N + 127) / 128} * ((M + c.tokens - 1) / c.tokens);
  c.rows = tiles128 >= sms ? 128 : 64;
  c.stages = 4;
  return c;
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
                             cudaStream_t stream) {
  CEILING_RETURN_IF_ERROR(check(x, w, M, N, K));
  cudaError_t e = cudaErrorInvalidValue;
  bool built = false;
  const auto pick = [&]<int kWN, int kWM, int kStages>() {
    if (cfg.rows != 32 * kWN || cfg.tokens != 32 * kWM || cfg.stages != kStages) return;
    built = true;
    e = detail::launch<kWN, kWM, kStages>(x, w, bias, out, M, N, K, accumulate, stream);
  };
  pick.template operator()<2, 1, 3>();
  pick.template operator()<2, 1, 4>();
  pick.template operator()<2, 2, 3>();
  pick.template operator()<2, 2, 4>();
  pick.template operator()<4, 1, 3>();
  pick.template operator()<4, 1, 4>();
  pick.template operator()<4, 2, 3>();
  pick.template operator()<4, 2, 4>();
  if (!built)
    return Status::error("gemm_int4: configuration {} is not built", gemm_int4_config_name(cfg));
  CEILING_CUDA_RETURN(e);
  return Status();
}

Status gemm_int4(const bf16* x, const GemvWeights& w, const bf16* bias, bf16* out, int M, int N,
                 int K, bool accumulate, cudaStream_t stream) {
  int dev = 0, sms = 0;
  CEILING_CUDA_RETURN(cudaGetDevice(&dev));
  CEILING_CUDA_RETURN(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return gemm_int4_with_config(gemm_int4_default_config(M, N, sms), x, w, bias, out, M, N, K,
                               accumulate, stream);
}

}  // namespace ceiling::cuda
