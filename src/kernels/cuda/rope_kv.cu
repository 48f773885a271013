// RoPE + paged KV write kernel and its dispatch; the meaning is in rope_kv.h.
//
// Prefill (T = 4096, Hq = 32, Hkv = 8, D = 128, H200), prediction and measurement:
//   Bytes a token: q read and written in place (2 × 8 KB), k and v read (2 × 2 KB), k and v
//   written into the cache (2 × 2 KB, 16 rows of 256 B): 24 KB, half writes; 100.7 MB in all.
//   At the measured read ceiling (4.55 TB/s) 22.1 µs; a device-to-device copy (also half writes)
//   runs at ~94 % of it, so ~23.5 µs is the practical floor; the target (85 % of read) is 26 µs.
//   Little's law: 4.55 TB/s × ~1 µs loaded latency = 4.5 MB in flight, ~35 KB of reads per SM.
//   First kernel: a CTA a token (3 warps, 4 tasks a thread: 12 KB of reads held in registers),
//   80 registers → 8 CTAs per SM, ≤ 96 KB per SM. Measured 32.5 µs, 68 % (q/k norm 34.8, 64 %).
//   This kernel: the loads staged in shared memory by cp.async (no registers held while in
//   flight: 40 registers, 58 with the q/k norm), so 16 tokens fit an SM (16 CTAs of one token or
//   8 of two): ≤ 192 KB per SM, 2× the first kernel and ~5× Little. Predicted, if the bytes in
//   flight and the CTA turnover were the limit, 25–27 µs (82–88 %). Measured
//   (bench/results/2026-11-23r4_h200_kernels.json, same run): plain stores 31.6 µs (68.5 %,
//   rope_kv_write_cfg tok1u4: no gain), consecutive slots as fast as random ones; evict-first
//   (.cs) stores of q and the cache rows 30.2 µs (71.6 %), the dispatched prefill configuration.
//   So neither the bytes in flight, the turnover nor the scattered cache rows limit it; the
//   target is not met (presumably the DRAM side of a half-write pattern with an in-place half;
//   not profiled further). Decode sizes keep plain stores: attention reads q and the new cache
//   rows next, from L2 when they are still there.
#include <algorithm>

#include "core/check.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/fp8.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/rope_kv.h"

namespace ceiling::cuda {
namespace {

using detail::bf16;

// A CTA takes `tokens` consecutive tokens, Wt warps each (W = tokens·Wt warps). A token has
// Hq + 2·Hkv tasks: the q heads (normed, rotated in place), the k heads (normed, rotated, written
// to k_cache) and the v heads (copied to v_cache). A task is one head of D elements handled by L
// consecutive lanes (L = next power of two ≥ D/16): lane j holds elements [8j, 8j+8) and
// [D/2+8j, D/2+8j+8); a warp covers P = 32/L tasks at a time. Warp w of token k takes tasks
// (u·Wt + w)·P + slot for u < U. The loads go into shared memory (cp.async, each thread's own
// slots: no registers held while they are in flight, so U·32 bytes a thread cost nothing in
// occupancy), all of them issued before the tokens' cos/sin tables are computed and published by
// the one barrier.
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

__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  const auto d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
}

__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
}

// At most 32/U warps a CTA: the staging area is then at most 32 KB.
constexpr int kMaxTokensPerCta = 4;
int max_warps(int U) {
  return 32 / U;
}

// Dynamic shared memory: the q and k norm weights [2][D] (bf16), the tables [tokens][D] (cos
// [D/2] then sin [D/2], fp32), the staging area [U][2][threads] (16 bytes each). At most
// 2 + 8 + 32 KB.
size_t smem_bytes(int D, int tokens, int threads, int U) {
  return sizeof(bf16) * 2 * D + sizeof(float) * static_cast<size_t>(tokens) * D +
         size_t{32} * U * threads;
}

