// Element types and host-side conversions. Every conversion to a narrower float rounds to nearest
// even, keeps NaN a NaN (quiet), saturates or overflows to Inf as the format defines, and handles
// subnormals exactly. Tests: tests/core/dtype_test.cpp (bit-exact against known values).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace ceiling {

enum class DType : uint8_t {
  kF64,
  kF32,
  kF16,
  kBF16,
  kF8E4M3,  // OCP E4M3 "fn": no Inf, NaN = S.1111.111, max 448
  kF8E5M2,  // OCP E5M2: IEEE-like, max 57344
  kI64,
  kI32,
  kI16,
  kI8,
  kU8,
  kI4,  // two's-complement nibbles, two per byte, low nibble first
  kBool,
};

// Storage size in bits (4 for kI4).
int dtype_bits(DType t);
// Bytes for `n` elements, rounding sub-byte types up.
size_t dtype_bytes(DType t, size_t n);
// Short lowercase name: "f32", "bf16", "f8e4m3", "i4", ...
std::string_view dtype_name(DType t);
// Parses the names above and the common aliases ("bfloat16", "float16", "fp8", "int8", ...).
std::optional<DType> parse_dtype(std::string_view s);

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// --- bf16 ---------------------------------------------------------------------------------
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // qNaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_to_f32(uint16_t h) { return bits_f32(static_cast<uint32_t>(h) << 16); }

// --- fp16 (IEEE binary16) -------------------------------------------------------------------
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);

// --- fp8 ------------------------------------------------------------------------------------
// Saturating conversions (values beyond the largest finite, Inf included, map to it with their
// sign; NaN stays NaN), as used for weights and KV caches — the behaviour of CUDA's
// __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...). Decoding e5m2 Inf codes still gives Inf.
uint8_t f32_to_e4m3(float f);
float e4m3_to_f32(uint8_t v);
uint8_t f32_to_e5m2(float f);
float e5m2_to_f32(uint8_t v);

// --- int4 (kI4) ---------------------------------------------------------------------------
// Two's-complement nibbles, two per byte: element 2k in the low nibble of byte k, element 2k+1 in
// the high nibble. Values are in [-8, 7].
inline int8_t i4_at(const uint8_t* packed, size_t i) {
  const uint8_t nib = static_cast<uint8_t>((packed[i / 2] >> ((i % 2) * 4)) & 0xfu);
  return static_cast<int8_t>(nib >= 8 ? nib - 16 : nib);
}
// Packs `n` values into (n + 1) / 2 bytes; with odd `n` the last high nibble is 0. Throws
// ceiling::Error naming the first value outside [-8, 7] and its index.
void pack_i4(const int8_t* values, size_t n, uint8_t* packed);
// Unpacks `n` values (sign-extended) from (n + 1) / 2 bytes.
void unpack_i4(const uint8_t* packed, size_t n, int8_t* values);

// Reads element `i` of a buffer of type `t` as float (f32/f16/bf16/fp8/int types).
float load_as_f32(const void* data, DType t, size_t i);

}  // namespace ceiling
