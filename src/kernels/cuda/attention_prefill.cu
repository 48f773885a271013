// Causal varlen prefill attention over the paged KV cache, FlashAttention-2 style, and the
// prefill plan/run entry points (which also dispatch to the wgmma kernel when it is chosen).
//
// Grid: x = query head, y = query tile slot (each sequence's tiles heaviest first), so CTAs start
// in longest-first order across all heads and the causal tail stays short. (Tiles-fastest order,
// tried for L2 locality, was 11% slower: the L2 hit rate was already 86% and the tail grew.)
//
// mma.sync kernel: one CTA per (query head, query tile of 128 rows); 8 warps, each owning 16 rows
// with Q held in registers as A fragments. Key/value tiles of 64 tokens are gathered from the
// paged cache with 16-byte cp.async into swizzled shared memory, double-buffered (the next tile
// loads while this one computes). Tiles are walked from the diagonal down to key 0, so only the
// first one or two need the causal mask. Softmax is online in fp32 (log2 domain), P is rounded to
// bf16 for the P·V product, accumulation is fp32. With an fp8 cache (kv_format.h) the stages hold
// the tiles' E4M3 bytes and, once landed, the CTA converts them into one f16 K/V buffer laid out
// as a bf16 stage (exact, fp8.cuh; the scales folded into the softmax scale and the final
// normalization); the rest is the bf16 path with f16 operands (q converted, P packed as f16). All
// prefill kernels are launched with PDL (pdl.cuh) and wait on the previous kernel before their
// first read.
#include <cuda_bf16.h>

#include "core/check.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_prefill.cuh"
#include "kernels/cuda/attention_prefill_sm90.h"
#include "kernels/cuda/fp8.cuh"
#include "kernels/cuda/pdl.cuh"

