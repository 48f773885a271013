#include "core/dtype.h"

#include <cmath>
#include <limits>

#include "core/status.h"

namespace ceiling {

int dtype_bits(DType t) {
  switch (t) {
    case DType::kF64: case DType::kI64: return 64;
    case DType::kF32: case DType::kI32: return 32;
    case DType::kF16: case DType::kBF16: case DType::kI16: return 16;
    case DType::kF8E4M3: case DType::kF8E5M2: case DType::kI8: case DType::kU8:
    case DType::kBool: return 8;
    case DType::kI4: return 4;
  }
  fail("dtype_bits: invalid dtype {}", static_cast<int>(t));
}

size_t dtype_bytes(DType t, size_t n) { return (n * static_cast<size_t>(dtype_bits(t)) + 7) / 8; }

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF64: return "f64";
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kF8E4M3: return "f8e4m3";
    case DType::kF8E5M2: return "f8e5m2";
    case DType::kI64: return "i64";
    case DType::kI32: return "i32";
    case DType::kI16: return "i16";
    case DType::kI8: return "i8";
    case DType::kU8: return "u8";
    case DType::kI4: return "i4";
    case DType::kBool: return "bool";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view s) {
  struct Alias { std::string_view name; DType t; };
  static constexpr Alias kAliases[] = {
      {"f64", DType::kF64},     {"float64", DType::kF64},   {"f32", DType::kF32},
      {"float32", DType::kF32}, {"fp32", DType::kF32},      {"f16", DType::kF16},
      {"fp16", DType::kF16},    {"float16", DType::kF16},   {"half", DType::kF16},
      {"bf16", DType::kBF16},   {"bfloat16", DType::kBF16}, {"f8e4m3", DType::kF8E4M3},
      {"fp8", DType::kF8E4M3},  {"fp8_e4m3", DType::kF8E4M3}, {"e4m3", DType::kF8E4M3},
      {"f8e5m2", DType::kF8E5M2}, {"fp8_e5m2", DType::kF8E5M2}, {"e5m2", DType::kF8E5M2},
      {"i64", DType::kI64},     {"int64", DType::kI64},     {"i32", DType::kI32},
      {"int32", DType::kI32},   {"i16", DType::kI16},       {"int16", DType::kI16},
      {"i8", DType::kI8},       {"int8", DType::kI8},       {"u8", DType::kU8},
      {"uint8", DType::kU8},    {"i4", DType::kI4},         {"int4", DType::kI4},
      {"bool", DType::kBool},
  };
  for (const auto& a : kAliases)
    if (a.name == s) return a.t;
  return std::nullopt;
}

// Generic round-to-nearest-even encoder for small IEEE-like formats with `ebits` exponent bits
// and `mbits` mantissa bits. Returns the magnitude bits (no sign); `max_finite` is the largest
// finite encoding, used when `saturate` (values that round past it clamp to it).
static uint32_t encode_small_float(float a, int ebits, int mbits, uint32_t max_finite, bool saturate,
                                   uint32_t inf_bits) {
  // a is finite, non-negative.
  const int bias = (1 << (ebits - 1)) - 1;
  const int emin = 1 - bias;  // exponent of the smallest normal
  if (a == 0.0f) return 0;
  int e;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
  int exp = e - 1;    // a = 1.xxx * 2^exp
  if (exp < emin) exp = emin;  // subnormal range: fixed quantum 2^(emin - mbits)
  // quantum for this binade
  const double q = std::ldexp(1.0, exp - mbits);
  double scaled = static_cast<double>(a) / q;  // exact in double for float inputs
  double r = std::nearbyint(scaled);            // default rounding mode: to nearest even
  uint64_t m = static_cast<uint64_t>(r);
  // m in [2^mbits, 2^(mbits+1)] for normals, [0, 2^(mbits+1)] for the subnormal binade.
  uint32_t bits;
  if (m >= (1ull << (mbits + 1))) {  // rounded up into the next binade
    m >>= 1;
    exp += 1;
  }
  if (m < (1ull << mbits)) {
    bits = static_cast<uint32_t>(m);  // subnormal (exponent field 0)
  } else {
    const uint32_t efield = static_cast<uint32_t>(exp + bias);
    bits = (efield << mbits) | static_cast<uint32_t>(m & ((1ull << mbits) - 1));
  }
  if (bits > max_finite) return saturate ? max_finite : inf_bits;
  return bits;
}

static float decode_small_float(uint32_t mag, int ebits, int mbits) {
  const int bias = (1 << (ebits - 1)) - 1;
  const uint32_t efield = mag >> mbits;
  const uint32_t m = mag & ((1u << mbits) - 1);
  if (efield == 0) return static_cast<float>(std::ldexp(static_cast<double>(m), 1 - bias - mbits));
  return static_cast<float>(
      std::ldexp(static_cast<double>(m | (1u << mbits)), static_cast<int>(efield) - bias - mbits));
}

