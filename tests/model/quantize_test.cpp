// The low-precision formats on the host (model/quantize.h): E4M3 codes against known values,
// and quantize-on-load round trips within each format's step-derived bound over fresh random
// weights of awkward shapes.
#include "model/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/status.h"

namespace ceiling {
namespace {

// fp8: half an ulp of a 3-bit mantissa, relative; half the subnormal step 2^-9, absolute.
constexpr float kFp8HalfUlpRel = 0x1p-4f;
constexpr float kFp8HalfSubnormal = 0x1p-10f;
// int4: half a step, plus what the bf16 rounding of the scale can add at the range's ends.
constexpr float kInt4Steps = 0.5f + 15.0f * 0x1p-8f;
// The fp32 arithmetic of w / s and q · s around the bound.
constexpr float kFp32Slack = 1e-6f;

std::vector<uint16_t> random_bf16(int64_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = f32_to_bf16(d(rng));
  return v;
}

TEST(E4m3, KnownCodes) {
  EXPECT_EQ(f32_to_e4m3(448.0f), 0x7e);
  EXPECT_EQ(f32_to_e4m3(240.0f), 0x77);
  EXPECT_EQ(f32_to_e4m3(1.0f), 0x38);
  EXPECT_EQ(f32_to_e4m3(-0.5f), 0xb0);
  EXPECT_EQ(f32_to_e4m3(0x1p-9f), 0x01);  // smallest subnormal
  EXPECT_EQ(f32_to_e4m3(1.0625f), 0x38);  // a tie rounds to even (1.0)
  EXPECT_EQ(f32_to_e4m3(1.1875f), 0x3a);  // a tie rounds to even (1.25)
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0x08), 0x1p-6f);  // smallest normal
}

TEST(E4m3, EveryCodeRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;  // NaN
    EXPECT_EQ(f32_to_e4m3(e4m3_to_f32(static_cast<uint8_t>(c))), c) << c;
  }
}

TEST(E4m3, KvRoundingUsesTheScale) {
  EXPECT_EQ(e4m3_round(3.3f, 2.0f), 3.25f);  // 1.65 -> 1.625
  EXPECT_EQ(e4m3_round(1000.0f, 1.0f), 448.0f);
  EXPECT_EQ(e4m3_round(1000.0f, 4.0f), 1024.0f);  // 250 -> 256
}

struct Shape {
  int64_t N, K;
};
const Shape kShapes[] = {{1, 1}, {7, 17}, {33, 64}, {5, 128}, {3, 576}};

TEST(QuantizeOnLoad, Fp8WithinHalfAnUlp) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(fmt::format("{}x{}", s.N, s.K));
    const auto v = random_bf16(s.N * s.K, static_cast<uint32_t>(s.N * 131 + s.K), 0.05f);
    const TensorView w(const_cast<uint16_t*>(v.data()), DType::kBF16, {s.N, s.K});
    WeightArena arena;
    const QuantLinear q = quantize_fp8(w, arena);
    ASSERT_EQ(q.format, WeightFormat::kFp8);
    std::vector<float> row(static_cast<size_t>(s.K));
    for (int64_t n = 0; n < s.N; ++n) {
      dequantize_row(q, n, s.K, row.data());
      const float sc = q.scale.as<float>()[n];
      float amax = 0;
      for (int64_t k = 0; k < s.K; ++k) {
        const float x = bf16_to_f32(v[n * s.K + k]);
        amax = std::max(amax, std::fabs(x));
        const float bound = std::max(kFp8HalfUlpRel * std::fabs(x), kFp8HalfSubnormal * sc);
        ASSERT_LE(std::fabs(x - row[k]), bound * (1 + kFp32Slack) + 1e-30f) << n << "," << k;
      }
      EXPECT_FLOAT_EQ(sc, amax / kE4m3Max);  // the row's largest maps to 448
    }
  }
}

