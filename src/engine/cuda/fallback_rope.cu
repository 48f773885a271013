// TEMPORARY (engine_kernels.h says what retires it): RoPE + paged K/V write for head dims the
// library kernel does not take (D % 16 != 0). Meaning: cpu::rope then cpu::kv_write.
#include "core/check.h"
#include "engine/cuda/engine_kernels.h"

namespace ceiling::engine::cuda_impl {
namespace {

constexpr int kThreads = 128;

// grid T: block t rotates token t's Hq query heads in place, writes its Hkv rotated key heads and
// value heads into the cache at slot_mapping[t] (skipped when the slot is negative or too large).
__global__ void rope_kv_fallback_kernel(cuda::RopeKvArgs a) {
  const int t = blockIdx.x, half = a.D / 2;
  const float pos = static_cast<float>(a.positions[t]);
  const int64_t slot = a.slot_mapping[t];
  const bool write = slot >= 0 && slot < static_cast<int64_t>(a.num_blocks) * a.block_size;
  const int64_t block = write ? slot / a.block_size : 0, row = write ? slot % a.block_size : 0;
  auto cache_at = [&](bf16* cache, int hk) {
    return cache + ((block * a.Hkv + hk) * a.block_size + row) * a.D;
  };
  for (int p = threadIdx.x; p < (a.Hq + a.Hkv) * half; p += blockDim.x) {
    const int h = p / half, i = p % half;
    float s, c;
    sincosf(pos * a.inv_freq[i], &s, &c);
    if (h < a.Hq) {
      bf16* x = a.q + t * a.q_stride + static_cast<int64_t>(h) * a.D;
      const float x0 = __bfloat162float(x[i]), x1 = __bfloat162float(x[i + half]);
      x[i] = __float2bfloat16_rn(x0 * c - x1 * s);
      x[i + half] = __float2bfloat16_rn(x1 * c + x0 * s);
    } else if (write) {
      const int hk = h - a.Hq;
      const bf16* x = a.k + t * a.k_stride + static_cast<int64_t>(hk) * a.D;
      const float x0 = __bfloat162float(x[i]), x1 = __bfloat162float(x[i + half]);
      bf16* dst = cache_at(static_cast<bf16*>(a.k_cache), hk);
      dst[i] = __float2bfloat16_rn(x0 * c - x1 * s);
      dst[i + half] = __float2bfloat16_rn(x1 * c + x0 * s);
    }
  }
  if (!write) return;
  for (int e = threadIdx.x; e < a.Hkv * a.D; e += blockDim.x) {
    const int hk = e / a.D, d = e % a.D;
    cache_at(static_cast<bf16*>(a.v_cache), hk)[d] = a.v[t * a.v_stride + e];
  }
}

}  // namespace

Status fallback_rope_kv_write(const cuda::RopeKvArgs& a, cudaStream_t stream) {
  if (a.T < 0 || a.Hq <= 0 || a.Hkv <= 0 || a.D <= 0 || a.D % 2 != 0 || a.block_size <= 0)
    return Status::error("fallback rope_kv_write: bad shape T {} Hq {} Hkv {} D {} block_size {}",
                         a.T, a.Hq, a.Hkv, a.D, a.block_size);
  if (a.q_norm_w || a.k_norm_w)
    return Status::error("fallback rope_kv_write: the q/k norm is not fused here");
  if (a.kv_format != cuda::KvFormat::kBF16)
    return Status::error("fallback rope_kv_write: writes a bf16 cache only");
  if (a.T == 0) return Status();
  rope_kv_fallback_kernel<<<a.T, kThreads, 0, stream>>>(a);
  CEILING_CUDA_RETURN_LAST();
  return Status();
}

}  // namespace ceiling::engine::cuda_impl
