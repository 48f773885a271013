// Warp-level building blocks shared by the attention kernels (sm_80+ instructions: cp.async,
// ldmatrix, mma.sync m16n8k16 bf16) and the one place where runtime head_dim / block_size become
// template constants.
//
// Shared-memory tiles of K/V/Q rows are stored row-major, D bf16 per row (D/8 chunks of 16 bytes),
// with the 16-byte chunk index XOR-swizzled by (row % 8): eight consecutive rows read at the same
// logical chunk (one ldmatrix 8×8 matrix) hit eight different bank groups.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "core/status.h"
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

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte async copy global → shared; when !valid nothing is read and the 16 bytes are zeroed.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

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
