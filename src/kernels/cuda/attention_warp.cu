// The warp attention kernel: paged causal GQA attention (decode and varlen prefill, meaning
// cpu::attention) for the head dims and block sizes the tiled kernels do not take — head_dim 8,
// 16, 32 (stories260K, the tiny test presets) and 64 with any block size, over a bf16 or fp8
// cache. plan_decode_attention / plan_prefill_attention pick it (attention.h).
//
// A CTA of 4 warps per (token, query head): the context's keys strided over its 128 threads,
// each an online softmax (exp2, scores pre-scaled by log2 e) over its keys with q and its
// accumulator in registers (2·D floats), merged across the lanes by shuffles and across the warps
// through shared memory. Every K/V row is read by the group's query heads (GQA) from L1/L2 and the
// prefill's tokens re-read their prefix: no tiling, no tensor cores. For small models, where a
// step is launch-bound anyway.
//
// Prediction for the bench cases (r54 measured the first version, one warp per (token, head):
// 23.1 µs for stories260K's heads decoding 64 sequences at context 1024 (8.4 MB of K/V, 2.8 µs at
// 3 TB/s), 52.3 µs for head_dim 32 at batch 16 — 128 warps for the whole GPU; SDPA's math path
// took 13.3 and 7.8 µs). Each thread walks its keys in sequence, a block-table load then
// dependent K and V loads per key: with 4 warps the chains are 4× shorter (8 keys a thread at
// context 1024) and 4× as many warps are resident, so ~4× faster where the chains dominate:
// ~6 µs and ~13 µs. Measured (r54b): 10.4 and 11.9 µs, SDPA 13.5 and 7.9 (bench/attention_notes.md,
// Run 54: the merge through shared memory is not priced).

#include <cuda_fp16.h>

#include <cmath>

#include "core/check.h"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/fp8.cuh"
#include "kernels/cuda/pdl.cuh"

namespace ceiling::cuda::attn {
namespace {

// Shapes as attention.h's; fp8 values are read as stored (the k scale folded into scale_log2, the
// v scale into out_scale, as the tiled kernels).
struct WarpAttnParams {
  const __nv_bfloat16* q = nullptr;  // [T, Hq, D], rows q_stride elements apart
  int64_t q_stride = 0;
  const void* k = nullptr;  // [num_blocks, Hkv, block_size, D] bf16, or E4M3 bytes (fp8)
  const void* v = nullptr;
  __nv_bfloat16* out = nullptr;          // [T, Hq, D]
  const int32_t* query_start = nullptr;  // [S+1] absolute rows; null: decode, row s is sequence s's
  const int32_t* seq_lens = nullptr;     // [S]
  const int32_t* block_tables = nullptr;  // [S, max_blocks]
  int num_seqs = 0, num_tokens = 0, max_blocks = 0, num_blocks = 0, block_size = 0;
  int hq = 0, hkv = 0, head_dim = 0;
  bool fp8 = false;
  float scale_log2 = 0, out_scale = 1;
};

constexpr int kWarps = 4;  // a CTA per (token, query head)

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Eight cache values from element offset off as fp32 (fp8: the stored E4M3 values, unscaled).
template <bool kFp8>
__device__ __forceinline__ void load8(const void* cache, int64_t off, float (&f)[8]) {
  if constexpr (kFp8) {
    const uint2 w = *reinterpret_cast<const uint2*>(static_cast<const uint8_t*>(cache) + off);
    const uint4 h = detail::fp8x8_f16(w.x, w.y);
    const uint32_t hw[4] = {h.x, h.y, h.z, h.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 p = __half22float2(*reinterpret_cast<const __half2*>(&hw[i]));
      f[2 * i] = p.x;
      f[2 * i + 1] = p.y;
    }
  } else {
    detail::to_float8(detail::as_bf16x8(*reinterpret_cast<const uint4*>(
                          static_cast<const __nv_bfloat16*>(cache) + off)),
                      f);
  }
}

template <int D, bool kFp8>
__global__ void __launch_bounds__(kWarps * 32) warp_attention_kernel(WarpAttnParams p) {
  __shared__ float part_m[kWarps], part_l[kWarps], part_acc[kWarps][D];
  detail::pdl_launch_dependents();
  detail::pdl_wait();
  // The row in q and out: a varlen batch's rows start at query_start[0] (a sub-batch of a step).
  const int t = blockIdx.x / p.hq + (p.query_start ? p.query_start[0] : 0), h = blockIdx.x % p.hq;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int s = t, first = t;  // decode: token s is sequence s's one new token
  if (p.query_start) {   // the largest s with query_start[s] <= t
    int lo = 0, hi = p.num_seqs - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (p.query_start[mid] <= t)
        lo = mid;
      else
        hi = mid - 1;
    }
    s = lo;
    first = p.query_start[s];
  }
  const int q_len = p.query_start ? p.query_start[s + 1] - first : 1;
  const int keys = p.seq_lens[s] - q_len + (t - first) + 1;  // this token sees keys [0, keys)
  const int hk = h / (p.hq / p.hkv);
  const int32_t* table = p.block_tables + static_cast<int64_t>(s) * p.max_blocks;

