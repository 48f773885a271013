// Warp-level building blocks shared by the attention kernels (sm_80+ instructions: cp.async,
// ldmatrix, mma.sync m16n8k16 bf16) and the one place where runtime head_dim / block_size become
// template constants.
//
// Shared-memory tiles of K/V/Q rows are stored row-major, D bf16 per row (D/8 chunks of 16 bytes),
// with the 16-byte chunk index XOR-swizzled by (row % 8): eight consecutive rows read at the same
// logical chunk (one ldmatrix 8×8 matrix) hit eight different bank groups.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/status.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/common.cuh"

namespace ceiling::cuda::attn {

__host__ __device__ constexpr int ceil_div(int a, int b) {
  return (a + b - 1) / b;
}

// Byte offset of (row, 16-byte chunk) in a swizzled tile with D bf16 per row.
template <int D>
__device__ __forceinline__ uint32_t swz(int row, int chunk) {
  return static_cast<uint32_t>(row * D * 2 + ((chunk ^ (row & 7)) << 4));
}

using detail::cp_async16;  // common.cuh
using detail::cp_async_commit;
using detail::cp_async_wait;
using detail::smem_addr;

__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// mma_16816 and pack_bf16 live in common.cuh (the GEMV uses them too).
using detail::mma_16816;
using detail::pack_bf16;

// The f16 flavour, for kernels reading an fp8 cache: E4M3 converts to f16 in one instruction a
// pair (fp8.cuh) and exactly, and q (bf16, |q| < 65504) and P (in [0, 1]) lose nothing in f16's
// wider mantissa but the values under its normal range (2^-14), which add nothing a row notices.
__device__ __forceinline__ void mma_16816_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                              uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t pack_f16(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  uint32_t r;
  __builtin_memcpy(&r, &v, sizeof(r));
  return r;
}
__device__ __forceinline__ uint32_t bf16x2_to_f16x2(uint32_t v) {
  __nv_bfloat162 b;
  __builtin_memcpy(&b, &v, sizeof(v));
  const float2 f = __bfloat1622float2(b);
  return pack_f16(f.x, f.y);
}
// bf16 operands (kF16 false) or f16 ones.
template <bool kF16>
__device__ __forceinline__ void mma_t(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                      uint32_t b1) {
  if constexpr (kF16)
    mma_16816_f16(d, a, b0, b1);
  else
    mma_16816(d, a, b0, b1);
}
template <bool kF16>
__device__ __forceinline__ uint32_t pack_t(float lo, float hi) {
  if constexpr (kF16)
    return pack_f16(lo, hi);
  else
    return pack_bf16(lo, hi);
}

// 2^x (approximate, flushes subnormals; 2^-inf = 0).
__device__ __forceinline__ float exp2_fast(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

constexpr float kLog2e = 1.4426950408889634f;

// The launchers' rule for q's row stride (attention.h): at least Hq·D, 16-byte rows.
inline Status check_q_stride(const char* op, int64_t q_stride, int hq, int head_dim) {
  if (q_stride < static_cast<int64_t>(hq) * head_dim || q_stride % 8 != 0)
    return Status::error("{}: q row stride {} is below Hq·D = {} or not a multiple of 8", op,
                         q_stride, hq * head_dim);
  return Status::ok_status();
}

// Whether the tiled kernels (decode split-KV, the prefill kernels) take this shape; plan_* picks
// the warp kernel (attention_warp.cu) for the rest it takes.
inline bool tiled_kernels_take(int head_dim, int block_size) {
  return (head_dim == 64 || head_dim == 128) &&
         (block_size == 16 || block_size == 32 || block_size == 64 || block_size == 128 ||
          block_size == 256);
}

// The warp kernel (attention_warp.cu): 4 warps per (token, query head); head_dim 8, 16, 32 or
// 64, any block size ≥ 1, a bf16 or fp8 cache; arguments as run_prefill_attention's (attention.h)
// with the shapes spelled out. query_start null: decode (token s is sequence s's new one, T = S).
bool warp_kernel_head_dim(int head_dim);
Status run_warp_attention(const void* q, int64_t q_stride, const PagedKvDevice& kv,
                          const int32_t* query_start, const int32_t* seq_lens,
                          const int32_t* block_tables, int max_blocks, int num_seqs, int num_tokens,
                          int num_q_heads, float scale, void* out, cudaStream_t stream);

// Calls f.template operator()<D, BS>() for the runtime (head_dim, block_size); the only place
// where these become template constants. Unsupported values come back as a Status naming them.
template <typename F>
Status dispatch_head_block(int head_dim, int block_size, F&& f) {
  auto by_block = [&]<int D>() -> Status {
    switch (block_size) {
      case 16:
        return f.template operator()<D, 16>();
      case 32:
        return f.template operator()<D, 32>();
      case 64:
        return f.template operator()<D, 64>();
      case 128:
        return f.template operator()<D, 128>();
      case 256:
        return f.template operator()<D, 256>();
      default:
        return Status::error("attention: block_size {} not built (16, 32, 64, 128, 256)",
                             block_size);
    }
  };
  switch (head_dim) {
    case 64:
      return by_block.template operator()<64>();
    case 128:
      return by_block.template operator()<128>();
    default:
      return Status::error("attention: head_dim {} not built (64, 128)", head_dim);
  }
}

}  // namespace ceiling::cuda::attn
