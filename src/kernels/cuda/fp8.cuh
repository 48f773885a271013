// E4M3 bit helpers shared by the fp8-weight GEMV (gemv_weights.cuh) and the fp8 KV cache (the
// attention kernels' loads, the RoPE + KV-write stores; kv_format.h). Include from .cu/.cuh only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace ceiling::cuda::detail {

// Four e4m3 bytes (k0..k0+3 in byte order) as two bf16 pairs holding e4m3 · 2^-120 exactly: the
// sign and the 7 magnitude bits moved into bf16 position (exponent bias 127 instead of 7, so
// subnormals stay exact). even = bytes (0, 2), odd = bytes (1, 3).
__device__ __forceinline__ void fp8x4_bf16(uint32_t q, uint32_t& even, uint32_t& odd) {
  odd = (q & 0x80008000u) | ((q >> 4) & 0x07F007F0u);
  even = ((q << 8) & 0x80008000u) | ((q << 4) & 0x07F007F0u);
}

// The same four values as fp32 (each bf16 widened by a shift): e4m3 · 2^-120, exactly. Relies
// on fp32 subnormals (no -ftz).
__device__ __forceinline__ void fp8x4_scaled(uint32_t q, float* f) {
  uint32_t even, odd;
  fp8x4_bf16(q, even, odd);
  f[0] = __uint_as_float(even << 16);
  f[1] = __uint_as_float(odd << 16);
  f[2] = __uint_as_float(even & 0xFFFF0000u);
  f[3] = __uint_as_float(odd & 0xFFFF0000u);
}

// Four e4m3 bytes (k0..k0+3 in byte order) as fp32, exactly: one cvt.rn.f16x2.e4m3x2 a pair
// (every E4M3 value is an f16), then each f16 widened: 7 instructions where fp8x4_scaled's bit
// moves and widening take 11 integer ones. The fp8 register GEMV was issue-bound (r112: 816
// instructions per 4 KB); with this, H200 r113: gate/up with the norm input 36.7 → 33.6 µs, the
// plain-input o and down 3 % slower, batch-1 decode 2.744 → 2.610 ms.
__device__ __forceinline__ void fp8x4_f32(uint32_t q, float* f) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const __half2_raw h =
        __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(q >> (16 * i)), __NV_E4M3);
    __half2 p;
    __builtin_memcpy(&p, &h, 4);
    const float2 v = __half22float2(p);
    f[2 * i] = v.x;
    f[2 * i + 1] = v.y;
  }
}

// Eight e4m3 bytes (words lo, hi; byte order = element order) as 4 bf16 pairs (elements 2i,
// 2i + 1 in word i) holding e4m3 · 2^-8 exactly: fp8x4_bf16's bit move times 2^112 (every E4M3
// value is a normal bf16 then). A reader restores 2^8 with its scale.
__device__ __forceinline__ uint4 fp8x8_bf16_2m8(uint32_t lo, uint32_t hi) {
  uint32_t o[4];
  const uint32_t two112_bits = 0x77807780u;  // bf16 2^112, twice
  __nv_bfloat162 two112;
  __builtin_memcpy(&two112, &two112_bits, 4);
  const uint32_t w[2] = {lo, hi};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    uint32_t even, odd;
    fp8x4_bf16(w[i], even, odd);
    const uint32_t pair[2] = {__byte_perm(even, odd, 0x5410), __byte_perm(even, odd, 0x7632)};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      __nv_bfloat162 p;
      __builtin_memcpy(&p, &pair[h], 4);
      p = __hmul2(p, two112);
      __builtin_memcpy(&o[2 * i + h], &p, 4);
    }
  }
  return make_uint4(o[0], o[1], o[2], o[3]);
}
inline constexpr float kFp8Bf16Unscale = 256.0f;  // what fp8x8_bf16_2m8's values lack

// Eight e4m3 bytes (words lo, hi) as 4 f16 pairs (elements 2i, 2i + 1 in word i), exactly (every
// E4M3 value is an f16), one cvt.rn.f16x2.e4m3x2 a pair.
__device__ __forceinline__ uint4 fp8x8_f16(uint32_t lo, uint32_t hi) {
  uint32_t o[4];
  const uint32_t w[2] = {lo, hi};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(
        static_cast<__nv_fp8x2_storage_t>(w[i / 2] >> (16 * (i % 2))), __NV_E4M3);
    o[i] = static_cast<uint32_t>(h.x) | static_cast<uint32_t>(h.y) << 16;
  }
  return make_uint4(o[0], o[1], o[2], o[3]);
}

// Two values as e4m3 bytes (a in the low byte): e4m3(x · inv_scale), saturating, nearest even
// (a product, not a quotient: IEEE division costs the GEMV epilogues registers they lack).
__device__ __forceinline__ uint16_t e4m3x2(float a, float b, float inv_scale) {
  return __nv_cvt_float2_to_fp8x2(make_float2(a * inv_scale, b * inv_scale), __NV_SATFINITE,
                                  __NV_E4M3);
}
__device__ __forceinline__ uint8_t e4m3x1(float a, float inv_scale) {
  return __nv_cvt_float_to_fp8(a * inv_scale, __NV_SATFINITE, __NV_E4M3);
}

// Eight values as 8 e4m3 bytes (element order), e4m3(x · inv_scale).
__device__ __forceinline__ uint2 e4m3x8(const float (&f)[8], float inv_scale) {
  uint32_t w[2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
    w[i] = static_cast<uint32_t>(e4m3x2(f[4 * i], f[4 * i + 1], inv_scale)) |
           static_cast<uint32_t>(e4m3x2(f[4 * i + 2], f[4 * i + 3], inv_scale)) << 16;
  return make_uint2(w[0], w[1]);
}

}  // namespace ceiling::cuda::detail