  float q[D], acc[D];
  const __nv_bfloat16* qp = p.q + t * p.q_stride + static_cast<int64_t>(h) * D;
#pragma unroll
  for (int d = 0; d < D; ++d) {
    q[d] = __bfloat162float(qp[d]) * p.scale_log2;
    acc[d] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int j = threadIdx.x; j < keys; j += kWarps * 32) {
    const int blk = table[j / p.block_size];
    const bool ok = blk >= 0 && blk < p.num_blocks;  // outside: reads as zeros
    const int64_t off =
        ((static_cast<int64_t>(ok ? blk : 0) * p.hkv + hk) * p.block_size + j % p.block_size) * D;
    float score = 0.0f;
#pragma unroll
    for (int c = 0; c < D / 8; ++c) {
      float k[8] = {};
      if (ok) load8<kFp8>(p.k, off + 8 * c, k);
#pragma unroll
      for (int e = 0; e < 8; ++e) score += q[8 * c + e] * k[e];
    }
    const float m_new = fmaxf(m, score);
    const float corr = exp2f(m - m_new), pj = exp2f(score - m_new);
    l = l * corr + pj;
#pragma unroll
    for (int c = 0; c < D / 8; ++c) {
      float v[8] = {};
      if (ok) load8<kFp8>(p.v, off + 8 * c, v);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[8 * c + e] = acc[8 * c + e] * corr + pj * v[e];
    }
    m = m_new;
  }
  // Lanes, then warps: each partial rescaled to the common maximum (no key: weight 0).
  const float m_w = warp_max(m);
  const float f = m == -INFINITY ? 0.0f : exp2f(m - m_w);
  const float l_w = warp_sum(l * f);
#pragma unroll
  for (int d = 0; d < D; ++d) {
    const float v = warp_sum(acc[d] * f);
    if (d % 32 == lane) part_acc[warp][d] = v;
  }
  if (lane == 0) {
    part_m[warp] = m_w;
    part_l[warp] = l_w;
  }
  __syncthreads();
  if (warp != 0) return;
  float m_all = -INFINITY;
#pragma unroll
  for (int i = 0; i < kWarps; ++i) m_all = fmaxf(m_all, part_m[i]);
  float wt[kWarps], l_all = 0.0f;
#pragma unroll
  for (int i = 0; i < kWarps; ++i) {
    wt[i] = part_m[i] == -INFINITY ? 0.0f : exp2f(part_m[i] - m_all);
    l_all += part_l[i] * wt[i];
  }
  const float inv = l_all > 0.0f ? p.out_scale / l_all : 0.0f;  // no key at all: zeros
  __nv_bfloat16* op = p.out + (static_cast<int64_t>(t) * p.hq + h) * D;
  for (int d = lane; d < D; d += 32) {
    float v = 0.0f;
#pragma unroll
    for (int i = 0; i < kWarps; ++i) v += part_acc[i][d] * wt[i];
    op[d] = __float2bfloat16_rn(v * inv);
  }
}

template <int D>
cudaError_t launch(const WarpAttnParams& p, cudaStream_t stream) {
  auto* kern = p.fp8 ? warp_attention_kernel<D, true> : warp_attention_kernel<D, false>;
  return detail::launch_pdl(kern, dim3(p.num_tokens * p.hq), dim3(kWarps * 32), 0, stream, p);
}

}  // namespace

bool warp_kernel_head_dim(int head_dim) {
  return head_dim == 8 || head_dim == 16 || head_dim == 32 || head_dim == 64;
}

Status run_warp_attention(const void* q, int64_t q_stride, const PagedKvDevice& kv,
                          const int32_t* query_start, const int32_t* seq_lens,
                          const int32_t* block_tables, int max_blocks, int num_seqs, int num_tokens,
                          int num_q_heads, float scale, void* out, cudaStream_t stream) {
  if (num_tokens == 0) return Status::ok_status();
  WarpAttnParams p;
  p.q = static_cast<const __nv_bfloat16*>(q);
  p.q_stride = q_stride;
  p.k = kv.k;
  p.v = kv.v;
  p.out = static_cast<__nv_bfloat16*>(out);
  p.query_start = query_start;
  p.seq_lens = seq_lens;
  p.block_tables = block_tables;
  p.num_seqs = num_seqs;
  p.num_tokens = num_tokens;
  p.max_blocks = max_blocks;
  p.num_blocks = kv.num_blocks;
  p.block_size = kv.block_size;
  p.hq = num_q_heads;
  p.hkv = kv.num_kv_heads;
  p.head_dim = kv.head_dim;
  p.fp8 = kv.format == KvFormat::kFP8;
  p.scale_log2 = scale * kLog2e * (p.fp8 ? kv.k_scale : 1.0f);
  p.out_scale = p.fp8 ? kv.v_scale : 1.0f;
  switch (p.head_dim) {
    case 8:
      CEILING_CUDA_RETURN(launch<8>(p, stream));
      break;
    case 16:
      CEILING_CUDA_RETURN(launch<16>(p, stream));
      break;
    case 32:
      CEILING_CUDA_RETURN(launch<32>(p, stream));
      break;
    case 64:
      CEILING_CUDA_RETURN(launch<64>(p, stream));
      break;
    default:
      return Status::error("attention: the warp kernel takes head_dim 8, 16, 32 or 64, not {}",
                           p.head_dim);
  }
  return Status::ok_status();
}

}  // namespace ceiling::cuda::attn

namespace ceiling::cuda {

bool attention_head_dim_supported(int head_dim) {
  return head_dim == 128 || attn::warp_kernel_head_dim(head_dim);
}

}  // namespace ceiling::cuda
