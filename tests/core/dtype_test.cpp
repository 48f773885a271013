#include "core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

using namespace ceiling;

TEST(BF16, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(f32_to_bf16(bits_f32(0x3f808000u)), 0x3f80);
  // 1 + 3·2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: ties to even, up.
  EXPECT_EQ(f32_to_bf16(bits_f32(0x3f818000u)), 0x3f82);
  EXPECT_EQ(f32_to_bf16(bits_f32(0x3f808001u)), 0x3f81);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
  EXPECT_EQ(f32_to_bf16(INFINITY), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-INFINITY), 0xff80);
  // Largest float rounds to +Inf in bf16.
  EXPECT_EQ(f32_to_bf16(bits_f32(0x7f7fffffu)), 0x7f80);
  EXPECT_EQ(f32_to_bf16(bits_f32(0x00010000u)), 0x0001);  // subnormal
}

TEST(F16, KnownValues) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);               // rounds past max: Inf
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // tie to even: zero
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 quanta: tie to even (2)
  EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(f16_to_f32(0x3555), 0.333251953125f);
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
}

TEST(F8, E4M3AndE5M2KnownValues) {
  EXPECT_EQ(f32_to_e4m3(448.0f), 0x7e);
  EXPECT_EQ(f32_to_e4m3(1000.0f), 0x7e);  // saturates
  EXPECT_EQ(f32_to_e4m3(1.0f), 0x38);
  EXPECT_EQ(f32_to_e4m3(std::ldexp(1.0f, -9)), 0x01);  // smallest subnormal
  EXPECT_EQ(f32_to_e4m3(NAN) & 0x7f, 0x7f);
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(f32_to_e5m2(57344.0f), 0x7b);
  EXPECT_EQ(f32_to_e5m2(1.0f), 0x3c);
  EXPECT_EQ(e5m2_to_f32(0x01), std::ldexp(1.0f, -16));
  EXPECT_TRUE(std::isinf(e5m2_to_f32(0x7c)));
}

// ---------------------------------------------------------------------------------------------
// Exhaustive fp8 checks. The reference decoder below is written from the format definitions
// (OCP 8-bit floating point spec v1.0), independently of dtype.cpp:
//   e4m3 ("fn"): bias 7, no Inf, NaN = S.1111.111, max 0x7e = 1.75 * 2^8 = 448.
//   e5m2:        bias 15, IEEE-like: exponent 31 is Inf (mantissa 0) or NaN, max 0x7b = 57344.
namespace {

double ref_fp8(uint8_t code, int ebits, int mbits) {
  const int bias = (1 << (ebits - 1)) - 1;
  const int e = (code >> mbits) & ((1 << ebits) - 1);
  const int m = code & ((1 << mbits) - 1);
  const double sign = (code & 0x80) ? -1.0 : 1.0;
  if (ebits == 4 && e == 15 && m == 7) return NAN;
  if (ebits == 5 && e == 31) return m ? NAN : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m, 1 - bias - mbits);  // subnormal: m * 2^(1-bias-mbits)
  return sign * std::ldexp(1.0 + m / double(1 << mbits), e - bias);
}

bool is_nan_code(uint8_t c, bool e4m3) {
  return e4m3 ? (c & 0x7f) == 0x7f : ((c & 0x7c) == 0x7c && (c & 3) != 0);
}

struct Fp8Format {
  const char* name;
  bool e4m3;
  int ebits, mbits;
  uint8_t (*enc)(float);
  float (*dec)(uint8_t);
  float max;
};
const Fp8Format kFormats[] = {{"e4m3", true, 4, 3, f32_to_e4m3, e4m3_to_f32, 448.0f},
                              {"e5m2", false, 5, 2, f32_to_e5m2, e5m2_to_f32, 57344.0f}};

}  // namespace

