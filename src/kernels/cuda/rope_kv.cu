#include <algorithm>

#include "core/check.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/rope_kv.h"

namespace ceiling::cuda {
namespace {

using detail::bf16;

// One CTA per token. The token's cos/sin table [D/2] is computed once into shared memory; then
// each head (Hq query heads, then Hkv key/value heads) is handled by `L` consecutive lanes
// (L = next power of two ≥ D/16): lane j holds elements [8j, 8j+8) and [D/2+8j, D/2+8j+8).
// A task's inputs: 8 elements of each half of the head, and of v for a KV head.
struct TaskIn {
  detail::Bf16x8 x1, x2, v1, v2;
};

__device__ __forceinline__ TaskIn load_task(const RopeKvArgs& a, int t, int h, int i0, bool on) {
  TaskIn in{};
  if (!on) return in;
  const int half = a.D / 2;
  if (h < a.Hq) {
    const bf16* src = a.q + t * a.q_stride + static_cast<int64_t>(h) * a.D;
    in.x1 = detail::load8(src + i0);
    in.x2 = detail::load8(src + half + i0);
  } else {
    const int hk = h - a.Hq;
    const bf16* src = a.k + t * a.k_stride + static_cast<int64_t>(hk) * a.D;
    const bf16* vsrc = a.v + t * a.v_stride + static_cast<int64_t>(hk) * a.D;
    in.x1 = detail::load8(src + i0);
    in.x2 = detail::load8(src + half + i0);
    in.v1 = detail::load8(vsrc + i0);
    in.v2 = detail::load8(vsrc + half + i0);
  }
  return in;
}

// One CTA per token. The token's cos/sin table [D/2] is computed once into shared memory (while
// the first heads' loads are in flight); then each head (Hq query heads, then Hkv key/value
// heads) is handled by `L` consecutive lanes (L = next power of two ≥ D/16): lane j holds
// elements [8j, 8j+8) and [D/2+8j, D/2+8j+8).
template <int L>
__global__ void rope_kv_kernel(RopeKvArgs a) {
  extern __shared__ float table[];  // cos [D/2], then sin [D/2]
  const int t = blockIdx.x, half = a.D / 2;
  const int lane = threadIdx.x % L, tasks = a.Hq + a.Hkv, per_iter = blockDim.x / L;
  const bool lane_on = lane * 16 < a.D;  // lanes past D/16 idle (D/16 not a power of two)
  const int i0 = lane * 8;
  const int h_first = threadIdx.x / L;
  TaskIn in = load_task(a, t, h_first, i0, h_first < tasks && lane_on);

  const float pos = static_cast<float>(a.positions[t]);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    float s, c;
    sincosf(pos * a.inv_freq[i], &s, &c);
    table[i] = c;
    table[half + i] = s;
  }
  __syncthreads();

  const int64_t slot = a.slot_mapping[t];
  const int64_t num_slots = static_cast<int64_t>(a.num_blocks) * a.block_size;
  const bool write = slot >= 0 && slot < num_slots;

