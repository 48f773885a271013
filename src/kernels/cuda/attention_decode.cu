// Paged decode attention: one new token per sequence, GQA, split along the context
// (flash-decoding) with a log-sum-exp merge.
//
// Work split: one CTA per (split, KV head × query chunk, sequence). The plan fixes the most splits
// a sequence may take (enough to fill the SMs in one wave, none when the batch already does); each
// CTA derives its sequence's own split count from the sequence's length — at least
// min_split_tokens (one 16-token tile per warp) per split — so a captured graph serves short and
// long contexts alike (a plan sized for max_seq_len no longer fixes the split length). The query
// heads sharing a KV head (up to 16 per chunk) form the 16 rows of one mma.sync A operand, so
// every K/V byte is loaded once per group and the dot products run on tensor cores. Each of the
// 4 warps walks its own 16-token tiles (tile i of the split goes to warp i % 4) through a private
// cp.async pipeline of 3 stages, 4 when the grid is at most one CTA per SM (16-byte copies; a
// 16-token tile lies inside one cache block because block_size is a multiple of 16 and splits
// start at multiples of 16); the block-table entries of a warp's tiles are loaded 32 at a time
// ahead of the copies. The warps' (max, sum, acc) are merged in shared memory; a sequence with
// one split writes bf16 out directly, otherwise the split writes its normalized partial output
// and log2-sum-exp to the workspace, and the last split of the (sequence, KV head) to finish —
// counted with an atomic per group, reset by that last CTA —
// merges them (one launch, no separate combine kernel).
//
// fp8 KV cache (kv_format.h): a warp's cp.async stages hold the E4M3 bytes of its tiles; once a
// tile has landed the warp converts it into one f16 K/V tile of its own (exact, one cvt a pair:
// fp8.cuh), laid out as the bf16 path's stages, and the same ldmatrix / mma code runs on it with
// f16 operands (q converted once, P packed as f16: attention_common.cuh). The scales are folded
// into the softmax scale (k) and the final normalization (v).
//
// Launched with PDL (pdl.cuh); the next kernel may launch once every CTA has started. In the
// 4-stage kernels a warp issues its first 3 tiles' copies before waiting on the previous kernel
// (which wrote q and the new token's K/V) when those tiles hold only tokens cached by earlier
// steps, so at small batches the K/V stream starts under the previous kernel's tail; everything
// else waits.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/fp8.cuh"
#include "kernels/cuda/pdl.cuh"

