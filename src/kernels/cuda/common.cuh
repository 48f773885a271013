// Device helpers shared by the kernel files of this directory (include from .cu files only):
// 16-byte bf16 vectors, bf16 <-> fp32 conversion, warp and block reductions, mma.sync, cp.async,
// grid sizing.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace ceiling::cuda::detail {

using bf16 = __nv_bfloat16;

// Eight bf16 values: one 16-byte load or store.
struct alignas(16) Bf16x8 {
  __nv_bfloat162 h[4];
};

__device__ __forceinline__ void to_float8(const Bf16x8& v, float (&f)[8]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 p = __bfloat1622float2(v.h[i]);
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
}

__device__ __forceinline__ Bf16x8 from_float8(const float (&f)[8]) {
  Bf16x8 v;
#pragma unroll
  for (int i = 0; i < 4; ++i) v.h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return v;
}

__device__ __forceinline__ Bf16x8 as_bf16x8(uint4 r) {
  Bf16x8 v;
  static_assert(sizeof(v) == sizeof(r));
  __builtin_memcpy(&v, &r, sizeof(r));
  return v;
}

__device__ __forceinline__ uint4 as_uint4(const Bf16x8& v) {
  uint4 r;
  __builtin_memcpy(&r, &v, sizeof(r));
  return r;
}

// 16-byte load (p 16-byte aligned).
__device__ __forceinline__ Bf16x8 load8(const bf16* p) {
  return as_bf16x8(*reinterpret_cast<const uint4*>(p));
}

// 16-byte read-only load that does not allocate in L1: data streamed once (weights).
__device__ __forceinline__ uint4 load16_stream(const void* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

// The same, as eight bf16.
__device__ __forceinline__ Bf16x8 load8_stream(const bf16* p) {
  return as_bf16x8(load16_stream(p));
}

__device__ __forceinline__ void store8(bf16* p, const Bf16x8& v) {
  *reinterpret_cast<uint4*>(p) = as_uint4(v);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the whole block (blockDim.x a multiple of 32, at most 1024). Every thread gets the
// result. `scratch` holds 32 floats of shared memory; the call ends with a barrier-protected read,
// so it may be called again with the same scratch.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0f;
  return warp_sum(v);
}

// d += a · b for one m16n8k16 tile (bf16 in, fp32 accumulate). Fragment layouts (g = lane / 4,
// t = lane % 4): a = {A[g][2t..], A[g+8][2t..], A[g][2t+8..], A[g+8][2t+8..]};
// b = {B[2t..][g], B[2t+8..][g]}; d = {C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1]}.
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  uint32_t r;
  __builtin_memcpy(&r, &v, sizeof(r));
  return r;
}

inline bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
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
// The same for 4 bytes (through L1).
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src, bool valid) {
  const int n = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(n)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

inline unsigned ceil_div(int64_t a, int64_t b) {
  return static_cast<unsigned>((a + b - 1) / b);
}

}  // namespace ceiling::cuda::detail