// kFp8: the cache stores E4M3 (kv_format.h); a template parameter (as a runtime branch the bf16
// kernels spill), with the q/k norm's register budget (the conversions need it).
template <int L, int U, bool kNorm, bool kFp8>
__global__ void __launch_bounds__(U == 1 ? 1024 : 256, U == 1          ? 1
                                                       : kNorm || kFp8 ? 4
                                                                       : 6)
    rope_kv_kernel(RopeKvArgs a, int Wt, int tokens, bool cs) {
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* norm_w = reinterpret_cast<bf16*>(smem);  // q [D], then k [D]
  float* tables = reinterpret_cast<float*>(smem + sizeof(bf16) * 2 * a.D);
  uint4* stage = reinterpret_cast<uint4*>(tables + tokens * a.D);  // 16-byte aligned: D % 16 == 0
  constexpr int P = 32 / L;
  detail::pdl_launch_dependents();
  const int64_t t0 = static_cast<int64_t>(blockIdx.x) * tokens;
  const int half = a.D / 2, tasks = a.Hq + 2 * a.Hkv;
  const int warp = threadIdx.x / 32, slot_in_warp = (threadIdx.x % 32) / L, j = threadIdx.x % L;
  const int k = warp / Wt, wt = warp - k * Wt;  // this warp's token within the CTA
  const int64_t t = t0 + k;
  const bool lane_on = j * 16 < a.D && t < a.T;  // lanes past D/16 idle (D/16 not a power of two)
  const int i0 = j * 8;
  // Stores of the outputs, with the streaming (evict-first) hint when cs.
  const auto store = [cs](bf16* p, const detail::Bf16x8& v) {
    if (cs)
      __stcs(reinterpret_cast<uint4*>(p), detail::as_uint4(v));
    else
      detail::store8(p, v);
  };
  // Eight cache values at element offset off: bf16 as they are, or fp8 e4m3(x / scale).
  const auto store_kv = [&](void* cache, int64_t off, const detail::Bf16x8& v, float scale) {
    if constexpr (!kFp8) return store(static_cast<bf16*>(cache) + off, v);
    float f[8];
    detail::to_float8(v, f);
    const uint2 b = detail::e4m3x8(f, scale);
    uint2* dst = reinterpret_cast<uint2*>(static_cast<uint8_t*>(cache) + off);
    if (cs)
      __stcs(dst, b);
    else
      *dst = b;
  };
  // This thread's staging slots: element halves 0 and 1 of its task u.
  const auto staged = [&](int u, int hh) {
    return stage + (2 * u + hh) * blockDim.x + threadIdx.x;
  };

  // Constants (no kernel of the step writes them) may be read before the wait: the norm weights.
  if (kNorm)
    for (int c = threadIdx.x; c < a.D / 4; c += blockDim.x) {  // 2·D elements, 8 a chunk
      const bf16* src = c < a.D / 8 ? a.q_norm_w + c * 8 : a.k_norm_w + (c - a.D / 8) * 8;
      detail::store8(norm_w + c * 8, detail::load8(src));
    }
  detail::pdl_wait();

  const int slot = lane_on ? a.slot_mapping[t] : -1;
  const int64_t num_slots = static_cast<int64_t>(a.num_blocks) * a.block_size;
  const bool write = slot >= 0 && slot < num_slots;
  // Head h of this token's cache row starts at cache_row0 + h·block_size·D.
  const int64_t cache_row0 =
      write ? (static_cast<int64_t>(slot / a.block_size) * a.Hkv * a.block_size +
               slot % a.block_size) *
                  a.D
            : 0;
  const float* table = tables + k * a.D;  // this token's cos [D/2], sin [D/2]
  bool tables_ready = false;

  // Trip counts are uniform across the block, so every lane reaches the shuffles and barrier.
  for (int base = 0; base < tasks; base += U * Wt * P) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int h = base + (u * Wt + wt) * P + slot_in_warp;
      if (h < tasks && lane_on) {
        const bf16* src = task_src(a, t, task_of(h, a.Hq, a.Hkv));
        cp_async16(staged(u, 0), src + i0);
        cp_async16(staged(u, 1), src + half + i0);
      }
    }
    if (!tables_ready) {  // while the loads are in flight
      for (int f = threadIdx.x; f < tokens * half; f += blockDim.x) {
        const int kf = f / half, fi = f - kf * half;
        const int64_t tf = std::min<int64_t>(t0 + kf, a.T - 1);  // past T: a copy of the last
        float s, c;
        sincosf(static_cast<float>(a.positions[tf]) * a.inv_freq[fi], &s, &c);
        tables[kf * a.D + fi] = c;
        tables[kf * a.D + half + fi] = s;
      }
    }
    cp_async_wait_all();  // this thread's own slots: no barrier needed to read them
    if (!tables_ready) {
      __syncthreads();
      tables_ready = true;
    }
