// The sampler's semantics (kernels/cpu/sampling.h): edge cases exactly, distributions by a
// chi-square test over many draws with fixed seeds.
#include "kernels/cpu/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "core/status.h"

namespace ceiling::cpu {
namespace {

// Chi-square critical values at p = 0.001 for df = 1..12 (a correct sampler fails 1 in 1000
// seeds; the seeds are fixed, so the test is deterministic).
constexpr double kChi2Crit[] = {0,     10.83, 13.82, 16.27, 18.47, 20.52, 22.46,
                                24.32, 26.12, 27.88, 29.59, 31.26, 32.91};

std::vector<double> softmax(const std::vector<float>& l, double t) {
  double m = -INFINITY;
  for (float x : l) m = std::max(m, static_cast<double>(x));
  std::vector<double> p(l.size());
  double s = 0;
  for (size_t i = 0; i < l.size(); ++i) s += p[i] = std::exp((l[i] - m) / t);
  for (double& x : p) x /= s;
  return p;
}

// Draws n tokens with u = sampling_uniform(seed, i) and returns the counts per id.
std::vector<int> draw(const std::vector<float>& logits, const SamplingParams& p, int n) {
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n; ++i)
    ++counts[sample_from_logits(logits.data(), static_cast<int>(logits.size()), p,
                                sampling_uniform(p.seed, i))];
  return counts;
}

// Chi-square of counts against expected probabilities (ids with probability 0 must have no
// draws).
void expect_distribution(const std::vector<int>& counts, const std::vector<double>& probs) {
  const double n = std::accumulate(counts.begin(), counts.end(), 0.0);
  double chi2 = 0;
  int df = -1;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (probs[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " has probability 0";
      continue;
    }
    const double e = n * probs[i];
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
    ++df;
  }
  ASSERT_GE(df, 1);
  ASSERT_LE(df, 12);
  EXPECT_LT(chi2, kChi2Crit[df]) << "chi-square " << chi2 << " with " << df << " dof";
}

TEST(SamplingUniform, DeterministicInRangeAndUniform) {
  EXPECT_EQ(sampling_uniform(7, 3), sampling_uniform(7, 3));
  EXPECT_NE(sampling_uniform(7, 3), sampling_uniform(7, 4));
  EXPECT_NE(sampling_uniform(7, 3), sampling_uniform(8, 3));
  std::vector<int> bins(10, 0);
  for (uint64_t i = 0; i < 50000; ++i) {
    const float u = sampling_uniform(12345, i);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    ++bins[static_cast<int>(u * 10)];
  }
  expect_distribution(bins, std::vector<double>(10, 0.1));
}

TEST(SamplingUniform, KnownValues) {
  // Pinned so every backend (and a later refactor) produces the same stream.
  EXPECT_EQ(mix64(0), 0xE220A8397B1DCDAFull);
  const uint64_t z = mix64(0 ^ mix64(0));
  EXPECT_EQ(sampling_uniform(0, 0), static_cast<float>(z >> 40) * 0x1.0p-24f);
}

TEST(Sampling, ValidateRejectsBadParams) {
  auto bad = [](auto mutate) {
    SamplingParams p;
    mutate(p);
    EXPECT_THROW(validate(p), Error);
  };
  bad([](SamplingParams& p) { p.temperature = -1; });
  bad([](SamplingParams& p) { p.temperature = NAN; });
  bad([](SamplingParams& p) { p.top_k = -1; });
  bad([](SamplingParams& p) { p.top_p = 0; });
  bad([](SamplingParams& p) { p.top_p = 1.5f; });
  bad([](SamplingParams& p) { p.min_p = -0.1f; });
  bad([](SamplingParams& p) { p.min_p = 1.1f; });
  bad([](SamplingParams& p) { p.repetition_penalty = 0; });
  bad([](SamplingParams& p) { p.presence_penalty = INFINITY; });
  bad([](SamplingParams& p) { p.frequency_penalty = NAN; });
  EXPECT_NO_THROW(validate(SamplingParams{}));
}

TEST(Sampling, GreedyTakesArgmaxTiesToLowestId) {
  SamplingParams p;
  p.temperature = 0;
  const std::vector<float> l = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  for (float u : {0.0f, 0.5f, 0.999f}) EXPECT_EQ(sample_from_logits(l.data(), 5, p, u), 1);
  const std::vector<float> eq(7, 3.0f);
  EXPECT_EQ(sample_from_logits(eq.data(), 7, p, 0.9f), 0);
}

TEST(Sampling, TopK1IsGreedy) {
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0, 3);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> l(97);
    for (auto& x : l) x = nd(rng);
    if (trial % 3 == 0) l[trial % 97] = l[(trial + 5) % 97] = 50;  // an exact tie at the top
    SamplingParams greedy;
    greedy.temperature = 0;
    SamplingParams k1;
    k1.top_k = 1;
    k1.temperature = 1.3f;
    const float u = sampling_uniform(99, trial);
    EXPECT_EQ(sample_from_logits(l.data(), 97, k1, u), sample_from_logits(l.data(), 97, greedy, u));
  }
}