uint16_t f32_to_f16(float f) {
  const uint32_t u = f32_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const float a = std::fabs(f);
  if (std::isnan(f)) return static_cast<uint16_t>(sign | 0x7e00u);
  if (std::isinf(f)) return static_cast<uint16_t>(sign | 0x7c00u);
  return static_cast<uint16_t>(sign | encode_small_float(a, 5, 10, 0x7bffu, false, 0x7c00u));
}

float f16_to_f32(uint16_t h) {
  const uint32_t mag = h & 0x7fffu;
  float v;
  if ((mag >> 10) == 0x1f)
    v = (mag & 0x3ffu) ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else
    v = decode_small_float(mag, 5, 10);
  return (h & 0x8000u) ? -v : v;
}

uint8_t f32_to_e4m3(float f) {
  const uint8_t sign = (f32_bits(f) >> 24) & 0x80u;
  if (std::isnan(f)) return static_cast<uint8_t>(sign | 0x7fu);
  const float a = std::isinf(f) ? 448.0f : std::fabs(f);
  return static_cast<uint8_t>(sign | encode_small_float(a, 4, 3, 0x7eu, true, 0x7eu));
}

float e4m3_to_f32(uint8_t v) {
  const uint32_t mag = v & 0x7fu;
  const float r = (mag == 0x7fu) ? std::numeric_limits<float>::quiet_NaN() : decode_small_float(mag, 4, 3);
  return (v & 0x80u) ? -r : r;
}

uint8_t f32_to_e5m2(float f) {
  const uint8_t sign = (f32_bits(f) >> 24) & 0x80u;
  if (std::isnan(f)) return static_cast<uint8_t>(sign | 0x7eu);
  // Saturating: +-Inf maps to +-57344 (0x7b), as __NV_SATFINITE does (and as e4m3 does above).
  const float a = std::isinf(f) ? 57344.0f : std::fabs(f);
  return static_cast<uint8_t>(sign | encode_small_float(a, 5, 2, 0x7bu, true, 0x7bu));
}

float e5m2_to_f32(uint8_t v) {
  const uint32_t mag = v & 0x7fu;
  float r;
  if ((mag >> 2) == 0x1f)
    r = (mag & 3u) ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else
    r = decode_small_float(mag, 5, 2);
  return (v & 0x80u) ? -r : r;
}

void pack_i4(const int8_t* values, size_t n, uint8_t* packed) {
  for (size_t i = 0; i < n; ++i)
    if (values[i] < -8 || values[i] > 7)
      fail("pack_i4: value {} at index {} is outside the int4 range [-8, 7]", values[i], i);
  for (size_t k = 0; k < (n + 1) / 2; ++k) {
    const uint8_t lo = static_cast<uint8_t>(values[2 * k]) & 0xfu;
    const uint8_t hi = 2 * k + 1 < n ? static_cast<uint8_t>(values[2 * k + 1]) & 0xfu : 0;
    packed[k] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

void unpack_i4(const uint8_t* packed, size_t n, int8_t* values) {
  for (size_t i = 0; i < n; ++i) values[i] = i4_at(packed, i);
}

float load_as_f32(const void* data, DType t, size_t i) {
  const auto* b = static_cast<const uint8_t*>(data);
  switch (t) {
    case DType::kF32: { float v; std::memcpy(&v, b + 4 * i, 4); return v; }
    case DType::kF64: { double v; std::memcpy(&v, b + 8 * i, 8); return static_cast<float>(v); }
    case DType::kF16: { uint16_t v; std::memcpy(&v, b + 2 * i, 2); return f16_to_f32(v); }
    case DType::kBF16: { uint16_t v; std::memcpy(&v, b + 2 * i, 2); return bf16_to_f32(v); }
    case DType::kF8E4M3: return e4m3_to_f32(b[i]);
    case DType::kF8E5M2: return e5m2_to_f32(b[i]);
    case DType::kI8: return static_cast<float>(static_cast<int8_t>(b[i]));
    case DType::kU8: case DType::kBool: return static_cast<float>(b[i]);
    case DType::kI16: { int16_t v; std::memcpy(&v, b + 2 * i, 2); return v; }
    case DType::kI32: { int32_t v; std::memcpy(&v, b + 4 * i, 4); return static_cast<float>(v); }
    case DType::kI64: { int64_t v; std::memcpy(&v, b + 8 * i, 8); return static_cast<float>(v); }
    case DType::kI4: {
      const uint8_t byte = b[i / 2];
      int nib = (i % 2) ? (byte >> 4) : (byte & 0xf);
      if (nib >= 8) nib -= 16;
      return static_cast<float>(nib);
    }
  }
  fail("load_as_f32: invalid dtype");
}

}  // namespace ceiling