// W8A8's input side: a scale per row (its max / 448), the row's largest value at the E4M3
// maximum, every value within half an ulp (or half the subnormal step) of x / scale, and an
// all-zero row at scale 1 with zero codes.
TEST(QuantizeActivations, PerRowScaleWithinHalfAnUlp) {
  const int64_t K = 1000;
  for (float range : {1e-3f, 1.0f, 3000.0f}) {
    const auto raw = random_bf16(K, static_cast<uint32_t>(range * 7 + 1), range);
    std::vector<float> x(static_cast<size_t>(K));
    float amax = 0;
    for (int64_t k = 0; k < K; ++k) {
      x[k] = bf16_to_f32(raw[k]);
      amax = std::max(amax, std::fabs(x[k]));
    }
    std::vector<uint8_t> q(static_cast<size_t>(K));
    float s = 0;
    quantize_act_row_fp8(x.data(), K, q.data(), &s);
    EXPECT_EQ(s, amax / kE4m3Max) << range;
    bool at_max = false;
    for (int64_t k = 0; k < K; ++k) {
      const float back = e4m3_to_f32(q[k]) * s;
      EXPECT_LE(
          std::fabs(back - x[k]),
          std::max(kFp8HalfUlpRel * std::fabs(x[k]), kFp8HalfSubnormal * s) * (1 + kFp32Slack))
          << "range " << range << " k " << k;
      at_max = at_max || std::fabs(e4m3_to_f32(q[k])) == kE4m3Max;
    }
    EXPECT_TRUE(at_max) << range;
  }
  std::vector<float> zero(64, 0.0f);
  std::vector<uint8_t> q(64, 0xAB);
  float s = 0;
  quantize_act_row_fp8(zero.data(), 64, q.data(), &s);
  EXPECT_EQ(s, 1.0f);
  for (uint8_t v : q) EXPECT_EQ(v, 0);
}

TEST(QuantizeOnLoad, Int4WithinHalfAStep) {
  for (const Shape& s : kShapes)
    for (int G : {64, 128}) {
      if (s.K % G != 0) continue;
      SCOPED_TRACE(fmt::format("{}x{} g{}", s.N, s.K, G));
      auto v = random_bf16(s.N * s.K, static_cast<uint32_t>(s.N * 7 + s.K + G), 0.05f);
      v[0] = f32_to_bf16(0.3f);  // an outlier widens one group
      const TensorView w(v.data(), DType::kBF16, {s.N, s.K});
      WeightArena arena;
      const QuantLinear q = quantize_int4(w, G, arena);
      ASSERT_EQ(q.format, WeightFormat::kInt4);
      std::vector<float> row(static_cast<size_t>(s.K));
      for (int64_t n = 0; n < s.N; ++n) {
        dequantize_row(q, n, s.K, row.data());
        for (int64_t k = 0; k < s.K; ++k) {
          const float sc = q.scale.as<float>()[n * (s.K / G) + k / G];
          const float x = bf16_to_f32(v[n * s.K + k]);
          ASSERT_LE(std::fabs(x - row[k]), sc * kInt4Steps * (1 + kFp32Slack)) << n << "," << k;
          ASSERT_LE(q.qweight.as<uint8_t>()[n * s.K + k], 15);
        }
      }
    }
}

TEST(QuantizeOnLoad, Int4GroupRule) {
  EXPECT_EQ(int4_group_for(1536, 128), 128);
  EXPECT_EQ(int4_group_for(576, 128), 64);   // SmolLM2's hidden size
  EXPECT_EQ(int4_group_for(172, 128), 172);  // stories260K's MLP: one group per row
  std::vector<uint16_t> v(2 * 96, f32_to_bf16(0.5f));
  const TensorView w(v.data(), DType::kBF16, {2, 96});
  WeightArena arena;
  EXPECT_THROW(quantize_int4(w, 64, arena), Error);
}

TEST(QuantizeOnLoad, ZeroRowsAndGroupsStayZero) {
  std::vector<uint16_t> v(2 * 64, 0);
  const TensorView w(v.data(), DType::kBF16, {2, 64});
  WeightArena arena;
  std::vector<float> row(64, 1.0f);
  dequantize_row(quantize_fp8(w, arena), 1, 64, row.data());
  for (float x : row) EXPECT_EQ(x, 0.0f);
  std::fill(row.begin(), row.end(), 1.0f);
  dequantize_row(quantize_int4(w, 64, arena), 1, 64, row.data());
  for (float x : row) EXPECT_EQ(x, 0.0f);
}

}  // namespace
}  // namespace ceiling