TEST(Sampling, AllEqualLogitsAreUniform) {
  SamplingParams p;
  p.seed = 2024;
  const std::vector<float> l(8, -3.25f);
  expect_distribution(draw(l, p, 40000), std::vector<double>(8, 1.0 / 8));
}

TEST(Sampling, MatchesSoftmaxWithTemperature) {
  const std::vector<float> l = {1.0f, 0.2f, -0.5f, 2.0f, 0.0f, 1.5f, -2.0f, 0.7f, 0.1f, -1.0f};
  for (float t : {0.5f, 1.0f, 1.7f}) {
    SamplingParams p;
    p.temperature = t;
    p.seed = 77;
    expect_distribution(draw(l, p, 60000), softmax(l, t));
  }
}

TEST(Sampling, TopKKeepsTheKMostLikely) {
  const std::vector<float> l = {1.0f, 3.0f, 2.0f, 0.0f, 2.5f, -1.0f};
  SamplingParams p;
  p.top_k = 3;
  p.seed = 5;
  std::vector<double> want = softmax({0, 3, 2, 0, 2.5f, 0}, 1.0);
  want[0] = want[3] = want[5] = 0;
  const double s = want[1] + want[2] + want[4];
  for (double& x : want) x /= s;
  expect_distribution(draw(l, p, 30000), want);
}

TEST(Sampling, TopPKeepsTheSmallestSetReachingTheMass) {
  // Probabilities 0.5, 0.3, 0.15, 0.05 (ids 2, 0, 3, 1).
  const std::vector<float> l = {std::log(0.3f), std::log(0.05f), std::log(0.5f), std::log(0.15f)};
  SamplingParams p;
  p.top_p = 0.75f;  // 0.5 < 0.75 <= 0.8: ids 2 and 0
  p.seed = 11;
  expect_distribution(draw(l, p, 30000), {0.3 / 0.8, 0, 0.5 / 0.8, 0});
  p.top_p = 1e-6f;  // tiny: only the top token
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(sample_from_logits(l.data(), 4, p, sampling_uniform(3, i)), 2);
  p.top_p = 0.96f;  // needs all four
  expect_distribution(draw(l, p, 30000), {0.3, 0.05, 0.5, 0.15});
}

TEST(Sampling, TopPIsRelativeToTheTopKSet) {
  // Probabilities 0.4, 0.3, 0.2, 0.1; top-2 renormalized: 0.571, 0.429. top_p 0.55 keeps only
  // the first (0.571 >= 0.55), although 0.4 alone is < 0.55 of the full distribution.
  const std::vector<float> l = {std::log(0.4f), std::log(0.3f), std::log(0.2f), std::log(0.1f)};
  SamplingParams p;
  p.top_k = 2;
  p.top_p = 0.55f;
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(sample_from_logits(l.data(), 4, p, sampling_uniform(8, i)), 0);
}

TEST(Sampling, MinPDropsUnlikelyTokens) {
  const std::vector<float> l = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  SamplingParams p;
  p.min_p = 0.2f;  // keep p >= 0.1: ids 0, 1, 2
  p.seed = 13;
  expect_distribution(draw(l, p, 30000), {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0});
  p.min_p = 1.0f;  // only the top token
  for (int i = 0; i < 50; ++i)
    EXPECT_EQ(sample_from_logits(l.data(), 4, p, sampling_uniform(4, i)), 0);
}

TEST(Sampling, PickWalksKeptTokensInIdOrder) {
  // Four equal weights: total 4; u·total = 1.2 is passed by the running sum at the 2nd kept id.
  const std::vector<float> l = {0.0f, -INFINITY, 0.0f, 0.0f, 0.0f};
  SamplingParams p;
  EXPECT_EQ(sample_from_logits(l.data(), 5, p, 0.0f), 0);
  EXPECT_EQ(sample_from_logits(l.data(), 5, p, 0.3f), 2);
  EXPECT_EQ(sample_from_logits(l.data(), 5, p, 0.5f), 3);  // running sum 2 is not > 2
  EXPECT_EQ(sample_from_logits(l.data(), 5, p, 0.99f), 4);
  EXPECT_THROW(sample_from_logits(l.data(), 5, p, 1.0f), Error);
  EXPECT_THROW(sample_from_logits(l.data(), 5, p, -0.1f), Error);
}