namespace ceiling::cuda {
namespace {

using namespace attn;

constexpr int kWarps = 4;
constexpr int kTile = 16;  // tokens per warp tile
// CTA slots the split heuristic fills: one per SM. Two fit (96 KB of shared memory each), but
// measured on an H200 (B=1, ctx 32768, 8 KV heads) 16 splits (one CTA per SM, 37.6 µs) beat 33
// (two per SM, 39.3 µs) and 66 (42.4 µs): a CTA's 8 tiles in flight already cover the latency,
// and fewer splits mean a shorter merge. An fp8 cache: two. Its CTA converts every tile before
// the mma (more instructions per byte): with one CTA an SM (8 stages) an H100 read 51 % of its
// bandwidth at B=1 ctx 32768 (r44, 42.3 µs), latency-bound on the 4 warps' dependent chains.
constexpr int split_slots_per_sm(KvFormat f) {
  return f == KvFormat::kFP8 ? 2 : 1;
}
// Default shortest split. Measured on an H100 (batch 1, 8 KV heads, ctx 256, bench r9): one split
// per head (8 CTAs, 4 tiles per warp) 5.07 µs against 6.23 µs for 4 splits of 64 (one tile per
// warp): the partial stores, the arrival atomic and the merge's L2 round trips cost more than the
// three tile loads per warp they save.
constexpr int kMinSplitTokens = 256;

struct DecodeParams {
  const __nv_bfloat16* q;  // [S, Hq, D], rows q_stride elements apart
  const void* k;           // [num_blocks, Hkv, BS, D] bf16, or E4M3 bytes (fp8 cache)
  const void* v;
  __nv_bfloat16* out;           // [S, Hq, D]
  const int32_t* seq_lens;      // [S]
  const int32_t* block_tables;  // [S, max_blocks]
  float* part_o;                // [S, Hq, max_splits, D]
  float* part_lse;              // [S, Hq, max_splits]
  int* counters;                // [S, Hkv × q_chunks] splits finished; zero between runs
  int64_t q_stride;
  int max_blocks, num_blocks, hq, hkv, group, q_chunks, min_split, max_splits;
  float scale_log2;  // softmax scale · log2(e) (· k_scale for an fp8 cache)
  float out_scale;   // 1 (v_scale for an fp8 cache)
};

// Bytes of one K or V tile in a stage (bf16 or E4M3).
template <int D, bool kFp8>
constexpr int stage_tile_bytes() {
  return kTile * D * (kFp8 ? 1 : 2);
}
template <int D, int kStages, bool kFp8>
constexpr int decode_smem_bytes() {
  // Per warp: the stages, plus (fp8) the converted f16 K and V tiles.
  constexpr int pipe =
      kWarps * (kStages * 2 * stage_tile_bytes<D, kFp8>() + (kFp8 ? 2 * kTile * D * 2 : 0));
  constexpr int merge = kWarps * 16 * D * 4 + kWarps * 16 * 2 * 4;
  return pipe > merge ? pipe : merge;
}

// A sequence of `len` tokens: as many splits (≤ max_splits) as keep each ≥ min_split tokens,
// each a whole number of tiles; the last split takes the remainder.
struct Split {
  int count, partition;
};
__device__ __forceinline__ Split split_for(int len, int min_split, int max_splits) {
  const int want = max(1, min(max_splits, len / min_split));
  const int partition = ceil_div(ceil_div(len, want), kTile) * kTile;
  return {ceil_div(len, partition), partition};  // count ≤ want: partition ≥ len / want
}

template <int D, int BS, int kStages, bool kFp8>
__global__ void __launch_bounds__(kWarps * 32) decode_kernel(const DecodeParams p) {
  static_assert(BS % kTile == 0, "a warp tile must lie inside one cache block");
  constexpr int kEb = kFp8 ? 1 : 2;          // bytes per cached value
  constexpr int kChunks = D * kEb / 16;      // 16-byte chunks per cached row
  constexpr int kTileBytes = kTile * D * 2;  // a 16-bit tile (what ldmatrix reads)
  constexpr int kStageTile = stage_tile_bytes<D, kFp8>();
  extern __shared__ __align__(128) uint8_t smem[];

  detail::pdl_launch_dependents();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int split = blockIdx.x, s = blockIdx.z;
  const int kvh = blockIdx.y / p.q_chunks, qc = blockIdx.y % p.q_chunks;
  const int head0 = kvh * p.group + qc * 16;
  const int rows = min(16, p.group - qc * 16);  // real query rows of the 16
  // Read before the PDL wait (the launcher's contract): the step's metadata (lengths, block
  // tables), copied before the step's first kernel, and cached tokens [0, len − 1), written by
  // earlier steps. q, the newest token's K/V, the output and the workspace only after it.
  const int len = p.seq_lens[s];

  if (len <= 0) {  // empty context: defined output (zeros)
    detail::pdl_wait();
    if (split == 0)
      for (int i = threadIdx.x; i < rows * D; i += blockDim.x)
        p.out[(static_cast<int64_t>(s) * p.hq + head0) * D + i] = __float2bfloat16(0.0f);
    return;
  }
  const Split sp = split_for(len, p.min_split, p.max_splits);
  const int n_splits = sp.count;
  if (split >= n_splits) {
    detail::pdl_wait();
    return;
  }
  const int t0 = split * sp.partition;
  const int t1 = min(len, t0 + sp.partition);
  const int n_tiles = ceil_div(t1 - t0, kTile);
  const int my_tiles = warp < n_tiles ? (n_tiles - warp + kWarps - 1) / kWarps : 0;
  const int g = lane / 4, t = lane % 4;

  // This warp's K/V stages, then (fp8) its converted f16 K and V tiles.
  uint8_t* wsm = smem + warp * (kStages * 2 * kStageTile + (kFp8 ? 2 * kTileBytes : 0));
  const uint32_t cvt_k = smem_addr(wsm + kStages * 2 * kStageTile), cvt_v = cvt_k + kTileBytes;
  const char* kbase = static_cast<const char*>(p.k);
  const char* vbase = static_cast<const char*>(p.v);
  const int32_t* table = p.block_tables + static_cast<int64_t>(s) * p.max_blocks;

  // Block-table entries of the warp's tiles, 32 at a time: lane j holds tile (32c + j)'s, loaded
  // when tile 32c is (one coalesced load, not a dependent load before every tile's copies).
  int pages = -1;
  auto load_tile = [&](int i, int stage) {
    const int ts = t0 + (warp + i * kWarps) * kTile;
    if (i % 32 == 0) {
      const int tl = t0 + (warp + (i + lane) * kWarps) * kTile;
      pages = tl < t1 ? __ldg(table + tl / BS) : -1;
    }
    const int page = __shfl_sync(0xffffffffu, pages, i % 32);
    const bool page_ok = page >= 0 && page < p.num_blocks;
    const int64_t base =  // bytes
        ((static_cast<int64_t>(page_ok ? page : 0) * p.hkv + kvh) * BS + ts % BS) * D * kEb;
    const uint32_t ks = smem_addr(wsm + stage * 2 * kStageTile), vs = ks + kStageTile;
#pragma unroll
    for (int j = 0; j < kTile * kChunks / 32; ++j) {
      const int c = lane + 32 * j, row = c / kChunks, ch = c % kChunks;
      const bool ok = page_ok && ts + row < t1;
      const int64_t off = base + (row * kChunks + ch) * 16;
      // bf16: swizzled for ldmatrix; fp8: row-major (the conversion reads it by chunks).
      const uint32_t dst = kFp8 ? static_cast<uint32_t>(c * 16) : swz<D>(row, ch);
      cp_async16(ks + dst, kbase + off, ok);
      cp_async16(vs + dst, vbase + off, ok);
    }
  };
  // fp8: the landed stage's E4M3 tiles into the warp's f16 tiles (swizzled as a bf16 stage).
  auto convert_tile = [&](int stage) {
    const uint8_t* src = wsm + stage * 2 * kStageTile;
#pragma unroll
    for (int j = 0; j < kTile * kChunks / 32; ++j) {
      const int c = lane + 32 * j, row = c / kChunks, ch = c % kChunks;
#pragma unroll
      for (int kv = 0; kv < 2; ++kv) {
        const uint4 raw = *reinterpret_cast<const uint4*>(src + kv * kStageTile + c * 16);
        const uint32_t dst = kv ? cvt_v : cvt_k;
        const uint4 lo = detail::fp8x8_f16(raw.x, raw.y);
        const uint4 hi = detail::fp8x8_f16(raw.z, raw.w);
        asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst + swz<D>(row, 2 * ch)),
                     "r"(lo.x), "r"(lo.y), "r"(lo.z), "r"(lo.w));
        asm volatile(
            "st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst + swz<D>(row, 2 * ch + 1)),
            "r"(hi.x), "r"(hi.y), "r"(hi.z), "r"(hi.w));
      }
    }
  };

  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;