TEST(F8, AllCodesDecodeToTheSpecValueAndRoundTrip) {
  for (const auto& f : kFormats) {
    for (int c = 0; c < 256; ++c) {
      const auto code = static_cast<uint8_t>(c);
      const double want = ref_fp8(code, f.ebits, f.mbits);
      const float got = f.dec(code);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << f.name << " code " << c;
        EXPECT_TRUE(is_nan_code(f.enc(got), f.e4m3)) << f.name << " NaN re-encodes as NaN";
        continue;
      }
      EXPECT_EQ(static_cast<double>(got), want) << f.name << " code " << c;
      EXPECT_EQ(std::signbit(got), (c & 0x80) != 0) << f.name << " code " << c;
      if (std::isinf(want)) continue;  // e5m2 Inf saturates when encoded (tested below)
      EXPECT_EQ(f.enc(got), code) << f.name << " round trip of code " << c;
    }
  }
}

TEST(F8, TiesRoundToEvenAndNeighboursToNearest) {
  // For every pair of adjacent finite positive codes, the exact midpoint (representable in f32)
  // goes to the code with the even mantissa; a hair either side goes to the nearer code.
  for (const auto& f : kFormats) {
    for (int c = 0; c < 0x7f; ++c) {
      const auto lo = static_cast<uint8_t>(c), hi = static_cast<uint8_t>(c + 1);
      if (is_nan_code(hi, f.e4m3) || std::isinf(f.dec(hi))) break;
      const double a = f.dec(lo), b = f.dec(hi);
      const auto mid = static_cast<float>((a + b) / 2);
      ASSERT_EQ(static_cast<double>(mid), (a + b) / 2) << "midpoint exact in f32";
      const uint8_t even = (lo % 2 == 0) ? lo : hi;
      EXPECT_EQ(f.enc(mid), even) << f.name << " tie between " << c << " and " << c + 1;
      EXPECT_EQ(f.enc(-mid), even | 0x80) << f.name << " negative tie";
      EXPECT_EQ(f.enc(std::nextafter(mid, 0.0f)), lo) << f.name << " below the tie";
      EXPECT_EQ(f.enc(std::nextafter(mid, INFINITY)), hi) << f.name << " above the tie";
    }
  }
}

TEST(F8, SubnormalsZerosAndUnderflow) {
  // e4m3 smallest subnormal 2^-9; e5m2 2^-16. Half of it ties to even (zero); just above rounds up.
  EXPECT_EQ(f32_to_e4m3(std::ldexp(1.0f, -10)), 0x00);
  EXPECT_EQ(f32_to_e4m3(std::nextafter(std::ldexp(1.0f, -10), 1.0f)), 0x01);
  EXPECT_EQ(f32_to_e4m3(std::ldexp(3.0f, -10)), 0x02);   // 1.5 quanta: tie to even (2)
  EXPECT_EQ(f32_to_e4m3(std::ldexp(7.0f, -9)), 0x07);    // largest subnormal
  EXPECT_EQ(f32_to_e4m3(std::ldexp(15.0f, -10)), 0x08);  // 7.5 quanta: ties up into the normals
  EXPECT_EQ(f32_to_e5m2(std::ldexp(1.0f, -17)), 0x00);
  EXPECT_EQ(f32_to_e5m2(std::ldexp(3.0f, -17)), 0x02);
  EXPECT_EQ(f32_to_e5m2(std::ldexp(1.0f, -14)), 0x04);  // smallest normal
  EXPECT_EQ(f32_to_e4m3(-0.0f), 0x80);
  EXPECT_EQ(f32_to_e5m2(-0.0f), 0x80);
  EXPECT_EQ(f32_to_e4m3(1e-30f), 0x00);
  EXPECT_EQ(f32_to_e4m3(-1e-30f), 0x80);
}