TEST(Sampling, NegativeInfinityIsNeverPicked) {
  const std::vector<float> l = {-INFINITY, 0.0f, -INFINITY, 1.0f, -INFINITY};
  SamplingParams p;
  p.temperature = 5.0f;
  p.seed = 21;
  const auto c = draw(l, p, 5000);
  EXPECT_EQ(c[0] + c[2] + c[4], 0);
  EXPECT_GT(c[1], 0);
  EXPECT_GT(c[3], 0);
}

TEST(Sampling, NonFiniteLogitsAreErrors) {
  SamplingParams p;
  std::vector<float> l = {0.0f, NAN, 1.0f};
  EXPECT_THROW(sample_from_logits(l.data(), 3, p, 0.5f), Error);
  p.temperature = 0;
  EXPECT_THROW(sample_from_logits(l.data(), 3, p, 0.5f), Error);  // greedy too
  l = {0.0f, INFINITY, 1.0f};
  EXPECT_THROW(sample_from_logits(l.data(), 3, p, 0.5f), Error);
  l = {-INFINITY, -INFINITY};
  EXPECT_THROW(sample_from_logits(l.data(), 2, p, 0.5f), Error);
  try {
    l = {0.0f, 0.0f, NAN};
    sample_from_logits(l.data(), 3, p, 0.5f);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token 2"), std::string::npos) << e.what();
  }
}

TEST(Sampling, RepetitionPenaltyIsHfStyleOverPromptAndGenerated) {
  std::vector<float> l = {2.0f, -2.0f, 2.0f, -2.0f, 1.0f};
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  const std::vector<int32_t> prompt = {0, 1, 0}, generated = {3};
  apply_penalties(l.data(), 5, p, prompt, generated);
  EXPECT_EQ(l,
            (std::vector<float>{1.0f, -4.0f, 2.0f, -4.0f, 1.0f}));  // once per token, not per use
}

TEST(Sampling, PresenceAndFrequencyPenaltiesCountGeneratedTokens) {
  std::vector<float> l = {1.0f, 1.0f, 1.0f, 1.0f};
  SamplingParams p;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  const std::vector<int32_t> prompt = {3, 3}, generated = {1, 2, 2, 2};
  apply_penalties(l.data(), 4, p, prompt, generated);
  EXPECT_FLOAT_EQ(l[0], 1.0f);
  EXPECT_FLOAT_EQ(l[1], 1.0f - 0.5f - 0.25f);
  EXPECT_FLOAT_EQ(l[2], 1.0f - 0.5f - 0.75f);
  EXPECT_FLOAT_EQ(l[3], 1.0f);  // prompt tokens are not penalized by presence/frequency
}

TEST(Sampling, PenaltiesChangeTheGreedyPick) {
  const std::vector<float> l = {3.0f, 2.5f, 0.0f};
  SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 1.5f;
  const std::vector<int32_t> gen = {0};
  EXPECT_EQ(sample_token(l.data(), 3, p, {}, gen, 0.5f), 1);  // 3/1.5 = 2 < 2.5
  EXPECT_EQ(l[0], 3.0f);                                      // input untouched
  const std::vector<int32_t> bad = {3};
  EXPECT_THROW(sample_token(l.data(), 3, p, bad, {}, 0.5f), Error);
}

TEST(Sampling, LogitBiasAddsBeforePenaltiesAndMasks) {
  const std::vector<float> l = {3.0f, 2.5f, 0.0f};
  SamplingParams p;
  p.temperature = 0;
  const std::vector<LogitBias> down = {{0, -1.0f}};
  EXPECT_EQ(sample_token(l.data(), 3, p, {}, {}, 0.5f, down), 1);  // 2 < 2.5
  const std::vector<LogitBias> mask = {{0, -INFINITY}, {1, -INFINITY}};
  EXPECT_EQ(sample_token(l.data(), 3, p, {}, {}, 0.5f, mask), 2);
  p.temperature = 1;
  for (float u : {0.0f, 0.3f, 0.99f})  // masked tokens are never sampled
    EXPECT_EQ(sample_token(l.data(), 3, p, {}, {}, u, mask), 2);
  const std::vector<LogitBias> twice = {{2, 2.0f}, {2, 2.0f}};  // repeated ids add up
  std::vector<float> row = l;
  apply_logit_bias(row.data(), 3, twice);
  EXPECT_FLOAT_EQ(row[2], 4.0f);
  const std::vector<LogitBias> bad = {{3, 1.0f}};
  EXPECT_THROW(apply_logit_bias(row.data(), 3, bad), Error);
  EXPECT_EQ(l[0], 3.0f);  // input untouched
}

}  // namespace
}  // namespace ceiling::cpu