  // The prologue's copies: before the PDL wait when the warp's first kStages − 1 tiles hold only
  // tokens before len − 1 (then they overlap the previous kernel's tail), else after it. Only in
  // the 4-stage kernels: with a bf16 cache those are the grids of at most one CTA an SM, where
  // every CTA is resident early (H200 r122, batch 1 / 16: the attention's share of a step −0.8 to
  // −1.4 µs a layer); past one wave only the first wave could issue early, and batch 64 (3 stages,
  // 512 CTAs) measured no gain. An fp8 cache always runs 4 stages (2 CTAs an SM): early too.
  const auto prologue = [&] {
#pragma unroll
    for (int st = 0; st < kStages - 1; ++st) {
      if (st < my_tiles) load_tile(st, st);
      cp_async_commit();
    }
  };
  const int pre = min(kStages - 1, my_tiles);
  const bool early = kStages == 4 &&
                     (pre == 0 || min(t0 + (warp + (pre - 1) * kWarps + 1) * kTile, t1) <= len - 1);
  if (early) prologue();
  detail::pdl_wait();
  if (!early) prologue();

  // Q rows as A fragments (rows ≥ `rows` are zero).
  uint32_t qf[D / 16][4];
  {
    const __nv_bfloat16* qb = p.q + s * p.q_stride + head0 * D;
    const bool r0 = g < rows, r1 = g + 8 < rows;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const int c = kk * 16 + 2 * t;
      auto ld = [&](bool ok, int row, int col) -> uint32_t {
        return ok ? *reinterpret_cast<const uint32_t*>(qb + row * D + col) : 0u;
      };
      qf[kk][0] = ld(r0, g, c);
      qf[kk][1] = ld(r1, g + 8, c);
      qf[kk][2] = ld(r0, g, c + 8);
      qf[kk][3] = ld(r1, g + 8, c + 8);
      if constexpr (kFp8)
        for (uint32_t& x : qf[kk]) x = bf16x2_to_f16x2(x);
    }
  }

  for (int i = 0; i < my_tiles; ++i) {
    if (i + kStages - 1 < my_tiles) load_tile(i + kStages - 1, (i + kStages - 1) % kStages);
    cp_async_commit();
    cp_async_wait<kStages - 1>();
    __syncwarp();
    uint32_t ks = smem_addr(wsm + (i % kStages) * 2 * kStageTile), vs = ks + kTileBytes;
    if constexpr (kFp8) {
      convert_tile(i % kStages);
      __syncwarp();
      ks = cvt_k;
      vs = cvt_v;
    }
    const int ts = t0 + (warp + i * kWarps) * kTile;

    // S[16 q rows][16 tokens] = Q · K^T
    float sc[2][4] = {};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t b[4];
      ldmatrix_x4(ks + swz<D>((lane % 8) + (lane / 16) * 8, kk * 2 + (lane / 8) % 2), b);
      mma_t<kFp8>(sc[0], qf[kk], b[0], b[1]);
      mma_t<kFp8>(sc[1], qf[kk], b[2], b[3]);
    }
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int tok = ts + nt * 8 + 2 * t + (e & 1);
        const float x = tok < t1 ? sc[nt][e] * p.scale_log2 : -INFINITY;
        sc[nt][e] = x;
        if (e < 2)
          mx0 = fmaxf(mx0, x);
        else
          mx1 = fmaxf(mx1, x);
      }
    // Column 0 of every tile is a real token, so the row maxima are finite.
    const float mn0 = fmaxf(m0, quad_max(mx0)), mn1 = fmaxf(m1, quad_max(mx1));
    const float a0 = exp2_fast(m0 - mn0), a1 = exp2_fast(m1 - mn1);
    m0 = mn0;
    m1 = mn1;
    float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      sc[nt][0] = exp2_fast(sc[nt][0] - m0);
      sc[nt][1] = exp2_fast(sc[nt][1] - m0);
      sc[nt][2] = exp2_fast(sc[nt][2] - m1);
      sc[nt][3] = exp2_fast(sc[nt][3] - m1);
      ps0 += sc[nt][0] + sc[nt][1];
      ps1 += sc[nt][2] + sc[nt][3];
    }
    l0 = l0 * a0 + ps0;
    l1 = l1 * a1 + ps1;
    const uint32_t pa[4] = {pack_t<kFp8>(sc[0][0], sc[0][1]), pack_t<kFp8>(sc[0][2], sc[0][3]),
                            pack_t<kFp8>(sc[1][0], sc[1][1]), pack_t<kFp8>(sc[1][2], sc[1][3])};
    // O = O·alpha + P · V
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      o[2 * dp][0] *= a0, o[2 * dp][1] *= a0, o[2 * dp][2] *= a1, o[2 * dp][3] *= a1;
      o[2 * dp + 1][0] *= a0, o[2 * dp + 1][1] *= a0, o[2 * dp + 1][2] *= a1,
          o[2 * dp + 1][3] *= a1;
      uint32_t b[4];
      ldmatrix_x4_trans(vs + swz<D>((lane % 8) + ((lane / 8) % 2) * 8, dp * 2 + lane / 16), b);
      mma_t<kFp8>(o[2 * dp], pa, b[0], b[1]);
      mma_t<kFp8>(o[2 * dp + 1], pa, b[2], b[3]);
    }
    __syncwarp();
  }
  cp_async_wait<0>();
  l0 = quad_sum(l0);
  l1 = quad_sum(l1);

  // Merge the 4 warps: sm_o [warp][16][D] fp32, sm_m / sm_l [warp][16].
  __syncthreads();
  float* sm_o = reinterpret_cast<float*>(smem);
  float* sm_m = sm_o + kWarps * 16 * D;
  float* sm_l = sm_m + kWarps * 16;
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) {
    const int col = dt * 8 + 2 * t;
    *reinterpret_cast<float2*>(sm_o + (warp * 16 + g) * D + col) = make_float2(o[dt][0], o[dt][1]);
    *reinterpret_cast<float2*>(sm_o + (warp * 16 + g + 8) * D + col) =
        make_float2(o[dt][2], o[dt][3]);
  }
  if (t == 0) {
    sm_m[warp * 16 + g] = m0;
    sm_m[warp * 16 + g + 8] = m1;
    sm_l[warp * 16 + g] = l0;
    sm_l[warp * 16 + g + 8] = l1;
  }
  __syncthreads();
  for (int it = threadIdx.x; it < rows * (D / 4); it += blockDim.x) {
    const int r = it / (D / 4), c = (it % (D / 4)) * 4;
    float mw[kWarps], mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, mw[w] = sm_m[w * 16 + r]);
    float sum = 0.0f;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float f = exp2_fast(mw[w] - mx);  // a warp without tiles has m = -inf: weight 0
      sum += f * sm_l[w * 16 + r];
      const float4 x = *reinterpret_cast<const float4*>(sm_o + (w * 16 + r) * D + c);
      acc.x += f * x.x, acc.y += f * x.y, acc.z += f * x.z, acc.w += f * x.w;
    }
    const float inv = p.out_scale / sum;
    const int64_t row = static_cast<int64_t>(s) * p.hq + head0 + r;
    if (n_splits == 1) {
      __nv_bfloat16* dst = p.out + row * D + c;
      *reinterpret_cast<uint2*>(dst) =
          make_uint2(pack_bf16(acc.x * inv, acc.y * inv), pack_bf16(acc.z * inv, acc.w * inv));
    } else {
      const int64_t prow = row * p.max_splits + split;
      *reinterpret_cast<float4*>(p.part_o + prow * D + c) =
          make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
      if (c == 0) p.part_lse[prow] = mx + __log2f(sum);
    }
  }
  if (n_splits == 1) return;

  // The last split of this (sequence, KV head, chunk) to arrive merges all splits.
  __shared__ int sh_last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    int* ctr = p.counters + static_cast<int64_t>(s) * gridDim.y + blockIdx.y;
    const int prev = atomicAdd(ctr, 1);
    sh_last = prev == n_splits - 1;
    if (sh_last) *ctr = 0;  // every split has arrived: ready for the next run
  }
  __syncthreads();
  if (!sh_last) return;
  __threadfence();
  // Splits in chunks of kMergeChunk with all loads of a chunk issued before use: a few L2
  // round trips instead of one per split.
  constexpr int kMergeChunk = 16;
  for (int it = threadIdx.x; it < rows * (D / 4); it += blockDim.x) {
    const int r = it / (D / 4), c = (it % (D / 4)) * 4;
    const int64_t row = static_cast<int64_t>(s) * p.hq + head0 + r;
    const float* lse = p.part_lse + row * p.max_splits;
    const float* po = p.part_o + row * p.max_splits * D + c;
    float mx = -INFINITY, sum = 0.0f;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int j0 = 0; j0 < n_splits; j0 += kMergeChunk) {
      float l[kMergeChunk];
      float4 x[kMergeChunk];
#pragma unroll
      for (int u = 0; u < kMergeChunk; ++u) {
        const bool ok = j0 + u < n_splits;
        l[u] = ok ? __ldcg(lse + j0 + u) : -INFINITY;
        x[u] = ok ? __ldcg(reinterpret_cast<const float4*>(po + (j0 + u) * D))
                  : make_float4(0.f, 0.f, 0.f, 0.f);
      }
      float cm = mx;
#pragma unroll
      for (int u = 0; u < kMergeChunk; ++u) cm = fmaxf(cm, l[u]);
      const float sc = exp2_fast(mx - cm);  // 0 on the first chunk (mx = -inf)
      sum *= sc;
      acc.x *= sc, acc.y *= sc, acc.z *= sc, acc.w *= sc;
#pragma unroll
      for (int u = 0; u < kMergeChunk; ++u) {
        const float w = exp2_fast(l[u] - cm);
        sum += w;
        acc.x += w * x[u].x, acc.y += w * x[u].y, acc.z += w * x[u].z, acc.w += w * x[u].w;
      }
      mx = cm;
    }
    const float inv = 1.0f / sum;
    *reinterpret_cast<uint2*>(p.out + row * D + c) =
        make_uint2(pack_bf16(acc.x * inv, acc.y * inv), pack_bf16(acc.z * inv, acc.w * inv));
  }
}

