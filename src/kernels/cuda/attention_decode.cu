// Paged decode attention: one new token per sequence, GQA, split along the context
// (flash-decoding) with a log-sum-exp merge.
//
// Work split: one CTA per (split, KV head × query chunk, sequence). The plan fixes the most splits
// a sequence may take (enough to fill the SMs in one wave, none when the batch already does; with
// an fp8 cache, a few whole waves when they fill the SMs better than one partial wave); each
// CTA derives its sequence's own split count from the sequence's length — at least
// min_split_tokens (one 16-token tile per warp) per split — so a captured graph serves short and
// long contexts alike (a plan sized for max_seq_len no longer fixes the split length). The query
// heads sharing a KV head (up to 16 per chunk) form the 16 rows of one mma.sync A operand, so
// every K/V byte is loaded once per group and the dot products run on tensor cores. Each of the
// 4 warps walks its own 16-token tiles (tile i of the split goes to warp i % 4) through a private
// cp.async pipeline of 3 stages, 4 when the grid is at most one CTA per SM (an fp8 cache: 4, or
// 3 with four CTAs an SM, split_slots_per_sm; 16-byte copies; a
// 16-token tile lies inside one cache block because block_size is a multiple of 16 and splits
// start at multiples of 16); the block-table entries of a warp's tiles are loaded 32 at a time
// ahead of the copies. The warps' (max, sum, acc) are merged in shared memory; a sequence with
// one split writes bf16 out directly, otherwise the split writes its normalized partial output
// and log2-sum-exp to the workspace, and the last split of the (sequence, KV head) to finish —
// counted with an atomic per group, reset by that last CTA —
// merges them (one launch, no separate combine kernel).
//
// fp8 KV cache (kv_format.h): a warp's cp.async stages hold the E4M3 bytes of its tiles, and the
// mma operands come straight from them, converted in registers (exact, one cvt a pair: fp8.cuh) —
// no f16 copy of the tile in shared memory. K (the B operand of Q·Kᵀ, k = head dim): lane
// (g, t) loads 16 bytes of token g of each 8-token half, dims 16(t + 4h) … + 15, and uses them as
// the fragment's k pairs {2t, 2t + 1} and {2t + 8, 2t + 9} of four k steps; the dot product does
// not care in which order the head dim is summed, so q's A fragments are loaded in the same
// permuted order. V (the B operand of P·V, k = token, n = head dim): lane g owns dims
// g·D/8 … + D/8 − 1 (n-tile j is dim g·D/8 + j), loads them for tokens 2t, 2t + 1, 2t + 8, 2t + 9
// and pairs the tokens' bytes with a PRMT before the cvt; the output's dims are put back in the
// merge. The stage's 16-byte chunks are XOR-swizzled (fp8_swz) so both reads are conflict-free at
// D = 128. q is converted to f16 once and P packed as f16 (attention_common.cuh); the scales are
// folded into the softmax scale (k) and the final normalization (v). With no converted tiles a
// warp needs only its stages: 16 KB at D = 128, three CTAs an SM; with 3 stages 12 KB, four CTAs
// an SM, q's fragments then in shared memory (read every tile) and Q·Kᵀ in two chains, so that
// the kernel fits 128 registers.
//
// Why (H200, batch 256, context ~1580, 8 KV heads, D = 128; bench/lowprec_notes.md r135–r140):
// the first fp8 kernel converted each landed stage into an f16 tile in shared memory and ran the
// bf16 path's ldmatrix / mma on it — 96 KB a CTA, two CTAs an SM, 305 µs a layer for 830 MB (60 %
// of read) against the bf16 cache's 380 µs for 1.66 GB (97 %): each warp's per-tile chain was the
// limit, 8 warps an SM to hide it. Direct fragments, three CTAs an SM: 246 µs alone (ncu: 7.25
// cycles a warp between instructions, 37 % of issue slots used — still the chain); then the O
// rescale skipped when no row's maximum grew and Q·Kᵀ in four mma chains (both paths): 196 µs
// alone (91 % of read), 205 µs a layer in the step.
//
// Launched with PDL (pdl.cuh); the next kernel may launch once every CTA has started. In the
// 4-stage kernels and every fp8 one, a warp issues its first kStages − 1 tiles' copies before
// waiting on the previous kernel
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
// and fewer splits mean a shorter merge. An fp8 cache: its CTA converts every operand before the
// mma (more instructions per byte, a longer chain per tile), so as many CTAs as fit: three at
// 64 KB with 4 stages (H200 r139, B=1 ctx 32768, 49 splits 22.1 µs, 33 26.8, 16 35.6), or four
// at 48 KB with 3 stages (q's fragments in shared memory: 128 registers) when one or two long
// splits put the grid in one wave of those at least as full (H200 r158–r161: B=32 ctx 4096, 2
// splits, 512 CTAs in 528 slots, 71.1–71.4 µs against 74.5–75.1 for 3 splits of three an SM, the
// final kernel 69.4 against 73.1 on a faster start; B=64 ctx 1024, one split, 35.7–36.1 against
// 40.2–40.5; B=256 ctx 1536 a tie; B=16 ctx 4096 at 4 splits 38.4 against 37.4–37.7 for 3; B=1
// ctx 32768 at 66 splits 23.3 against 22.1 for 49 — more, shorter splits want the deeper
// pipeline; r163, D = 64 at B=32 ctx 4096: 40.2 against 44.1).
constexpr int kFp8CtasPerSm = 3, kFp8CtasPerSmShallow = 4;
constexpr int kFp8MaxShallowSplits = 2;
constexpr int split_slots_per_sm(KvFormat f) {
  return f == KvFormat::kFP8 ? kFp8CtasPerSm : 1;
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
// The warps' merge rows in shared memory are D + kORowPad floats apart: with D alone every lane's
// store of one accumulator hit the same bank (fp8's dims 2t·D/8 + j: 32-way, bf16's: 8-way).
constexpr int kORowPad = 4;

// The four-CTA fp8 variant (3 stages) keeps q's A fragments in shared memory, after the stages
// and the merge rows (D/16 × 32 lanes × 16 bytes), and reads them every tile: registers for four
// CTAs an SM.
template <int kStages, bool kFp8>
constexpr bool q_in_smem() {
  return kFp8 && kStages == 3;
}
// Bytes of the warps' stages, or of the merge rows that reuse them after the last tile.
template <int D, int kStages, bool kFp8>
constexpr int pipe_or_merge_bytes() {
  constexpr int pipe = kWarps * kStages * 2 * stage_tile_bytes<D, kFp8>();  // per warp: its stages
  constexpr int merge = kWarps * 16 * (D + kORowPad) * 4 + kWarps * 16 * 2 * 4;
  return pipe > merge ? pipe : merge;
}
template <int D, int kStages, bool kFp8>
constexpr int decode_smem_bytes() {
  return pipe_or_merge_bytes<D, kStages, kFp8>() +
         (q_in_smem<kStages, kFp8>() ? D / 16 * 32 * 16 : 0);
}

// Byte offset of (row, 16-byte chunk) in an E4M3 stage tile (D bytes a row): chunks XOR-swizzled
// so that the K reads (lanes g, g + 1 of a phase: chunks t + 4h of two rows) and the V reads
// (rows 2t [+ 1, + 8, + 9] of four lanes t, chunk g of two lanes g) hit distinct banks. D = 64:
// conflict-free for K, 2-way for V (two 64-byte rows share a 128-byte bank line).
template <int D>
__device__ __forceinline__ uint32_t fp8_swz(int row, int chunk) {
  const int x = D == 128 ? (row & 6) ^ ((row & 1) << 2) : (row >> 1) & 3;
  return static_cast<uint32_t>(row * D + ((chunk ^ x) << 4));
}

// Words a and b (4 E4M3 values each: tokens a and b at 4 dims) as f16 pairs by dim: o[i] =
// (byte i of a, byte i of b). Two PRMT and four cvt.
__device__ __forceinline__ void fp8_pair_tokens(uint32_t a, uint32_t b, uint32_t (&o)[4]) {
  uint32_t p[2];
  asm("prmt.b32 %0, %1, %2, 0x5140;" : "=r"(p[0]) : "r"(a), "r"(b));
  asm("prmt.b32 %0, %1, %2, 0x7362;" : "=r"(p[1]) : "r"(a), "r"(b));
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(
        static_cast<__nv_fp8x2_storage_t>(p[i / 2] >> (16 * (i % 2))), __NV_E4M3);
    o[i] = static_cast<uint32_t>(h.x) | static_cast<uint32_t>(h.y) << 16;
  }
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

// An fp8 cache with 3 stages (48 KB at D = 128): four CTAs an SM (≤ 128 registers).
template <int D, int BS, int kStages, bool kFp8>
__global__ void __launch_bounds__(kWarps * 32, (q_in_smem<kStages, kFp8>() ? 4 : 1))
    decode_kernel(const DecodeParams p) {
  static_assert(BS % kTile == 0, "a warp tile must lie inside one cache block");
  constexpr int kEb = kFp8 ? 1 : 2;      // bytes per cached value
  constexpr int kChunks = D * kEb / 16;  // 16-byte chunks per cached row
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

  // This warp's K/V stages.
  uint8_t* wsm = smem + warp * kStages * 2 * kStageTile;
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
      // bf16: swizzled for ldmatrix; fp8: for the fragment reads (fp8_swz).
      const uint32_t dst = kFp8 ? fp8_swz<D>(row, ch) : swz<D>(row, ch);
      cp_async16(ks + dst, kbase + off, ok);
      cp_async16(vs + dst, vbase + off, ok);
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
  // 512 CTAs) measured no gain. An fp8 cache: early in both of its kernels (4 stages, three CTAs
  // an SM; 3 stages, four CTAs an SM, which the plan takes only for a grid of one wave).
  const auto prologue = [&] {
#pragma unroll
    for (int st = 0; st < kStages - 1; ++st) {
      if (st < my_tiles) load_tile(st, st);
      cp_async_commit();
    }
  };
  const int pre = min(kStages - 1, my_tiles);
  const bool early = (kStages == 4 || kFp8) &&
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
      // bf16: k pairs {2t, 2t + 1} and {2t + 8, 2t + 9} of step kk; fp8: the K fragments' order,
      // dims 16(t + 4h) + 4m + {0, 1} and {2, 3} for step kk = 4h + m.
      const int c = kFp8 ? 16 * (t + 4 * (kk / 4)) + 4 * (kk % 4) : kk * 16 + 2 * t;
      const int c2 = kFp8 ? c + 2 : c + 8;
      auto ld = [&](bool ok, int row, int col) -> uint32_t {
        return ok ? *reinterpret_cast<const uint32_t*>(qb + row * D + col) : 0u;
      };
      qf[kk][0] = ld(r0, g, c);
      qf[kk][1] = ld(r1, g + 8, c);
      qf[kk][2] = ld(r0, g, c2);
      qf[kk][3] = ld(r1, g + 8, c2);
      if constexpr (kFp8)
        for (uint32_t& x : qf[kk]) x = bf16x2_to_f16x2(x);
    }
  }
  constexpr bool kQsm = q_in_smem<kStages, kFp8>();
  const uint32_t qsm = smem_addr(smem + pipe_or_merge_bytes<D, kStages, kFp8>()) + lane * 16;
  if constexpr (kQsm) {  // warp w stores steps kk ≡ w (mod kWarps); read back every tile
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      if (kk % kWarps == warp)
        asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(qsm + kk * 512),
                     "r"(qf[kk][0]), "r"(qf[kk][1]), "r"(qf[kk][2]), "r"(qf[kk][3])
                     : "memory");
    __syncthreads();
  }

  for (int i = 0; i < my_tiles; ++i) {
    if (i + kStages - 1 < my_tiles) load_tile(i + kStages - 1, (i + kStages - 1) % kStages);
    cp_async_commit();
    cp_async_wait<kStages - 1>();
    __syncwarp();
    const uint8_t* stage = wsm + (i % kStages) * 2 * kStageTile;  // K tile, then V tile
    const uint32_t ks = smem_addr(stage), vs = ks + kStageTile;
    const int ts = t0 + (warp + i * kWarps) * kTile;

    // S[16 q rows][16 tokens] = Q · K^T, in two accumulators a half (sd: the odd k steps of
    // bf16, the second 16-byte load of fp8 at D = 128): four mma chains of D/32 instead of two
    // of D/16.
    float sc[2][4] = {}, sd[2][4] = {};
    if constexpr (kFp8) {
      // The four k steps of one 16-byte K load at a time: q's fragments for them (registers, or
      // shared memory in the four-CTA kernel), then per 8-token half the load, its conversion and
      // four mma.
#pragma unroll
      for (int h = 0; h < kChunks / 4; ++h) {
        uint32_t q4[4][4];
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          if constexpr (kQsm) {
            asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(q4[m][0]), "=r"(q4[m][1]), "=r"(q4[m][2]), "=r"(q4[m][3])
                         : "r"(qsm + (4 * h + m) * 512));
          } else {
#pragma unroll
            for (int r = 0; r < 4; ++r) q4[m][r] = qf[4 * h + m][r];
          }
        }
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          float(&acc)[4] = h % 2 ? sd[nt] : sc[nt];
          const uint4 raw =
              *reinterpret_cast<const uint4*>(stage + fp8_swz<D>(nt * 8 + g, t + 4 * h));
          const uint4 lo = detail::fp8x8_f16(raw.x, raw.y), hi = detail::fp8x8_f16(raw.z, raw.w);
          mma_16816_f16(acc, q4[0], lo.x, lo.y);
          mma_16816_f16(acc, q4[1], lo.z, lo.w);
          mma_16816_f16(acc, q4[2], hi.x, hi.y);
          mma_16816_f16(acc, q4[3], hi.z, hi.w);
        }
      }
    } else {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t b[4];
        ldmatrix_x4(ks + swz<D>((lane % 8) + (lane / 16) * 8, kk * 2 + (lane / 8) % 2), b);
        mma_16816(kk % 2 ? sd[0] : sc[0], qf[kk], b[0], b[1]);
        mma_16816(kk % 2 ? sd[1] : sc[1], qf[kk], b[2], b[3]);
      }
    }
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) sc[nt][e] += sd[nt][e];
    float mx0 = -INFINITY, mx1 = -INFINITY;
    const bool full = ts + kTile <= t1;  // warp-uniform: only a split's last tile is masked
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int tok = ts + nt * 8 + 2 * t + (e & 1);
        const float x = full || tok < t1 ? sc[nt][e] * p.scale_log2 : -INFINITY;
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
    // O = O·alpha + P · V. alpha is exactly 1 for a row whose maximum did not grow (most tiles
    // once the first have set it): the D/2 products are skipped when no row of the warp needs
    // them (a warp-uniform branch; the values are the same bits either way).
    if (__any_sync(0xffffffffu, a0 != 1.0f || a1 != 1.0f)) {
#pragma unroll
      for (int j = 0; j < D / 8; ++j) {
        o[j][0] *= a0, o[j][1] *= a0, o[j][2] *= a1, o[j][3] *= a1;
      }
    }
    if constexpr (kFp8) {
      // Tokens 2t, 2t + 1 (b0) and 2t + 8, 2t + 9 (b1) at this lane's D/8 dims: n-tile j is
      // dim g·D/8 + j.
      constexpr int kWords = D / 32;  // 4-byte words of a lane's dims in one token row
      uint32_t rv[4][kWords];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int tok = 2 * t + (r & 1) + 8 * (r >> 1);
        const uint8_t* src =
            stage + kStageTile + fp8_swz<D>(tok, g * kWords / 4) + (D == 64 ? (g % 2) * 8 : 0);
        if constexpr (kWords == 4) {
          const uint4 x = *reinterpret_cast<const uint4*>(src);
          rv[r][0] = x.x, rv[r][1] = x.y, rv[r][2] = x.z, rv[r][3] = x.w;
        } else {
          const uint2 x = *reinterpret_cast<const uint2*>(src);
          rv[r][0] = x.x, rv[r][1] = x.y;
        }
      }
