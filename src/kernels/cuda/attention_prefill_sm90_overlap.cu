// Causal varlen prefill on sm_90a with FlashAttention-3's intra-warpgroup overlap: while a
// warpgroup runs the softmax of key tile i, the tensor cores already compute S = Q·K^T of tile
// i+1 (issued asynchronously into a second score buffer), and P·V of tile i runs while the next
// iteration starts. 64-key tiles (two 32-register score buffers fit beside the 64-register
// output), four cp.async stages (tile i+2 loads into the stage of tile i-2, whose P·V every
// warpgroup has waited for before the iteration's barrier). The scale is folded into the exp2
// FMA, so this variant needs scale > 0 (the launcher falls back to the plain kernel otherwise).
// Layouts and descriptors: attention_sm90.cuh. Experimental: selected by
// PrefillKernel::kWgmmaOverlap only.
#include <cuda_bf16.h>

#include "core/check.h"
#include "kernels/cuda/attention_prefill_sm90.h"
#include "kernels/cuda/attention_sm90.cuh"

namespace ceiling::cuda::sm90 {
namespace {

using namespace attn;

constexpr int kBM = kPrefillBlockM, kBN = 64, kThreads = 256, kStages = 4;

template <int D>
constexpr int overlap_smem_bytes() {
  return 1024 + kBM * D * 2 + kStages * 2 * kBN * D * 2;  // slack + Q + stages × (K, V)
}

#ifdef CEILING_WGMMA
// s = Q·K^T for one 64-key tile: D/16 wgmma m64n64k16, both operands K-major in shared memory.
template <int D>
__device__ __forceinline__ void issue_scores(float (&s)[32], uint32_t q_base, uint32_t ks) {
#pragma unroll
  for (int i = 0; i < 32; ++i) s[i] = 0.0f;
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const uint32_t koff = (kk % 4) * 32;
    wgmma_ss_n64(s, desc(q_base + (kk / 4) * kBM * 128 + koff, 16, 1024),
                 desc(ks + (kk / 4) * kBN * 128 + koff, 16, 1024), kk > 0);
  }
  wgmma_commit();
}
#endif

template <int D, int BS>
__global__ void __launch_bounds__(kThreads, 1) prefill_overlap_kernel(const PrefillParams p) {
#ifdef CEILING_WGMMA
  constexpr int kChunks = D / 8;
  constexpr int kTileBytes = kBN * D * 2;
  extern __shared__ uint8_t smem_raw[];
  __shared__ QTile sh_tile;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int wg = warp / 4, wq = warp % 4;

  if (warp == 0) {
    const QTile found = find_tile<kBM>(p, blockIdx.y);
    if (lane == 0) sh_tile = found;
  }
  __syncthreads();
  const QTile tile = sh_tile;
  if (tile.seq < 0) return;
  const int h = blockIdx.x, kvh = h / p.group;
  const uint32_t sq = (smem_addr(smem_raw) + 1023u) & ~1023u;
  const uint32_t skv = sq + kBM * D * 2;
  auto stage_k = [&](int i) { return skv + (i % kStages) * 2 * kTileBytes; };

  for (int c = tid; c < kBM * kChunks; c += kThreads) {
    const int row = c / kChunks, ch = c % kChunks, i = tile.i0 + row;
    const bool ok = i < tile.q_len;
    const __nv_bfloat16* src =
        p.q + (static_cast<int64_t>(tile.q0 + (ok ? i : 0)) * p.hq + h) * D + ch * 8;
    cp_async16(sq + sw128(kBM, row, ch), src, ok);
  }
  cp_async_commit();

  const int32_t* table = p.block_tables + static_cast<int64_t>(tile.seq) * p.max_blocks;
  const int n_kv = ceil_div(tile.kv_end, kBN);
  // Tile i of this CTA holds keys [(n_kv-1-i)·64, +64): walked from the diagonal down.
  auto load_kv = [&](int i) {
    const int n = n_kv - 1 - i;
    const uint32_t ks = stage_k(i), vs = ks + kTileBytes;
    for (int c = tid; c < kBN * kChunks; c += kThreads) {
      const int row = c / kChunks, ch = c % kChunks, tok = n * kBN + row;
      int page = tok < tile.kv_end ? table[tok / BS] : -1;
      const bool ok = page >= 0 && page < p.num_blocks;
      page = ok ? page : 0;
      const int64_t off = ((static_cast<int64_t>(page) * p.hkv + kvh) * BS + tok % BS) * D + ch * 8;
      const uint32_t o = sw128(kBN, row, ch);
      cp_async16(ks + o, p.k + off, ok);
      cp_async16(vs + o, p.v + off, ok);
    }
  };
  if (n_kv > 0) load_kv(0);
  cp_async_commit();
  if (n_kv > 1) load_kv(1);
  cp_async_commit();
  cp_async_wait<1>();  // Q and tile 0
  fence_proxy_async();
  __syncthreads();

  const uint32_t q_base = sq + wg * 64 * 128;
  float o[D / 2], sc[32], sn[32];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
  if (n_kv > 0) {
    issue_scores<D>(sc, q_base, stage_k(0));
    wgmma_wait<0>();
    fence_regs(sc);
  }
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
  const int warp_pos = tile.first_pos() + wg * 64 + wq * 16;
  const int lim0 = min(warp_pos + g, tile.len - 1), lim1 = min(warp_pos + g + 8, tile.len - 1);

  for (int it = 0; it < n_kv; ++it) {
    const int n = n_kv - 1 - it;
    // Tile it+1 landed for everyone; everyone waited for P·V of tile it-1 (so tile it-2's stage
    // is free for tile it+2).
    cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();
    if (it + 2 < n_kv) load_kv(it + 2);
    cp_async_commit();
    const bool has_next = it + 1 < n_kv;
    if (has_next) issue_scores<D>(sn, q_base, stage_k(it + 1));

    // Online softmax of tile it (raw scores; scale folded into the exp2 FMA).
    const bool masked = n * kBN + kBN - 1 > warp_pos;
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (masked) {
          const int col = n * kBN + 8 * j + 2 * t + (e & 1);
          if (col > (e < 2 ? lim0 : lim1)) sc[4 * j + e] = -INFINITY;
        }
        if (e < 2)
          mx0 = fmaxf(mx0, sc[4 * j + e]);
        else
          mx1 = fmaxf(mx1, sc[4 * j + e]);
      }
    const float mn0 = fmaxf(m0, quad_max(mx0) * p.scale_log2),
                mn1 = fmaxf(m1, quad_max(mx1) * p.scale_log2);
    const float r0 = mn0 == -INFINITY ? 0.0f : mn0, r1 = mn1 == -INFINITY ? 0.0f : mn1;
    const float a0 = exp2_fast(m0 - r0), a1 = exp2_fast(m1 - r1);
    m0 = mn0;
    m1 = mn1;
    float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j) {
      sc[4 * j] = exp2_fast(fmaf(sc[4 * j], p.scale_log2, -r0));
      sc[4 * j + 1] = exp2_fast(fmaf(sc[4 * j + 1], p.scale_log2, -r0));
      sc[4 * j + 2] = exp2_fast(fmaf(sc[4 * j + 2], p.scale_log2, -r1));
      sc[4 * j + 3] = exp2_fast(fmaf(sc[4 * j + 3], p.scale_log2, -r1));
      ps0 += sc[4 * j] + sc[4 * j + 1];
      ps1 += sc[4 * j + 2] + sc[4 * j + 3];
    }
    l0 = l0 * a0 + ps0;
    l1 = l1 * a1 + ps1;
    uint32_t pa[kBN / 16][4];
#pragma unroll
    for (int kt = 0; kt < kBN / 16; ++kt) {
      pa[kt][0] = pack_bf16(sc[8 * kt], sc[8 * kt + 1]);
      pa[kt][1] = pack_bf16(sc[8 * kt + 2], sc[8 * kt + 3]);
      pa[kt][2] = pack_bf16(sc[8 * kt + 4], sc[8 * kt + 5]);
      pa[kt][3] = pack_bf16(sc[8 * kt + 6], sc[8 * kt + 7]);
    }