  // Trip count is uniform across the block, so every lane reaches the shuffles.
  for (int base = 0; base < tasks; base += per_iter) {
    const int h = base + h_first;
    const bool on = h < tasks && lane_on;
    const bool is_q = h < a.Hq;
    const int hk = h - a.Hq;
    if (base > 0) in = load_task(a, t, h, i0, on);
    float x1[8], x2[8];
    detail::to_float8(in.x1, x1);
    detail::to_float8(in.x2, x2);
    if (!on) {
#pragma unroll
      for (int e = 0; e < 8; ++e) x1[e] = x2[e] = 0.0f;
    }
    const bf16* norm_w = is_q ? a.q_norm_w : a.k_norm_w;
    if (a.q_norm_w) {  // per-head RMSNorm over the L lanes of this head
      float ss = 0.0f;
#pragma unroll
      for (int e = 0; e < 8; ++e) ss += x1[e] * x1[e] + x2[e] * x2[e];
#pragma unroll
      for (int o = L / 2; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
      if (on) {
        const float inv = rsqrtf(ss / static_cast<float>(a.D) + a.norm_eps);
        float w1[8], w2[8];
        detail::to_float8(detail::load8(norm_w + i0), w1);
        detail::to_float8(detail::load8(norm_w + half + i0), w2);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          x1[e] *= inv * w1[e];
          x2[e] *= inv * w2[e];
        }
      }
    }
    if (!on) continue;
    float y1[8], y2[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float c = table[i0 + e], s = table[half + i0 + e];
      y1[e] = x1[e] * c - x2[e] * s;
      y2[e] = x2[e] * c + x1[e] * s;
    }
    const detail::Bf16x8 o1 = detail::from_float8(y1), o2 = detail::from_float8(y2);
    if (is_q) {
      bf16* dst = a.q + t * a.q_stride + static_cast<int64_t>(h) * a.D;
      detail::store8(dst + i0, o1);
      detail::store8(dst + half + i0, o2);
    } else if (write) {
      const int64_t block = slot / a.block_size, row = slot % a.block_size;
      const int64_t off = ((block * a.Hkv + hk) * a.block_size + row) * a.D;
      detail::store8(a.k_cache + off + i0, o1);
      detail::store8(a.k_cache + off + half + i0, o2);
      detail::store8(a.v_cache + off + i0, in.v1);
      detail::store8(a.v_cache + off + half + i0, in.v2);
    }
  }
}

}  // namespace

Status rope_kv_write(const RopeKvArgs& a, cudaStream_t stream) {
  if (a.T < 0 || a.Hq < 0 || a.Hkv <= 0 || a.block_size <= 0 || a.num_blocks <= 0)
    return Status::error("rope_kv_write: bad shape T {} Hq {} Hkv {} block_size {} num_blocks {}",
                         a.T, a.Hq, a.Hkv, a.block_size, a.num_blocks);
  if (a.D % 16 != 0 || a.D <= 0 || a.D > 512)
    return Status::error("rope_kv_write: head_dim {} not supported (a multiple of 16, at most 512)",
                         a.D);
  if ((a.q_norm_w == nullptr) != (a.k_norm_w == nullptr))
    return Status::error("rope_kv_write: q_norm_w and k_norm_w must be given together");
  const void* ptrs[] = {a.q, a.k, a.v, a.k_cache, a.v_cache};
  for (const void* p : ptrs)
    if (!detail::aligned16(p))
      return Status::error("rope_kv_write: pointer {} not 16-byte aligned", p);
  if (a.q_norm_w && (!detail::aligned16(a.q_norm_w) || !detail::aligned16(a.k_norm_w)))
    return Status::error("rope_kv_write: q/k norm weights not 16-byte aligned");
  if (a.q_stride % 8 || a.k_stride % 8 || a.v_stride % 8)
    return Status::error("rope_kv_write: strides q {} k {} v {} must be multiples of 8 elements",
                         a.q_stride, a.k_stride, a.v_stride);
  if (a.T == 0) return Status();
  const int lanes = a.D / 16;
  const int L = lanes <= 4 ? 4 : lanes <= 8 ? 8 : lanes <= 16 ? 16 : 32;
  const int threads = std::min(512, std::max(64, (a.Hq + a.Hkv) * L + 31) / 32 * 32);
  const size_t smem = sizeof(float) * a.D;
  switch (L) {
    case 4:
      rope_kv_kernel<4><<<a.T, threads, smem, stream>>>(a);
      break;
    case 8:
      rope_kv_kernel<8><<<a.T, threads, smem, stream>>>(a);
      break;
    case 16:
      rope_kv_kernel<16><<<a.T, threads, smem, stream>>>(a);
      break;
    default:
      rope_kv_kernel<32><<<a.T, threads, smem, stream>>>(a);
      break;
  }
  CEILING_CUDA_RETURN_LAST();
  return Status();
}

}  // namespace ceiling::cuda