Status check_shape(const DecodeShape& sh) {
  if (sh.num_seqs < 1) return Status::error("decode attention: num_seqs {} < 1", sh.num_seqs);
  if (sh.num_kv_heads < 1 || sh.num_q_heads < 1 || sh.num_q_heads % sh.num_kv_heads != 0)
    return Status::error("decode attention: num_q_heads {} is not a multiple of num_kv_heads {}",
                         sh.num_q_heads, sh.num_kv_heads);
  if (sh.max_seq_len < 1)
    return Status::error("decode attention: max_seq_len {} < 1", sh.max_seq_len);
  if (sh.min_split_tokens < 0 || sh.min_split_tokens % kTile != 0)
    return Status::error("decode attention: min_split_tokens {} is not a multiple of {}",
                         sh.min_split_tokens, kTile);
  if (tiled_kernels_take(sh.head_dim, sh.block_size) ||
      (warp_kernel_head_dim(sh.head_dim) && sh.block_size >= 1))
    return Status::ok_status();
  return Status::error(
      "decode attention: head_dim {} with block_size {} not built (head_dim 64 or 128 with "
      "block_size 16, 32, 64, 128 or 256; head_dim 8, 16, 32 or 64 with any block size)",
      sh.head_dim, sh.block_size);
}

}  // namespace

