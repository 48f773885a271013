// TEMPORARY (engine_kernels.h says what retires it): paged causal GQA attention for head dims and
// block sizes the library kernels do not take. Correct first, not fast: one warp per (token,
// query head), keys strided over the lanes with an online softmax per lane, merged at the end.
#include <cmath>

#include "core/check.h"
#include "engine/cuda/engine_kernels.h"

namespace ceiling::engine::cuda_impl {
namespace {

constexpr int kWarps = 4;

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

template <int D>
__global__ void __launch_bounds__(kWarps * 32) attn_fallback_kernel(FallbackAttnArgs a) {
  const int w = blockIdx.x * kWarps + threadIdx.x / 32, lane = threadIdx.x & 31;
  if (w >= a.T * a.Hq) return;  // whole warps leave together
  const int t = w / a.Hq, h = w % a.Hq;
  // Sequence of token t: the largest s with query_start[s] <= t.
  int lo = 0, hi = a.S - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (a.query_start[mid] <= t)
      lo = mid;
    else
      hi = mid - 1;
  }
  const int s = lo, q0 = a.query_start[s], q_len = a.query_start[s + 1] - q0;
  const int pos = a.seq_lens[s] - q_len + (t - q0);  // this token sees keys 0..pos
  const int hk = h / (a.Hq / a.Hkv);
  const int32_t* table = a.block_tables + static_cast<int64_t>(s) * a.max_blocks;

  float q[D], acc[D];
  const bf16* qp = a.q + (static_cast<int64_t>(t) * a.Hq + h) * D;
#pragma unroll
  for (int d = 0; d < D; ++d) {
    q[d] = __bfloat162float(qp[d]) * a.scale;
    acc[d] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int j = lane; j <= pos; j += 32) {
    const int blk = table[j / a.block_size];
    const bool ok = blk >= 0 && blk < a.num_blocks;
    const int64_t base =
        ((static_cast<int64_t>(ok ? blk : 0) * a.Hkv + hk) * a.block_size + j % a.block_size) * D;
    float score = 0.0f;
#pragma unroll
    for (int d = 0; d < D; ++d) score += q[d] * (ok ? __bfloat162float(a.k_cache[base + d]) : 0.0f);
    const float m_new = fmaxf(m, score);
    const float corr = expf(m - m_new), p = expf(score - m_new);
    l = l * corr + p;
#pragma unroll
    for (int d = 0; d < D; ++d)
      acc[d] = acc[d] * corr + p * (ok ? __bfloat162float(a.v_cache[base + d]) : 0.0f);
    m = m_new;
  }
  const float m_all = warp_max(m);
  const float f = m == -INFINITY ? 0.0f : expf(m - m_all);  // lanes that saw no key add nothing
  const float l_all = warp_sum(l * f);
  bf16* op = a.out + (static_cast<int64_t>(t) * a.Hq + h) * D;
#pragma unroll
  for (int d = 0; d < D; ++d) {
    const float v = warp_sum(acc[d] * f);
    if (d % 32 == lane) op[d] = __float2bfloat16_rn(v / l_all);
  }
}

template <int D>
void launch(const FallbackAttnArgs& a, cudaStream_t stream) {
  const int warps = a.T * a.Hq;
  attn_fallback_kernel<D><<<(warps + kWarps - 1) / kWarps, kWarps * 32, 0, stream>>>(a);
}

}  // namespace

bool fallback_attention_supports(int head_dim) {
  return head_dim == 8 || head_dim == 16 || head_dim == 32 || head_dim == 64;
}

Status fallback_attention(const FallbackAttnArgs& a, cudaStream_t stream) {
  if (a.S <= 0 || a.T < 0 || a.Hq <= 0 || a.Hkv <= 0 || a.Hq % a.Hkv != 0 || a.block_size <= 0 ||
      a.max_blocks <= 0)
    return Status::error(
        "fallback attention: bad shape S {} T {} Hq {} Hkv {} block_size {} max_blocks {}", a.S,
        a.T, a.Hq, a.Hkv, a.block_size, a.max_blocks);
  if (a.T == 0) return Status();
  switch (a.D) {
    case 8:
      launch<8>(a, stream);
      break;
    case 16:
      launch<16>(a, stream);
      break;
    case 32:
      launch<32>(a, stream);
      break;
    case 64:
      launch<64>(a, stream);
      break;
    default:
      return Status::error("fallback attention: head_dim {} not built (8, 16, 32, 64)", a.D);
  }
  CEILING_CUDA_RETURN_LAST();
  return Status();
}

}  // namespace ceiling::engine::cuda_impl