namespace ceiling::cuda {
namespace {

using namespace attn;

constexpr int kBM = 128, kBN = 64, kWarps = 8;

template <int D, bool kFp8>
constexpr int prefill_smem_bytes() {
  // Q tile + 2 stages of (K, V) [+ fp8: the converted f16 (K, V)]
  return kBM * D * 2 + 2 * 2 * kBN * D * (kFp8 ? 1 : 2) + (kFp8 ? 2 * kBN * D * 2 : 0);
}

template <int D, int BS, bool kFp8>
__global__ void __launch_bounds__(kWarps * 32, 1) prefill_mma_kernel(const PrefillParams p) {
  constexpr int kChunks = D / 8;  // 16-byte chunks of a bf16 row
  constexpr int kEb = kFp8 ? 1 : 2;
  constexpr int kKvChunks = D * kEb / 16;  // 16-byte chunks of a cached row
  constexpr int kKvBytes = kBN * D * 2;    // a 16-bit K or V tile
  constexpr int kStageTile = kBN * D * kEb;
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ QTile sh_tile;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;

  detail::pdl_launch_dependents();
  detail::pdl_wait();
  if (warp == 0) {
    const QTile found = find_tile<kBM>(p, blockIdx.y);
    if (lane == 0) sh_tile = found;
  }
  __syncthreads();
  const QTile tile = sh_tile;
  if (tile.seq < 0) return;
  const int h = blockIdx.x, kvh = h / p.group;
  const uint32_t sq = smem_addr(smem), skv = sq + kBM * D * 2;
  const uint32_t scvt = skv + 2 * 2 * kStageTile;  // fp8: the converted K, V
  const char* kbase = reinterpret_cast<const char*>(p.k);
  const char* vbase = reinterpret_cast<const char*>(p.v);

  for (int c = threadIdx.x; c < kBM * kChunks; c += blockDim.x) {
    const int row = c / kChunks, ch = c % kChunks, i = tile.i0 + row;
    const bool ok = i < tile.q_len;
    const __nv_bfloat16* src =
        p.q + static_cast<int64_t>(tile.q0 + (ok ? i : 0)) * p.q_stride + h * D + ch * 8;
    cp_async16(sq + swz<D>(row, ch), src, ok);
  }
  cp_async_commit();

  const int32_t* table = p.block_tables + static_cast<int64_t>(tile.seq) * p.max_blocks;
  auto load_kv = [&](int n, int stage) {
    const uint32_t ks = skv + stage * 2 * kStageTile, vs = ks + kStageTile;
    for (int c = threadIdx.x; c < kBN * kKvChunks; c += blockDim.x) {
      const int row = c / kKvChunks, ch = c % kKvChunks, tok = n * kBN + row;
      int page = tok < tile.kv_end ? table[tok / BS] : -1;
      const bool ok = page >= 0 && page < p.num_blocks;
      page = ok ? page : 0;
      const int64_t off =  // bytes
          (((static_cast<int64_t>(page) * p.hkv + kvh) * BS + tok % BS) * kKvChunks + ch) * 16;
      // bf16: swizzled for ldmatrix; fp8: row-major (the conversion reads it by chunks).
      const uint32_t dst = kFp8 ? static_cast<uint32_t>(c * 16) : swz<D>(row, ch);
      cp_async16(ks + dst, kbase + off, ok);
      cp_async16(vs + dst, vbase + off, ok);
    }
  };
  // fp8: the landed stage's E4M3 (K, V) into the f16 buffer, swizzled as a bf16 stage.
  auto convert_kv = [&](int stage) {
    const uint8_t* src = smem + (skv - sq) + stage * 2 * kStageTile;
    for (int c = threadIdx.x; c < 2 * kBN * kKvChunks; c += blockDim.x) {
      const int kv = c / (kBN * kKvChunks), cc = c % (kBN * kKvChunks);
      const int row = cc / kKvChunks, ch = cc % kKvChunks;
      const uint4 raw = *reinterpret_cast<const uint4*>(src + kv * kStageTile + cc * 16);
      const uint4 lo = detail::fp8x8_f16(raw.x, raw.y);
      const uint4 hi = detail::fp8x8_f16(raw.z, raw.w);
      uint8_t* dst = smem + (scvt - sq) + kv * kKvBytes;
      *reinterpret_cast<uint4*>(dst + swz<D>(row, 2 * ch)) = lo;
      *reinterpret_cast<uint4*>(dst + swz<D>(row, 2 * ch + 1)) = hi;
    }
  };

  const int n_kv = ceil_div(tile.kv_end, kBN);
  if (n_kv > 0) load_kv(n_kv - 1, 0);
  cp_async_commit();
  cp_async_wait<1>();
  __syncthreads();

  uint32_t qf[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    ldmatrix_x4(sq + swz<D>(warp * 16 + (lane % 8) + ((lane / 8) % 2) * 8, kk * 2 + lane / 16),
                qf[kk]);
  if constexpr (kFp8) {  // f16 operands against the f16 image of the cache
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      for (uint32_t& x : qf[kk]) x = bf16x2_to_f16x2(x);
  }

  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
  // Last key each of this thread's two rows may see (rows past q_len are clamped to the context).
  const int warp_pos = tile.first_pos() + warp * 16;
  const int lim0 = min(warp_pos + g, tile.len - 1), lim1 = min(warp_pos + g + 8, tile.len - 1);

  for (int it = 0; it < n_kv; ++it) {
    const int n = n_kv - 1 - it, st = it & 1;
    if (it + 1 < n_kv) load_kv(n - 1, st ^ 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    uint32_t ks = skv + st * 2 * kKvBytes, vs = ks + kKvBytes;
    if constexpr (kFp8) {
      convert_kv(st);
      __syncthreads();
      ks = scvt;
      vs = scvt + kKvBytes;
    }

    float sc[kBN / 8][4];
#pragma unroll
    for (int i = 0; i < kBN / 8; ++i) sc[i][0] = sc[i][1] = sc[i][2] = sc[i][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
      for (int np = 0; np < kBN / 16; ++np) {
        uint32_t b[4];
        ldmatrix_x4(ks + swz<D>(np * 16 + (lane % 8) + (lane / 16) * 8, kk * 2 + (lane / 8) % 2),
                    b);
        mma_t<kFp8>(sc[2 * np], qf[kk], b[0], b[1]);
        mma_t<kFp8>(sc[2 * np + 1], qf[kk], b[2], b[3]);
      }

    const bool masked = n * kBN + kBN - 1 > warp_pos;
    float a0, a1;
    online_softmax_tile<kBN>([&](int j, int e) -> float& { return sc[j][e]; }, p.scale_log2, masked,
                             n* kBN, lim0, lim1, m0, m1, l0, l1, a0, a1);
#pragma unroll
    for (int i = 0; i < D / 8; ++i) o[i][0] *= a0, o[i][1] *= a0, o[i][2] *= a1, o[i][3] *= a1;

#pragma unroll
    for (int kt = 0; kt < kBN / 16; ++kt) {
      const uint32_t pa[4] = {pack_t<kFp8>(sc[2 * kt][0], sc[2 * kt][1]),
                              pack_t<kFp8>(sc[2 * kt][2], sc[2 * kt][3]),
                              pack_t<kFp8>(sc[2 * kt + 1][0], sc[2 * kt + 1][1]),
                              pack_t<kFp8>(sc[2 * kt + 1][2], sc[2 * kt + 1][3])};
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t b[4];
        ldmatrix_x4_trans(
            vs + swz<D>(kt * 16 + (lane % 8) + ((lane / 8) % 2) * 8, dp * 2 + lane / 16), b);
        mma_t<kFp8>(o[2 * dp], pa, b[0], b[1]);
        mma_t<kFp8>(o[2 * dp + 1], pa, b[2], b[3]);
      }
    }
    __syncthreads();
  }
  cp_async_wait<0>();

  // Epilogue: normalize, stage this warp's 16 rows in its own part of the Q tile, store 16 B.
  l0 = quad_sum(l0);
  l1 = quad_sum(l1);
  const float i0 = l0 > 0.0f ? p.out_scale / l0 : 0.0f, i1 = l1 > 0.0f ? p.out_scale / l1 : 0.0f;
  uint8_t* sq_ptr = smem;
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) {
    const int r = warp * 16 + g;
    *reinterpret_cast<uint32_t*>(sq_ptr + swz<D>(r, dt) + 4 * t) =
        pack_bf16(o[dt][0] * i0, o[dt][1] * i0);
    *reinterpret_cast<uint32_t*>(sq_ptr + swz<D>(r + 8, dt) + 4 * t) =
        pack_bf16(o[dt][2] * i1, o[dt][3] * i1);
  }
  __syncwarp();
#pragma unroll
  for (int j = 0; j < 16 * kChunks / 32; ++j) {
    const int c = lane + 32 * j, r = c / kChunks, ch = c % kChunks;
    const int i = tile.i0 + warp * 16 + r;
    if (i < tile.q_len)
      *reinterpret_cast<uint4*>(p.out + (static_cast<int64_t>(tile.q0 + i) * p.hq + h) * D +
                                ch * 8) =
          *reinterpret_cast<const uint4*>(sq_ptr + swz<D>(warp * 16 + r, ch));
  }
}

Status run_mma(const PrefillPlan& plan, const PrefillParams& p, cudaStream_t stream) {
  const PrefillShape& sh = plan.shape;
  return dispatch_head_block(sh.head_dim, sh.block_size, [&]<int D, int BS>() -> Status {
    const bool fp8 = sh.kv_format == KvFormat::kFP8;
    const int smem = fp8 ? prefill_smem_bytes<D, true>() : prefill_smem_bytes<D, false>();
    auto* kern = fp8 ? prefill_mma_kernel<D, BS, true> : prefill_mma_kernel<D, BS, false>;
    CEILING_CUDA_RETURN(
        cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CEILING_CUDA_RETURN(detail::launch_pdl(kern, dim3(sh.num_q_heads, plan.tile_slots),
                                           dim3(kWarps * 32), smem, stream, p));
    return Status::ok_status();
  });
}

}  // namespace

const char* prefill_kernel_name(PrefillKernel kernel) {
  switch (kernel) {
    case PrefillKernel::kAuto:
      return "auto";
    case PrefillKernel::kMmaSync:
      return "mma_sync";
    case PrefillKernel::kWgmma:
      return "wgmma";
    case PrefillKernel::kWgmmaWs:
      return "wgmma_ws";
    case PrefillKernel::kWgmmaTma:
      return "wgmma_tma";
    case PrefillKernel::kWarp:
      return "warp";
  }
  return "?";
}

bool prefill_kernel_available(PrefillKernel kernel, int head_dim, const char** why) {
  if (why) *why = nullptr;
  switch (kernel) {
    case PrefillKernel::kWgmma:
    case PrefillKernel::kWgmmaWs:
      return sm90::prefill_wgmma_available(head_dim, why);
    case PrefillKernel::kWgmmaTma:
      return sm90::prefill_wgmma_available(head_dim, why) && sm90::prefill_tma_available(why);
    case PrefillKernel::kWarp:
      if (warp_kernel_head_dim(head_dim)) return true;
      if (why) *why = "head_dim is not 8, 16, 32 or 64";
      return false;
    case PrefillKernel::kAuto:
      if (head_dim == 64 || head_dim == 128 || warp_kernel_head_dim(head_dim)) return true;
      if (why) *why = "head_dim is not 8, 16, 32, 64 or 128";
      return false;
    case PrefillKernel::kMmaSync:
      break;
  }
  if (head_dim == 64 || head_dim == 128) return true;
  if (why) *why = "head_dim is not 64 or 128";
  return false;
}

Status plan_prefill_attention(const PrefillShape& shape, PrefillPlan* plan) {
  const PrefillShape& sh = shape;
  if (sh.num_seqs < 1 || sh.num_tokens < 0)
    return Status::error("prefill attention: num_seqs {} / num_tokens {} out of range", sh.num_seqs,
                         sh.num_tokens);
  if (sh.num_kv_heads < 1 || sh.num_q_heads < 1 || sh.num_q_heads % sh.num_kv_heads != 0)
    return Status::error("prefill attention: num_q_heads {} is not a multiple of num_kv_heads {}",
                         sh.num_q_heads, sh.num_kv_heads);
  if (sh.block_size < 1)
    return Status::error("prefill attention: block_size {} < 1", sh.block_size);
  PrefillPlan pl;
  pl.shape = sh;
  pl.kernel = sh.kernel;
  const bool tiled = tiled_kernels_take(sh.head_dim, sh.block_size);
  if (pl.kernel == PrefillKernel::kAuto && !tiled) {
    if (!warp_kernel_head_dim(sh.head_dim))
      return Status::error(
          "prefill attention: head_dim {} with block_size {} not built (head_dim 64 or 128 with "
          "block_size 16, 32, 64, 128 or 256; head_dim 8, 16, 32 or 64 with any block size)",
          sh.head_dim, sh.block_size);
    pl.kernel = PrefillKernel::kWarp;
  }
  if (pl.kernel != PrefillKernel::kWarp)
    CEILING_RETURN_IF_ERROR(dispatch_head_block(
        sh.head_dim, sh.block_size, [&]<int D, int BS>() { return Status::ok_status(); }));
  const bool fp8 = sh.kv_format == KvFormat::kFP8;
  if (fp8 && pl.kernel != PrefillKernel::kAuto && pl.kernel != PrefillKernel::kMmaSync &&
      pl.kernel != PrefillKernel::kWarp)
    return Status::error(
        "prefill attention: the {} kernel does not read an fp8 cache (mma_sync does)",
        prefill_kernel_name(pl.kernel));
  if (fp8 && pl.kernel == PrefillKernel::kAuto) pl.kernel = PrefillKernel::kMmaSync;
  if (pl.kernel == PrefillKernel::kAuto)
    pl.kernel =
        prefill_kernel_available(PrefillKernel::kWgmmaTma, sh.head_dim)  ? PrefillKernel::kWgmmaTma
        : prefill_kernel_available(PrefillKernel::kWgmmaWs, sh.head_dim) ? PrefillKernel::kWgmmaWs
                                                                         : PrefillKernel::kMmaSync;
  const char* why = nullptr;
  if (!prefill_kernel_available(pl.kernel, sh.head_dim, &why))
    return Status::error("prefill attention: {} kernel unavailable for head_dim {}: {}",
                         prefill_kernel_name(pl.kernel), sh.head_dim, why ? why : "unknown");
  if (pl.kernel == PrefillKernel::kWarp) {  // a CTA per (token, head): no tiles, no workspace
    pl.block_m = 1;
    *plan = pl;
    return Status::ok_status();
  }
  const bool wgmma = pl.kernel != PrefillKernel::kMmaSync;
  pl.block_m = wgmma ? sm90::kPrefillBlockM : kBM;
  // Σ_s ceil(q_len_s / BM) ≤ ceil(T / BM) + S - 1 for any split of T tokens into S sequences.
  pl.tile_slots = ceil_div(sh.num_tokens, pl.block_m) + sh.num_seqs;
  if (pl.tile_slots > 65535)
    return Status::error("prefill attention: {} query tiles exceed the grid limit 65535",
                         pl.tile_slots);
  *plan = pl;
  return Status::ok_status();
}

Status run_prefill_attention(const PrefillPlan& plan, const void* q, int64_t q_stride,
                             const PagedKvDevice& kv, const AttnBatchDevice& batch, float scale,
                             void* out, void* /*workspace*/, cudaStream_t stream) {
  const PrefillShape& sh = plan.shape;
  if (kv.head_dim != sh.head_dim || kv.block_size != sh.block_size ||
      kv.num_kv_heads != sh.num_kv_heads)
    return Status::error(
        "prefill attention: cache (head_dim {}, block_size {}, kv heads {}) differs from the "
        "plan ({}, {}, {})",
        kv.head_dim, kv.block_size, kv.num_kv_heads, sh.head_dim, sh.block_size, sh.num_kv_heads);
  if (kv.format != sh.kv_format)
    return Status::error("prefill attention: the cache is {} but the plan was made for {}",
                         kv_format_name(kv.format), kv_format_name(sh.kv_format));
  if (batch.num_seqs != sh.num_seqs || batch.num_tokens != sh.num_tokens)
    return Status::error("prefill attention: batch (S {}, T {}) differs from the plan (S {}, T {})",
                         batch.num_seqs, batch.num_tokens, sh.num_seqs, sh.num_tokens);
  if (!q || !kv.k || !kv.v || !batch.query_start || !batch.seq_lens || !batch.block_tables || !out)
    return Status::error("prefill attention: null device pointer");
  if (batch.max_blocks < 1 || kv.num_blocks < 1)
    return Status::error("prefill attention: max_blocks {} / num_blocks {} < 1", batch.max_blocks,
                         kv.num_blocks);
  CEILING_RETURN_IF_ERROR(
      check_q_stride("prefill attention", q_stride, sh.num_q_heads, sh.head_dim));
  if (sh.num_tokens == 0) return Status::ok_status();
  if (plan.kernel == PrefillKernel::kWarp)
    return run_warp_attention(q, q_stride, kv, batch.query_start, batch.seq_lens,
                              batch.block_tables, batch.max_blocks, sh.num_seqs, sh.num_tokens,
                              sh.num_q_heads, scale, out, stream);

  PrefillParams p{};
  p.q = static_cast<const __nv_bfloat16*>(q);
  p.q_stride = q_stride;
  p.k = static_cast<const __nv_bfloat16*>(kv.k);
  p.v = static_cast<const __nv_bfloat16*>(kv.v);
  p.out = static_cast<__nv_bfloat16*>(out);
  p.query_start = batch.query_start;
  p.seq_lens = batch.seq_lens;
  p.block_tables = batch.block_tables;
  p.num_seqs = sh.num_seqs;
  p.max_blocks = batch.max_blocks;
  p.num_blocks = kv.num_blocks;
  p.hq = sh.num_q_heads;
  p.hkv = sh.num_kv_heads;
  p.group = sh.num_q_heads / sh.num_kv_heads;
  const bool fp8 = kv.format == KvFormat::kFP8;
  p.scale_log2 = scale * kLog2e * (fp8 ? kv.k_scale : 1.0f);
  p.out_scale = fp8 ? kv.v_scale : 1.0f;
  if (plan.kernel == PrefillKernel::kWgmmaWs || plan.kernel == PrefillKernel::kWgmmaTma)
    return sm90::run_prefill_wgmma_ws(p, sh.head_dim, sh.block_size, sh.num_q_heads,
                                      plan.tile_slots, plan.kernel == PrefillKernel::kWgmmaTma,
                                      stream);
  if (plan.kernel == PrefillKernel::kWgmma)
    return sm90::run_prefill_wgmma(p, sh.head_dim, sh.block_size, sh.num_q_heads, plan.tile_slots,
                                   stream);
  return run_mma(plan, p, stream);
}

}  // namespace ceiling::cuda