#pragma unroll
      for (int w = 0; w < kWords; ++w) {
        uint32_t b0[4], b1[4];
        fp8_pair_tokens(rv[0][w], rv[1][w], b0);
        fp8_pair_tokens(rv[2][w], rv[3][w], b1);
#pragma unroll
        for (int e = 0; e < 4; ++e) mma_16816_f16(o[4 * w + e], pa, b0[e], b1[e]);
      }
    } else {
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t b[4];
        ldmatrix_x4_trans(vs + swz<D>((lane % 8) + ((lane / 8) % 2) * 8, dp * 2 + lane / 16), b);
        mma_16816(o[2 * dp], pa, b[0], b[1]);
        mma_16816(o[2 * dp + 1], pa, b[2], b[3]);
      }
    }
    __syncwarp();
  }
  cp_async_wait<0>();
  l0 = quad_sum(l0);
  l1 = quad_sum(l1);

  // Merge the 4 warps: sm_o [warp][16][D + kORowPad] fp32, sm_m / sm_l [warp][16].
  constexpr int kORow = D + kORowPad;
  __syncthreads();
  float* sm_o = reinterpret_cast<float*>(smem);
  float* sm_m = sm_o + kWarps * 16 * kORow;
  float* sm_l = sm_m + kWarps * 16;
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) {
    float* r0 = sm_o + (warp * 16 + g) * kORow;
    float* r1 = r0 + 8 * kORow;
    if constexpr (kFp8) {
      // n-tile dt, columns 2t and 2t + 1: dims 2t·D/8 + dt and (2t + 1)·D/8 + dt.
      const int c0 = 2 * t * (D / 8) + dt, c1 = c0 + D / 8;
      r0[c0] = o[dt][0], r0[c1] = o[dt][1], r1[c0] = o[dt][2], r1[c1] = o[dt][3];
    } else {
      const int col = dt * 8 + 2 * t;
      *reinterpret_cast<float2*>(r0 + col) = make_float2(o[dt][0], o[dt][1]);
      *reinterpret_cast<float2*>(r1 + col) = make_float2(o[dt][2], o[dt][3]);
    }
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
      const float4 x = *reinterpret_cast<const float4*>(sm_o + (w * 16 + r) * kORow + c);
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
  if (sh.fp8_ctas_per_sm != 0 && sh.fp8_ctas_per_sm != kFp8CtasPerSm &&
      sh.fp8_ctas_per_sm != kFp8CtasPerSmShallow)
    return Status::error("decode attention: fp8_ctas_per_sm {} is not 0, {} or {}",
                         sh.fp8_ctas_per_sm, kFp8CtasPerSm, kFp8CtasPerSmShallow);
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
  const int cap = std::max(1, shape.max_seq_len / pl.min_split_tokens);
  int splits = 1;
  if (work * 5 < slots * 4) splits = static_cast<int>(std::min<int64_t>(slots / work, cap));
  // The part of its waves a grid of work × n CTAs fills with `per_sm` CTAs an SM.
  const auto fill = [&](int64_t n, int64_t per_sm) {
    const int64_t ctas = work * n, wave = static_cast<int64_t>(num_sms) * per_sm;
    return static_cast<double>(ctas) / static_cast<double>((ctas + wave - 1) / wave * wave);
  };
  // An fp8 cache's CTAs fit three an SM whatever the split, so a grid under one wave may also
  // take a few whole waves: the split count whose CTAs best fill the waves they take, when it
  // fills ≥ 5 points more (H200 r145, B=32 ctx 4096: 256 CTAs of 396 slots, 1 split 81.4 µs, 2
  // 85.5, 3 — 768 CTAs, 0.97 of two waves — 74.7).
  if (shape.kv_format == KvFormat::kFP8 && work < slots) {
    const int64_t most = std::min<int64_t>(cap, 4 * slots / work);  // at most four waves
    for (int64_t n = 2; n <= most; ++n)
      if (fill(n, kFp8CtasPerSm) > fill(splits, kFp8CtasPerSm) + 0.05) splits = static_cast<int>(n);
  }
  // Measured (H200, same machine, run 11 of bench/attention_notes.md): 4 stages beat 3 by
  // ~5 % at B=1 ctx 32768 and B=8 ctx 8192; 6 gained nothing more. An fp8 cache: 4 stages of
  // half the bytes, 64 KB at head_dim 128, so three CTAs fit an SM (registers allow three too);
  // 6 stages (96 KB, two CTAs) measured slower at B=256 ctx 1536 (H200 r139: 204.0 against
  // 196.1 µs) and B=64 ctx 1024 (42.0 against 40.5).
  if (shape.kv_format == KvFormat::kFP8)
    pl.stages = 4;
  else
    pl.stages = work * splits <= num_sms ? 4 : 3;
  // An fp8 cache, four CTAs an SM with 3 stages: when at most kFp8MaxShallowSplits splits put the
  // whole grid in one wave of those at least as full as the three-an-SM plan fills its waves
  // (B = 32 and 64 at 8 KV heads on 132 SMs: 512 CTAs in 528 slots); or when asked (then one
  // wave's worth of splits, however many).
  if (shape.kv_format == KvFormat::kFP8 && shape.fp8_ctas_per_sm != kFp8CtasPerSm) {
    const int64_t wave = static_cast<int64_t>(num_sms) * kFp8CtasPerSmShallow;
    const int64_t n = std::max<int64_t>(1, std::min<int64_t>(cap, wave / work));
    const bool fits = work * n <= wave && n <= kFp8MaxShallowSplits &&
                      fill(n, kFp8CtasPerSmShallow) >= fill(splits, kFp8CtasPerSm) - 0.01;
    if (fits || shape.fp8_ctas_per_sm == kFp8CtasPerSmShallow) {
      splits = static_cast<int>(n);
      pl.stages = 3;
    }
  }
  pl.max_splits = splits;
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
    pick.template operator()<3, true>();
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