    // P·V of tile it-1 must be done before O is rescaled (S of tile it+1 may still run).
    if (has_next)
      wgmma_wait<1>();
    else
      wgmma_wait<0>();
    fence_regs(o);
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      o[4 * j] *= a0, o[4 * j + 1] *= a0, o[4 * j + 2] *= a1, o[4 * j + 3] *= a1;
    }
    const uint32_t vs = stage_k(it) + kTileBytes;
    wgmma_fence();
#pragma unroll
    for (int kt = 0; kt < kBN / 16; ++kt) {
      const uint64_t dv = desc(vs + kt * 16 * 128, kBN * 128, 1024);
      if constexpr (D == 128)
        wgmma_rs_n128_tb(o, pa[kt], dv, 1);
      else
        wgmma_rs_n64_tb(o, pa[kt], dv, 1);
    }
    wgmma_commit();
    if (has_next) {
      wgmma_wait<1>();  // S of tile it+1 (committed before this P·V)
      fence_regs(sn);
#pragma unroll
      for (int i = 0; i < 32; ++i) sc[i] = sn[i];
    }
  }
  wgmma_wait<0>();
  fence_regs(o);
  cp_async_wait<0>();

  l0 = quad_sum(l0);
  l1 = quad_sum(l1);
  const float i0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, i1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
  const int row0 = tile.i0 + wg * 64 + wq * 16 + g, row1 = row0 + 8;
  __nv_bfloat16* out0 = p.out + (static_cast<int64_t>(tile.q0 + row0) * p.hq + h) * D;
  __nv_bfloat16* out1 = p.out + (static_cast<int64_t>(tile.q0 + row1) * p.hq + h) * D;
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
    if (row0 < tile.q_len)
      *reinterpret_cast<uint32_t*>(out0 + 8 * j + 2 * t) =
          pack_bf16(o[4 * j] * i0, o[4 * j + 1] * i0);
    if (row1 < tile.q_len)
      *reinterpret_cast<uint32_t*>(out1 + 8 * j + 2 * t) =
          pack_bf16(o[4 * j + 2] * i1, o[4 * j + 3] * i1);
  }
#else
  __trap();  // built without sm_90a: prefill_wgmma_available() is false
#endif
}

}  // namespace

Status run_prefill_wgmma_overlap(const PrefillParams& p, int head_dim, int block_size, int hq,
                                 int tile_slots, cudaStream_t stream) {
  if (!(p.scale_log2 > 0.0f))  // the folded-scale softmax assumes a positive scale
    return run_prefill_wgmma(p, head_dim, block_size, hq, tile_slots, stream);
  return dispatch_head_block(head_dim, block_size, [&]<int D, int BS>() -> Status {
    constexpr int smem = overlap_smem_bytes<D>();
    auto* kern = prefill_overlap_kernel<D, BS>;
    CEILING_CUDA_RETURN(
        cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    kern<<<dim3(hq, tile_slots), kThreads, smem, stream>>>(p);
    CEILING_CUDA_RETURN_LAST();
    return Status::ok_status();
  });
}

}  // namespace ceiling::cuda::sm90