#pragma unroll 1  // one task at a time: few registers (the data wait in shared memory)
    for (int u = 0; u < U; ++u) {
      const int h = base + (u * Wt + wt) * P + slot_in_warp;
      const bool on = h < tasks && lane_on;
      const TaskRef r = task_of(h, a.Hq, a.Hkv);
      float v1[8], v2[8];
      detail::Bf16x8 x1{}, x2{};
      if (on) {
        x1 = detail::as_bf16x8(*staged(u, 0));
        x2 = detail::as_bf16x8(*staged(u, 1));
      }
      detail::to_float8(x1, v1);
      detail::to_float8(x2, v2);
      if (kNorm) {  // per-head RMSNorm over the L lanes of this head (all lanes shuffle)
        float ss = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; ++e) ss += v1[e] * v1[e] + v2[e] * v2[e];
#pragma unroll
        for (int o = L / 2; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        if (r.kind != 2 && on) {
          const float inv = rsqrtf(ss / static_cast<float>(a.D) + a.norm_eps);
          const bf16* wr = norm_w + (r.kind == 0 ? 0 : a.D);
          float w1[8], w2[8];
          detail::to_float8(detail::load8(wr + i0), w1);
          detail::to_float8(detail::load8(wr + half + i0), w2);
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
          const int64_t off = cache_row0 + static_cast<int64_t>(r.head) * a.block_size * a.D;
          store_kv(a.v_cache, off + i0, x1, a.v_scale_inv);
          store_kv(a.v_cache, off + half + i0, x2, a.v_scale_inv);
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
        store(dst + i0, o1);
        store(dst + half + i0, o2);
      } else if (write) {
        const int64_t off = cache_row0 + static_cast<int64_t>(r.head) * a.block_size * a.D;
        store_kv(a.k_cache, off + i0, o1, a.k_scale_inv);
        store_kv(a.k_cache, off + half + i0, o2, a.k_scale_inv);
      }
    }
  }
}