Status plan_decode_attention(const DecodeShape& shape, int num_sms, DecodePlan* plan) {
  CEILING_RETURN_IF_ERROR(check_shape(shape));
  if (num_sms < 1) return Status::error("decode attention: num_sms {} < 1", num_sms);
  DecodePlan pl;
  pl.shape = shape;
  if (!tiled_kernels_take(shape.head_dim, shape.block_size)) {  // no splits, no workspace
    pl.warp = true;
    *plan = pl;
    return Status::ok_status();
  }
  pl.q_chunks = ceil_div(shape.num_q_heads / shape.num_kv_heads, 16);
  // Split the context only when (sequence, KV head) pairs leave most CTA slots idle.
  const int64_t work = static_cast<int64_t>(shape.num_seqs) * shape.num_kv_heads * pl.q_chunks;
  const int64_t slots = static_cast<int64_t>(num_sms) * split_slots_per_sm(shape.kv_format);
  pl.min_split_tokens = shape.min_split_tokens > 0 ? shape.min_split_tokens : kMinSplitTokens;
  // Whole waves: work × splits ≤ slots, so no second, partial wave of CTAs.
  int splits = 1;
  if (work * 5 < slots * 4) {
    splits = static_cast<int>(slots / work);
    splits = std::min(splits, std::max(1, shape.max_seq_len / pl.min_split_tokens));
  }
  pl.max_splits = splits;
  // Measured (H200, same machine, run 11 of bench/attention_notes.md): 4 stages beat 3 by
  // ~5 % at B=1 ctx 32768 and B=8 ctx 8192; 6 gained nothing more. An fp8 cache: 4 stages of
  // half the bytes plus the converted tiles, 96 KB at head_dim 128, so two CTAs fit an SM.
  if (shape.kv_format == KvFormat::kFP8)
    pl.stages = 4;
  else
    pl.stages = work * splits <= num_sms ? 4 : 3;
  pl.workspace_bytes =
      pl.max_splits > 1
          ? static_cast<size_t>(shape.num_seqs) * shape.num_q_heads * pl.max_splits *
                    (shape.head_dim + 1) * sizeof(float) +
                static_cast<size_t>(shape.num_seqs) * shape.num_kv_heads * pl.q_chunks * sizeof(int)
          : 0;
  *plan = pl;
  return Status::ok_status();
}