TEST(F8, SaturationInfAndNaN) {
  for (const auto& f : kFormats) {
    const uint8_t max_code = f.e4m3 ? 0x7e : 0x7b;
    EXPECT_EQ(f.enc(f.max), max_code) << f.name;
    EXPECT_EQ(f.enc(f.max * 1.01f), max_code) << f.name;
    EXPECT_EQ(f.enc(1e30f), max_code) << f.name;
    EXPECT_EQ(f.enc(INFINITY), max_code) << f.name << ": Inf saturates (__NV_SATFINITE)";
    EXPECT_EQ(f.enc(-INFINITY), max_code | 0x80) << f.name;
    EXPECT_EQ(f.enc(-1e30f), max_code | 0x80) << f.name;
    EXPECT_TRUE(is_nan_code(f.enc(NAN), f.e4m3)) << f.name;
    EXPECT_TRUE(is_nan_code(f.enc(-NAN), f.e4m3)) << f.name;
  }
  // e4m3: 464 is the midpoint between 448 and the (NaN) code above: saturates, never NaN.
  EXPECT_EQ(f32_to_e4m3(464.0f), 0x7e);
  EXPECT_EQ(f32_to_e4m3(479.9f), 0x7e);
  EXPECT_TRUE(std::isinf(e5m2_to_f32(0xfc)) && e5m2_to_f32(0xfc) < 0);
}

TEST(BF16, AllFiniteCodesRoundTrip) {
  for (uint32_t c = 0; c < 0x10000; ++c) {
    const auto h = static_cast<uint16_t>(c);
    const float v = bf16_to_f32(h);
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(v))));
      continue;
    }
    ASSERT_EQ(f32_to_bf16(v), h) << "code " << c;
  }
}

TEST(F16, AllCodesRoundTripAndTies) {
  for (uint32_t c = 0; c < 0x10000; ++c) {
    const auto h = static_cast<uint16_t>(c);
    const float v = f16_to_f32(h);
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(v))));
      continue;
    }
    ASSERT_EQ(f32_to_f16(v), h) << "code " << c;
  }
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0); 1 + 3*2^-11 ties up.
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(3.0f, -11)), 0x3c02);
}

TEST(I4, PackUnpackAllPairsAndOddLengths) {
  // Every pair of int4 values packs into the documented byte and unpacks back.
  for (int lo = -8; lo <= 7; ++lo) {
    for (int hi = -8; hi <= 7; ++hi) {
      const int8_t v[2] = {static_cast<int8_t>(lo), static_cast<int8_t>(hi)};
      uint8_t byte = 0xa5;  // poisoned
      pack_i4(v, 2, &byte);
      EXPECT_EQ(byte, static_cast<uint8_t>((lo & 0xf) | ((hi & 0xf) << 4)));
      int8_t back[2] = {99, 99};
      unpack_i4(&byte, 2, back);
      EXPECT_EQ(back[0], lo);
      EXPECT_EQ(back[1], hi);
      EXPECT_EQ(load_as_f32(&byte, DType::kI4, 0), static_cast<float>(lo));
      EXPECT_EQ(load_as_f32(&byte, DType::kI4, 1), static_cast<float>(hi));
    }
  }
  // Known bytes: -1 is 0xf, -8 is 0x8, 7 is 0x7.
  const int8_t v[5] = {-1, 7, -8, 0, 3};
  uint8_t p[3] = {0xee, 0xee, 0xee};
  pack_i4(v, 5, p);
  EXPECT_EQ(p[0], 0x7f);
  EXPECT_EQ(p[1], 0x08);
  EXPECT_EQ(p[2], 0x03);  // odd length: the last high nibble is 0
  EXPECT_EQ(dtype_bytes(DType::kI4, 5), 3u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(i4_at(p, i), v[i]);
}

TEST(I4, PackRejectsOutOfRange) {
  const int8_t bad[3] = {1, 8, 0};
  uint8_t p[2];
  try {
    pack_i4(bad, 3, p);
    FAIL() << "expected ceiling::Error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("index 1"), std::string::npos) << e.what();
  }
  const int8_t bad2[1] = {-9};
  EXPECT_ANY_THROW(pack_i4(bad2, 1, p));
}