// Head dims the vectorized kernel does not take (D % 16 != 0: stories260K's 8, 24, 40, ...; any
// even D ≤ 512, 2-byte alignment): a CTA of 4 warps a token, a warp a task, lanes over the D/2
// rotation pairs (i, i + D/2). Same arithmetic as rope_kv_kernel: norm, rotation and the fp8
// conversion of the bf16-rounded value in fp32. Small models only: no staging, scalar loads.
template <bool kNorm, bool kFp8>
__global__ void __launch_bounds__(128) rope_kv_narrow_kernel(RopeKvArgs a) {
  __shared__ float table[512];  // cos [D/2], then sin [D/2]
  detail::pdl_launch_dependents();
  detail::pdl_wait();
  const int64_t t = blockIdx.x;
  const int half = a.D / 2, lane = threadIdx.x % 32, tasks = a.Hq + 2 * a.Hkv;
  for (int i = threadIdx.x; i < half; i += blockDim.x)
    sincosf(static_cast<float>(a.positions[t]) * a.inv_freq[i], &table[half + i], &table[i]);
  __syncthreads();
  const int slot = a.slot_mapping[t];
  const bool write = slot >= 0 && slot < static_cast<int64_t>(a.num_blocks) * a.block_size;
  const int64_t cache_row0 =
      write ? (static_cast<int64_t>(slot / a.block_size) * a.Hkv * a.block_size +
               slot % a.block_size) *
                  a.D
            : 0;
  // Element e of head `head` of a cache: bf16 as computed, or e4m3 of that bf16 value.
  const auto store_kv = [&](void* cache, int head, int e, bf16 x, float scale_inv) {
    const int64_t off = cache_row0 + static_cast<int64_t>(head) * a.block_size * a.D + e;
    if constexpr (kFp8)
      static_cast<uint8_t*>(cache)[off] = detail::e4m3x1(__bfloat162float(x), scale_inv);
    else
      static_cast<bf16*>(cache)[off] = x;
  };
  for (int h = threadIdx.x / 32; h < tasks; h += blockDim.x / 32) {  // uniform per warp
    const TaskRef r = task_of(h, a.Hq, a.Hkv);
    const bf16* src = task_src(a, t, r);
    if (r.kind == 2) {  // v: a bit-exact copy
      if (write)
        for (int e = lane; e < a.D; e += 32) store_kv(a.v_cache, r.head, e, src[e], a.v_scale_inv);
      continue;
    }
    float inv = 1.0f;
    if (kNorm) {
      float ss = 0.0f;
      for (int e = lane; e < a.D; e += 32) {
        const float x = __bfloat162float(src[e]);
        ss += x * x;
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
      inv = rsqrtf(ss / static_cast<float>(a.D) + a.norm_eps);
    }
    if (r.kind == 1 && !write) continue;
    const bf16* nw = r.kind == 0 ? a.q_norm_w : a.k_norm_w;
    for (int i = lane; i < half; i += 32) {  // each lane reads and writes its own pairs only
      float x0 = __bfloat162float(src[i]), x1 = __bfloat162float(src[i + half]);
      if (kNorm) {
        x0 *= inv * __bfloat162float(nw[i]);
        x1 *= inv * __bfloat162float(nw[i + half]);
      }
      const float cs = table[i], sn = table[half + i];
      const bf16 y0 = __float2bfloat16_rn(x0 * cs - x1 * sn);
      const bf16 y1 = __float2bfloat16_rn(x1 * cs + x0 * sn);
      if (r.kind == 0) {
        bf16* dst = a.q + t * a.q_stride + static_cast<int64_t>(r.head) * a.D;
        dst[i] = y0;
        dst[i + half] = y1;
      } else {
        store_kv(a.k_cache, r.head, i, y0, a.k_scale_inv);
        store_kv(a.k_cache, r.head, i + half, y1, a.k_scale_inv);
      }
    }
  }
}

cudaError_t launch_narrow(const RopeKvArgs& a, cudaStream_t stream) {
  const bool fp8 = a.kv_format == KvFormat::kFP8;
  auto* kern =
      a.q_norm_w ? (fp8 ? rope_kv_narrow_kernel<true, true> : rope_kv_narrow_kernel<true, false>)
                 : (fp8 ? rope_kv_narrow_kernel<false, true> : rope_kv_narrow_kernel<false, false>);
  return detail::launch_pdl(kern, dim3(a.T), dim3(128), 0, stream, a);
}

// Prefill sizes from this many tokens on.
constexpr int kPrefillFrom = 512;

template <int L, int U, bool kNorm>
cudaError_t launch(const RopeKvArgs& a, int tokens, bool cs, cudaStream_t stream) {
  auto* kern = a.kv_format == KvFormat::kFP8 ? rope_kv_kernel<L, U, kNorm, true>
                                             : rope_kv_kernel<L, U, kNorm, false>;
  constexpr int P = 32 / L;
  const int warp_tasks = (a.Hq + 2 * a.Hkv + P - 1) / P;  // warp-iterations of one token
  // Warps a token: enough for U tasks a thread, at most max_warps(U) a CTA.
  const int Wt = std::max(1, std::min(max_warps(U) / tokens, (warp_tasks + U - 1) / U));
  const int threads = tokens * Wt * 32;
  return detail::launch_pdl(kern, dim3(detail::ceil_div(a.T, tokens)), dim3(threads),
                            smem_bytes(a.D, tokens, threads, U), stream, a, Wt, tokens, cs);
}

template <int L>
cudaError_t launch(const RopeKvArgs& a, const RopeKvConfig& cfg, cudaStream_t stream) {
  const int tokens = cfg.tokens_per_cta;
  const bool cs = cfg.streaming_stores;
  if (cfg.tasks_per_thread == 4)
    return a.q_norm_w ? launch<L, 4, true>(a, tokens, cs, stream)
                      : launch<L, 4, false>(a, tokens, cs, stream);
  return a.q_norm_w ? launch<L, 1, true>(a, tokens, cs, stream)
                    : launch<L, 1, false>(a, tokens, cs, stream);
}

Status check_args(const RopeKvArgs& a) {
  if (a.T < 0 || a.Hq < 0 || a.Hkv <= 0 || a.block_size <= 0 || a.num_blocks <= 0)
    return Status::error("rope_kv_write: bad shape T {} Hq {} Hkv {} block_size {} num_blocks {}",
                         a.T, a.Hq, a.Hkv, a.block_size, a.num_blocks);
  if (a.D % 2 != 0 || a.D <= 0 || a.D > 512)
    return Status::error("rope_kv_write: head_dim {} not supported (even, at most 512)", a.D);
  if ((a.q_norm_w == nullptr) != (a.k_norm_w == nullptr))
    return Status::error("rope_kv_write: q_norm_w and k_norm_w must be given together");
  if (a.kv_format == KvFormat::kFP8 && !(a.k_scale_inv > 0.0f && a.v_scale_inv > 0.0f))
    return Status::error("rope_kv_write: fp8 cache reciprocal scales k {} v {} must be positive",
                         a.k_scale_inv, a.v_scale_inv);
  if (a.D % 16 != 0) return Status();  // the narrow kernel: element accesses, any alignment
  const void* ptrs[] = {a.q, a.k, a.v, a.k_cache, a.v_cache};
  for (const void* p : ptrs)
    if (!detail::aligned16(p))
      return Status::error("rope_kv_write: pointer {} not 16-byte aligned", p);
  if (a.q_norm_w && (!detail::aligned16(a.q_norm_w) || !detail::aligned16(a.k_norm_w)))
    return Status::error("rope_kv_write: q/k norm weights not 16-byte aligned");
  if (a.q_stride % 8 || a.k_stride % 8 || a.v_stride % 8)
    return Status::error("rope_kv_write: strides q {} k {} v {} must be multiples of 8 elements",
                         a.q_stride, a.k_stride, a.v_stride);
  return Status();
}

}  // namespace

