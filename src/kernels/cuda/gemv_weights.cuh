// Weight-format helpers of the GEMV kernels (gemv_kernel.cuh, gemv_mma.cuh): 16-byte weight loads
// and their dequantization (gemv_quant.h layouts), to fp32 for the CUDA-core kernel and to bf16
// pairs for the tensor-core one.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/fp8.cuh"
#include "kernels/cuda/gemv_quant.h"

namespace ceiling::cuda::detail {

template <GemvWeightFormat kW>
__host__ __device__ constexpr int weight_elems() {
  return kW == GemvWeightFormat::kBF16 ? 8 : kW == GemvWeightFormat::kFP8 ? 16 : 32;
}

__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// Bits of a where mask is set, of c elsewhere: one LOP3 (select).
template <uint32_t kMask>
__device__ __forceinline__ uint32_t select_bits(uint32_t a, uint32_t c) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xE2;" : "=r"(d) : "r"(a), "n"(kMask), "r"(c));
  return d;
}

// Eight int4 values of one word (pack_gemv_int4's nibble order) as four bf16 pairs q − zero, for
// elements (2s, 2s + 1) in pair s: (word >> 4s) & 0x000F000F | 0x43004300 is the bf16 pair
// (128 + q), and the bf16 subtraction of zw = (128 + zero) twice is exact (small integers).
// zw is 0x4300 | zero in each half with zero ≤ 15 (pack_gemv_int4_group), so 0x43004300 is zw
// outside the nibbles: one LOP3 a pair, select_bits(word >> 4s, zw), where `& | magic` compiled
// to two (an instruction has one immediate slot). The integer pipe is what the int4 kernels
// wait on (r104, ncu of gemm_int4 at M = 1: 421 instructions a warp and 128-k tile, 150 of them
// LOP3 and 52 SHF, at half rate); one LOP3 fewer a pair took it from 27.2 to 23.0 µs (r106).
__device__ __forceinline__ void int4x8_bf16(uint32_t q, uint32_t zw, uint32_t (&o)[4]) {
  __nv_bfloat162 z;
  __builtin_memcpy(&z, &zw, 4);
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    const uint32_t t = select_bits<0x000F000Fu>(q >> (4 * s), zw);
    __nv_bfloat162 p;
    __builtin_memcpy(&p, &t, 4);
    p = __hsub2(p, z);
    __builtin_memcpy(&o[s], &p, 4);
  }
}

// int4 group word (pack_gemv_int4_group): the scale, and the zero point as the bf16 pair
// (128 + zero, 128 + zero) that dequant8 subtracts.
__device__ __forceinline__ float int4_scale(uint32_t g) {
  return __uint_as_float(g & 0xFFFFFF00u);
}
__device__ __forceinline__ uint32_t int4_zero_word(uint32_t g) {
  return 0x43004300u | ((g & 0xFFu) * 0x00010001u);
}

// Piece j (8 consecutive k) of one 16-byte load as fp32: bf16 as is; fp8 as the e4m3 values,
// exactly (fp8x4_f32; the row scale is applied by the caller); int4 as q − zero (zw:
// int4_zero_word), unscaled.
template <GemvWeightFormat kW>
__device__ __forceinline__ void dequant8(const uint4& raw, int j, uint32_t zw, float (&f)[8]) {
  if constexpr (kW == GemvWeightFormat::kBF16) {
    to_float8(as_bf16x8(raw), f);
  } else if constexpr (kW == GemvWeightFormat::kFP8) {
    fp8x4_f32(word(raw, 2 * j), f);
    fp8x4_f32(word(raw, 2 * j + 1), f + 4);
  } else {
    uint32_t d[4];
    int4x8_bf16(word(raw, j), zw, d);
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      f[2 * s] = __uint_as_float(d[s] << 16);
      f[2 * s + 1] = __uint_as_float(d[s] & 0xFFFF0000u);
    }
  }
}

// Piece v (8 consecutive k) of one 16-byte load as 4 bf16 pairs (k 2i, 2i + 1 in word i), an mma
// operand: bf16 as is; fp8 as e4m3 · 2^-8 (fp8x8_bf16_2m8, exact: the e4m3 · 2^-120 of
// fp8x4_bf16's bit move times 2^112, every E4M3 value a normal bf16 then; the row scale restores
// 2^8); int4 as q − zero (exact small integers), unscaled.
template <GemvWeightFormat kW>
__device__ __forceinline__ uint4 dequant_bf16(const uint4& raw, int v, uint32_t zw) {
  if constexpr (kW == GemvWeightFormat::kBF16) {
    return raw;
  } else if constexpr (kW == GemvWeightFormat::kFP8) {
    return fp8x8_bf16_2m8(word(raw, 2 * v), word(raw, 2 * v + 1));
  } else {
    uint32_t o[4];
    int4x8_bf16(word(raw, v), zw, o);
    return make_uint4(o[0], o[1], o[2], o[3]);
  }
}

}  // namespace ceiling::cuda::detail
