#include <algorithm>

#include "core/check.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/rope_kv.h"

namespace ceiling::cuda {
namespace {

using detail::bf16;

// One CTA per token, W warps. A token has Hq + 2·Hkv tasks: the q heads (normed, rotated in
// place), the k heads (normed, rotated, written to k_cache) and the v heads (copied to v_cache).
// A task is one head of D elements handled by L consecutive lanes (L = next power of two
// ≥ D/16): lane j holds elements [8j, 8j+8) and [D/2+8j, D/2+8j+8); a warp covers P = 32/L
// tasks at a time. Warp w takes tasks (u·W + w)·P + slot for u < U: all U loads of a thread are
// issued before the token's position is used, so a CTA keeps its whole token (12 KB for
// Llama-3.1-8B) in flight while the cos/sin table [D/2] is computed into shared memory.
// U = 1 for decode-sized T (every load of the token in one round trip over more warps), U = 4 at
// prefill sizes (fewer threads per token, more tokens per SM).
struct TaskRef {
  int kind;  // 0 q, 1 k, 2 v
  int head;  // within its kind
};

__device__ __forceinline__ TaskRef task_of(int h, int Hq, int Hkv) {
  if (h < Hq) return {0, h};
  if (h < Hq + Hkv) return {1, h - Hq};
  return {2, h - Hq - Hkv};
}

__device__ __forceinline__ const bf16* task_src(const RopeKvArgs& a, int64_t t, TaskRef r) {
  if (r.kind == 0) return a.q + t * a.q_stride + static_cast<int64_t>(r.head) * a.D;
  if (r.kind == 1) return a.k + t * a.k_stride + static_cast<int64_t>(r.head) * a.D;
  return a.v + t * a.v_stride + static_cast<int64_t>(r.head) * a.D;
}

template <int L, int U>
__global__ void rope_kv_kernel(RopeKvArgs a, int W) {
  extern __shared__ float table[];  // cos [D/2], then sin [D/2]
  constexpr int P = 32 / L;
  detail::pdl_launch_dependents();
  const int64_t t = blockIdx.x;
  const int half = a.D / 2, tasks = a.Hq + 2 * a.Hkv;
  const int warp = threadIdx.x / 32, slot_in_warp = (threadIdx.x % 32) / L, j = threadIdx.x % L;
  const bool lane_on = j * 16 < a.D;  // lanes past D/16 idle (D/16 not a power of two)
  const int i0 = j * 8;

  // Constants (no kernel of the step writes them) may be read before the wait: the norm weights.
  const bool norm = a.q_norm_w != nullptr;
  detail::Bf16x8 nq1{}, nq2{}, nk1{}, nk2{};
  if (norm && lane_on) {
    nq1 = detail::load8(a.q_norm_w + i0);
    nq2 = detail::load8(a.q_norm_w + half + i0);
    nk1 = detail::load8(a.k_norm_w + i0);
    nk2 = detail::load8(a.k_norm_w + half + i0);
  }
  detail::pdl_wait();

  const float pos = static_cast<float>(a.positions[t]);
  const int64_t slot = a.slot_mapping[t];
  const int64_t num_slots = static_cast<int64_t>(a.num_blocks) * a.block_size;
  const bool write = slot >= 0 && slot < num_slots;
  const int64_t cache_block = write ? slot / a.block_size : 0, cache_row = slot % a.block_size;
  bool table_ready = false;

  // Trip counts are uniform across the block, so every lane reaches the shuffles and barrier.
  for (int base = 0; base < tasks; base += U * W * P) {
    detail::Bf16x8 x1[U], x2[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int h = base + (u * W + warp) * P + slot_in_warp;
      if (h < tasks && lane_on) {
        const bf16* src = task_src(a, t, task_of(h, a.Hq, a.Hkv));
        x1[u] = detail::load8(src + i0);
        x2[u] = detail::load8(src + half + i0);
      }
    }
    if (!table_ready) {  // while the first loads are in flight
      for (int f = threadIdx.x; f < half; f += blockDim.x) {
        float s, c;
        sincosf(pos * a.inv_freq[f], &s, &c);
        table[f] = c;
        table[half + f] = s;
      }
      __syncthreads();
      table_ready = true;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int h = base + (u * W + warp) * P + slot_in_warp;
      const bool on = h < tasks && lane_on;
      const TaskRef r = task_of(h, a.Hq, a.Hkv);
      float v1[8], v2[8];
      detail::to_float8(x1[u], v1);
      detail::to_float8(x2[u], v2);
      if (!on) {
#pragma unroll
        for (int e = 0; e < 8; ++e) v1[e] = v2[e] = 0.0f;
      }
      if (norm) {  // per-head RMSNorm over the L lanes of this head (all lanes shuffle)
        float ss = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; ++e) ss += v1[e] * v1[e] + v2[e] * v2[e];
#pragma unroll
        for (int o = L / 2; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        if (r.kind != 2) {
          const float inv = rsqrtf(ss / static_cast<float>(a.D) + a.norm_eps);
          float w1[8], w2[8];
          detail::to_float8(r.kind == 0 ? nq1 : nk1, w1);
          detail::to_float8(r.kind == 0 ? nq2 : nk2, w2);
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            v1[e] *= inv * w1[e];
            v2[e] *= inv * w2[e];
          }
        }
      }
      if (!on) continue;
      if (r.kind == 2) {  // v: a bit-exact copy
        if (write) {
          const int64_t off = ((cache_block * a.Hkv + r.head) * a.block_size + cache_row) * a.D;
          detail::store8(a.v_cache + off + i0, x1[u]);
          detail::store8(a.v_cache + off + half + i0, x2[u]);
        }
        continue;
      }
      float y1[8], y2[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float c = table[i0 + e], s = table[half + i0 + e];
        y1[e] = v1[e] * c - v2[e] * s;
        y2[e] = v2[e] * c + v1[e] * s;
      }
      const detail::Bf16x8 o1 = detail::from_float8(y1), o2 = detail::from_float8(y2);
      if (r.kind == 0) {
        bf16* dst = a.q + t * a.q_stride + static_cast<int64_t>(r.head) * a.D;
        detail::store8(dst + i0, o1);
        detail::store8(dst + half + i0, o2);
      } else if (write) {
        const int64_t off = ((cache_block * a.Hkv + r.head) * a.block_size + cache_row) * a.D;
        detail::store8(a.k_cache + off + i0, o1);
        detail::store8(a.k_cache + off + half + i0, o2);
      }
    }
  }
}

template <int L>
cudaError_t launch(const RopeKvArgs& a, cudaStream_t stream) {
  constexpr int P = 32 / L;
  const int warp_tasks = (a.Hq + 2 * a.Hkv + P - 1) / P;  // warp-iterations of one token
  const size_t smem = sizeof(float) * a.D;
  // Prefill sizes: four tasks a thread; decode sizes: one, over up to 32 warps.
  if (a.T >= 512) {
    const int W = std::min(32, (warp_tasks + 3) / 4);
    return detail::launch_pdl(rope_kv_kernel<L, 4>, dim3(a.T), dim3(W * 32), smem, stream, a, W);
  }
  const int W = std::min(32, warp_tasks);
  return detail::launch_pdl(rope_kv_kernel<L, 1>, dim3(a.T), dim3(W * 32), smem, stream, a, W);
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
  switch (lanes <= 4 ? 4 : lanes <= 8 ? 8 : lanes <= 16 ? 16 : 32) {
    case 4:
      CEILING_CUDA_RETURN(launch<4>(a, stream));
      break;
    case 8:
      CEILING_CUDA_RETURN(launch<8>(a, stream));
      break;
    case 16:
      CEILING_CUDA_RETURN(launch<16>(a, stream));
      break;
    default:
      CEILING_CUDA_RETURN(launch<32>(a, stream));
      break;
  }
  return Status();
}

}  // namespace ceiling::cuda