RopeKvConfig rope_kv_config(int T) {
  // Prefill sizes: four tasks a thread (fewer threads a token, more tokens an SM), one token a
  // CTA, evict-first stores (the file comment has the measurements); decode sizes: one task a
  // thread, every load of the token in one round trip over up to 32 warps, plain stores (the
  // attention kernel that follows reads q and the new cache rows, from L2 if they are still
  // there).
  if (T >= kPrefillFrom) return {1, 4, true};
  return {1, 1, false};
}

std::string rope_kv_config_name(const RopeKvConfig& cfg) {
  return "tok" + std::to_string(cfg.tokens_per_cta) + "u" + std::to_string(cfg.tasks_per_thread) +
         (cfg.streaming_stores ? "cs" : "");
}

Status rope_kv_write_with_config(const RopeKvArgs& a, const RopeKvConfig& cfg,
                                 cudaStream_t stream) {
  if (Status st = check_args(a); !st.ok()) return st;
  if (cfg.tokens_per_cta < 1 || cfg.tokens_per_cta > kMaxTokensPerCta ||
      (cfg.tasks_per_thread != 1 && cfg.tasks_per_thread != 4))
    return Status::error("rope_kv_write: configuration {} not built (1..{} tokens, 1 or 4 tasks)",
                         rope_kv_config_name(cfg), kMaxTokensPerCta);
  if (a.T == 0) return Status();
  if (a.D % 16 != 0) {  // one kernel for every configuration
    CEILING_CUDA_RETURN(launch_narrow(a, stream));
    return Status();
  }
  const int lanes = a.D / 16;
  switch (lanes <= 4 ? 4 : lanes <= 8 ? 8 : lanes <= 16 ? 16 : 32) {
    case 4:
      CEILING_CUDA_RETURN(launch<4>(a, cfg, stream));
      break;
    case 8:
      CEILING_CUDA_RETURN(launch<8>(a, cfg, stream));
      break;
    case 16:
      CEILING_CUDA_RETURN(launch<16>(a, cfg, stream));
      break;
    default:
      CEILING_CUDA_RETURN(launch<32>(a, cfg, stream));
      break;
  }
  return Status();
}

Status rope_kv_write(const RopeKvArgs& a, cudaStream_t stream) {
  return rope_kv_write_with_config(a, rope_kv_config(a.T), stream);
}

}  // namespace ceiling::cuda
