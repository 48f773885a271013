// Device helpers shared by the kernel files of this directory (include from .cu files only):
// 16-byte bf16 vectors, bf16 <-> fp32 conversion, warp and block reductions, grid sizing.
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

// Read-only load that does not allocate in L1: data streamed once (weights).
__device__ __forceinline__ Bf16x8 load8_stream(const bf16* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return as_bf16x8(r);
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

inline bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

inline unsigned ceil_div(int64_t a, int64_t b) {
  return static_cast<unsigned>((a + b - 1) / b);
}

}  // namespace ceiling::cuda::detail