Status init_decode_workspace(const DecodePlan& plan, void* workspace, cudaStream_t stream) {
  if (plan.workspace_bytes == 0) return Status::ok_status();
  if (!workspace)
    return Status::error("decode attention: workspace of {} bytes is null", plan.workspace_bytes);
  CEILING_CUDA_RETURN(cudaMemsetAsync(workspace, 0, plan.workspace_bytes, stream));
  return Status::ok_status();
}

Status plan_decode_attention(const DecodeShape& shape, DecodePlan* plan) {
  int dev = 0, sms = 0;
  CEILING_CUDA_RETURN(cudaGetDevice(&dev));
  CEILING_CUDA_RETURN(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return plan_decode_attention(shape, sms, plan);
}

Status run_decode_attention(const DecodePlan& plan, const void* q, int64_t q_stride,
                            const PagedKvDevice& kv, const int32_t* seq_lens,
                            const int32_t* block_tables, int max_blocks, float scale, void* out,
                            void* workspace, cudaStream_t stream) {
  const DecodeShape& sh = plan.shape;
  if (kv.head_dim != sh.head_dim || kv.block_size != sh.block_size ||
      kv.num_kv_heads != sh.num_kv_heads)
    return Status::error(
        "decode attention: cache (head_dim {}, block_size {}, kv heads {}) differs from the plan "
        "({}, {}, {})",
        kv.head_dim, kv.block_size, kv.num_kv_heads, sh.head_dim, sh.block_size, sh.num_kv_heads);
  if (kv.format != sh.kv_format)
    return Status::error("decode attention: the cache is {} but the plan was made for {}",
                         kv_format_name(kv.format), kv_format_name(sh.kv_format));
  if (!q || !kv.k || !kv.v || !seq_lens || !block_tables || !out)
    return Status::error("decode attention: null device pointer");
  if (max_blocks < 1 || kv.num_blocks < 1)
    return Status::error("decode attention: max_blocks {} / num_blocks {} < 1", max_blocks,
                         kv.num_blocks);
  CEILING_RETURN_IF_ERROR(
      check_q_stride("decode attention", q_stride, sh.num_q_heads, sh.head_dim));
  if (plan.workspace_bytes > 0 && !workspace)
    return Status::error("decode attention: workspace of {} bytes is null", plan.workspace_bytes);

  if (plan.warp)
    return run_warp_attention(q, q_stride, kv, nullptr, seq_lens, block_tables, max_blocks,
                              sh.num_seqs, sh.num_seqs, sh.num_q_heads, scale, out, stream);
  const bool fp8 = kv.format == KvFormat::kFP8;

  DecodeParams p{};
  p.q = static_cast<const __nv_bfloat16*>(q);
  p.q_stride = q_stride;
  p.k = kv.k;
  p.v = kv.v;
  p.out = static_cast<__nv_bfloat16*>(out);
  p.seq_lens = seq_lens;
  p.block_tables = block_tables;
  p.part_o = static_cast<float*>(workspace);
  p.part_lse = p.part_o ? p.part_o + static_cast<size_t>(sh.num_seqs) * sh.num_q_heads *
                                         plan.max_splits * sh.head_dim
                        : nullptr;
  p.counters = p.part_lse
                   ? reinterpret_cast<int*>(p.part_lse + static_cast<size_t>(sh.num_seqs) *
                                                             sh.num_q_heads * plan.max_splits)
                   : nullptr;
  p.max_blocks = max_blocks;
  p.num_blocks = kv.num_blocks;
  p.hq = sh.num_q_heads;
  p.hkv = sh.num_kv_heads;
  p.group = sh.num_q_heads / sh.num_kv_heads;
  p.q_chunks = plan.q_chunks;
  p.min_split = plan.min_split_tokens;
  p.max_splits = plan.max_splits;
  p.scale_log2 = scale * kLog2e * (fp8 ? kv.k_scale : 1.0f);
  p.out_scale = fp8 ? kv.v_scale : 1.0f;

  return dispatch_head_block(sh.head_dim, sh.block_size, [&]<int D, int BS>() -> Status {
    int smem = 0;
    void (*kern)(DecodeParams) = nullptr;
    const auto pick = [&]<int kStages, bool kFp8>() {
      if (plan.stages != kStages || fp8 != kFp8) return;
      smem = decode_smem_bytes<D, kStages, kFp8>();
      kern = decode_kernel<D, BS, kStages, kFp8>;
    };
    pick.template operator()<3, false>();
    pick.template operator()<4, false>();
    pick.template operator()<4, true>();
    if (!kern)
      return Status::error("decode attention: {} stages not built for a {} cache", plan.stages,
                           kv_format_name(kv.format));
    CEILING_CUDA_RETURN(
        cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const dim3 grid(plan.max_splits, sh.num_kv_heads * plan.q_chunks, sh.num_seqs);
    CEILING_CUDA_RETURN(detail::launch_pdl(kern, grid, dim3(kWarps * 32), smem, stream, p));
    return Status::ok_status();
  });
}

}  // namespace ceiling::cuda
