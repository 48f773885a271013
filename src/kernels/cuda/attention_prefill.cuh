// Pieces shared by the prefill kernels (mma.sync and wgmma): parameters, the varlen tile lookup,
// the causal bounds of one query tile and the online-softmax step.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/attention_common.cuh"

namespace ceiling::cuda::attn {

struct PrefillParams {
  const __nv_bfloat16* q;  // [T, Hq, D], rows q_stride elements apart
  const __nv_bfloat16* k;  // [num_blocks, Hkv, BS, D] (an fp8 cache: E4M3 bytes, mma.sync only)
  const __nv_bfloat16* v;
  __nv_bfloat16* out;           // [T, Hq, D]
  const int32_t* query_start;   // [S+1]
  const int32_t* seq_lens;      // [S]
  const int32_t* block_tables;  // [S, max_blocks]
  int64_t q_stride;
  int num_seqs, max_blocks, num_blocks, hq, hkv, group;
  float scale_log2;        // softmax scale · log2(e) (· k_scale for an fp8 cache)
  float out_scale = 1.0f;  // 1 (v_scale for an fp8 cache)
};

// One query tile of one sequence: rows [i0, i0 + BM) of its q_len new tokens.
struct QTile {
  int seq = -1;
  int q0 = 0;  // first token of the sequence in q / out
  int q_len = 0;
  int len = 0;     // seq_len (context incl. the new tokens)
  int i0 = 0;      // first row of the tile within the sequence
  int kv_end = 0;  // keys [0, kv_end) are visible to some row of the tile
  // Row i (within the sequence) sees keys [0, len - q_len + i].
  __device__ int first_pos() const { return len - q_len + i0; }
};

// Maps tile slot `slot` to (sequence, tile): sequences in order, each sequence's tiles from the
// last (the most keys) to the first so heavy tiles start early. Run by one full warp; slots past
// the last tile give seq = -1.
template <int BM>
__device__ QTile find_tile(const PrefillParams& p, int slot) {
  const int lane = threadIdx.x % 32;
  QTile tile;
  int base = 0;
  for (int c = 0; c < p.num_seqs; c += 32) {
    const int s = c + lane;
    const int nt =
        s < p.num_seqs ? ceil_div(max(p.query_start[s + 1] - p.query_start[s], 0), BM) : 0;
    int inc = nt;
#pragma unroll
    for (int off = 1; off < 32; off *= 2) {
      const int y = __shfl_up_sync(0xffffffffu, inc, off);
      if (lane >= off) inc += y;
    }
    const int chunk_total = __shfl_sync(0xffffffffu, inc, 31);
    if (slot < base + chunk_total) {
      const bool mine = slot >= base + inc - nt && slot < base + inc;
      const int who = __ffs(__ballot_sync(0xffffffffu, mine)) - 1;
      const int j = slot - base - __shfl_sync(0xffffffffu, inc - nt, who);
      const int ntw = __shfl_sync(0xffffffffu, nt, who);
      tile.seq = c + who;
      tile.i0 = (ntw - 1 - j) * BM;
      break;
    }
    base += chunk_total;
  }
  if (tile.seq >= 0) {
    tile.q0 = p.query_start[tile.seq];
    tile.q_len = p.query_start[tile.seq + 1] - tile.q0;
    tile.len = p.seq_lens[tile.seq];
    const int last_row = min(tile.i0 + BM, tile.q_len) - 1;
    tile.kv_end = min(tile.len, max(tile.len - tile.q_len + last_row + 1, 0));
  }
  return tile;
}

// One online-softmax step over key tile [col0, col0 + kBN) of a warp's two query rows (every
// prefill kernel's score fragments have this layout). at(j, e) is score e of the j-th n8
// fragment (e < 2: row g = lane / 4, columns col0 + 8j + 2t + e; e ≥ 2: row g + 8). Scales into
// the log2 domain, masks columns past lim0 / lim1 (causal) when `masked`, updates the running
// maxima (m0, m1) and sums (l0, l1: this thread's columns, quad-reduced by the caller at the end)
// and leaves P (unnormalized exp2) in place. Returns in (a0, a1) the factors the output
// accumulator must be scaled by before this tile's P·V is added.
template <int kBN, typename At>
__device__ __forceinline__ void online_softmax_tile(At at, float scale_log2, bool masked, int col0,
                                                    int lim0, int lim1, float& m0, float& m1,
                                                    float& l0, float& l1, float& a0, float& a1) {
  const int t = threadIdx.x % 4;
  float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
  for (int j = 0; j < kBN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float x = at(j, e) * scale_log2;
      if (masked) {
        const int col = col0 + 8 * j + 2 * t + (e & 1);
        if (col > (e < 2 ? lim0 : lim1)) x = -INFINITY;
      }
      at(j, e) = x;
      if (e < 2)
        mx0 = fmaxf(mx0, x);
      else
        mx1 = fmaxf(mx1, x);
    }
  const float mn0 = fmaxf(m0, quad_max(mx0)), mn1 = fmaxf(m1, quad_max(mx1));
  // A row with no visible key yet keeps m = -inf; subtract 0 then so exp2 gives 0, not NaN.
  const float r0 = mn0 == -INFINITY ? 0.0f : mn0, r1 = mn1 == -INFINITY ? 0.0f : mn1;
  a0 = exp2_fast(m0 - r0);
  a1 = exp2_fast(m1 - r1);
  m0 = mn0;
  m1 = mn1;
  float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
  for (int j = 0; j < kBN / 8; ++j) {
    at(j, 0) = exp2_fast(at(j, 0) - r0);
    at(j, 1) = exp2_fast(at(j, 1) - r0);
    at(j, 2) = exp2_fast(at(j, 2) - r1);
    at(j, 3) = exp2_fast(at(j, 3) - r1);
    ps0 += at(j, 0) + at(j, 1);
    ps1 += at(j, 2) + at(j, 3);
  }
  l0 = l0 * a0 + ps0;
  l1 = l1 * a1 + ps1;
}

}  // namespace ceiling::cuda::attn
