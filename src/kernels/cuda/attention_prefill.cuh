// Pieces shared by the prefill kernels (mma.sync and wgmma): parameters, the varlen tile lookup
// and the causal bounds of one query tile.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/attention_common.cuh"

namespace ceiling::cuda::attn {

struct PrefillParams {
  const __nv_bfloat16* q;  // [T, Hq, D]
  const __nv_bfloat16* k;  // [num_blocks, Hkv, BS, D]
  const __nv_bfloat16* v;
  __nv_bfloat16* out;           // [T, Hq, D]
  const int32_t* query_start;   // [S+1]
  const int32_t* seq_lens;      // [S]
  const int32_t* block_tables;  // [S, max_blocks]
  int num_seqs, max_blocks, num_blocks, hq, hkv, group;
  float scale_log2;
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

}  // namespace ceiling::cuda::attn
