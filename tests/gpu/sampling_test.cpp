// GPU argmax and sampler vs src/kernels/cpu/ (same u ⇒ same token except at rounding
// boundaries), the token-count kernels, and the uniforms.
#include "bench/cases/sampling.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/status.h"
#include "gpu_test_util.h"
#include "kernels/cpu/sampling.h"
#include "kernels/cuda/sampling.h"

namespace ceiling {
namespace {

using namespace gpu_test;

TEST(GpuArgmax, MatchesReferenceWithTies) {
  CEILING_REQUIRE_GPU();
  Stream s;
  for (int S : {1, 5})
    for (int V : {1, 3, 1001, 50000}) expect_case_passes(*bench::make_argmax_case(S, V), s);
}

// Rows of >= 64K logits are split over a cluster of CTAs: ties across the slices, prime V (no
// float4 path, slices of unequal length), up to 64 rows.
TEST(GpuArgmax, SplitRowsMatchReference) {
  CEILING_REQUIRE_GPU();
  Stream s;
  for (int S : {1, 2, 7, 64})
    for (int V : {65536, 65537, 128256, 131071})
      expect_case_passes(*bench::make_argmax_case(S, V), s);
}

TEST(GpuSampler, ManyRandomRowsMatchCpu) {
  CEILING_REQUIRE_GPU();
  Stream s;
  cpu::SamplingParams p;
  for (int V : {7, 1000, 32000}) expect_case_passes(*bench::make_sample_case(512, V, p, true), s);
}

TEST(GpuSampler, FixedParamsLargeVocab) {
  CEILING_REQUIRE_GPU();
  Stream s;
  cpu::SamplingParams p;
  p.temperature = 0.7f;
  p.top_k = 50;
  p.top_p = 0.9f;
  p.repetition_penalty = 1.1f;
  expect_case_passes(*bench::make_sample_case(16, 128256, p), s);
  // Slices of unequal length (V prime: no float4 path), the smallest clustered row, the limit.
  for (int V : {131071, 16384, cuda::sampler_max_vocab()})
    expect_case_passes(*bench::make_sample_case(3, V, p), s);
  p.top_k = 3000;  // a top-k set spanning several CTAs of the cluster
  expect_case_passes(*bench::make_sample_case(4, 128256, p), s);
  // More rows than kFewRows: the smallest cluster whose slices fit (4 CTAs for 128256, 2 for
  // 90001, 1 for 40000).
  for (int V : {128256, 90001, 40000}) expect_case_passes(*bench::make_sample_case(24, V, p), s);
  p.top_k = 0;
  p.top_p = 0.5f;
  p.min_p = 0.01f;
  expect_case_passes(*bench::make_sample_case(16, 128256, p), s);
}

// ---- Rows built here (the benchmark case draws its own): the candidate-list paths of the
// sampler and their boundaries. No token histories (counts null): penalties are covered above.

struct Rows {
  int V = 0;
  std::vector<float> logits;  // [S, V]
  std::vector<cpu::SamplingParams> ps;
  std::vector<float> us;
  explicit Rows(int v) : V(v) {}
  void add(const std::vector<float>& row, const cpu::SamplingParams& p, float u) {
    logits.insert(logits.end(), row.begin(), row.end());
    ps.push_back(p);
    us.push_back(u);
  }
  int S() const { return static_cast<int>(ps.size()); }
};

cpu::SamplingParams params(float T, int k, float p, float min_p = 0.0f) {
  cpu::SamplingParams q;
  q.temperature = T;
  q.top_k = k;
  q.top_p = p;
  q.min_p = min_p;
  return q;
}

// Runs cuda::sample on the rows; every pick must equal cpu::sample_from_logits's (-1 where the
// CPU rejects the row), unless the CPU picks the GPU's token with u or top_p moved by
// 2e-5 + 6e-8·V (a rounding boundary of the CPU's fp32 sums, as in the benchmark case's check).
void expect_rows_match(const Rows& r, cudaStream_t s, const std::string& what) {
  SCOPED_TRACE(what + " V " + std::to_string(r.V) + " S " + std::to_string(r.S()));
  const int S = r.S(), V = r.V;
  DeviceBuffer dl(4 * r.logits.size()), dp(sizeof(cuda::GpuSamplingParams) * S), du(4 * S),
      dout(4 * S);
  to_device(dl.as<float>(), r.logits, s);
  std::vector<cuda::GpuSamplingParams> gp;
  for (const auto& p : r.ps) gp.push_back(bench::to_gpu_params(p));
  to_device(dp.as<cuda::GpuSamplingParams>(), gp, s);
  to_device(du.as<float>(), r.us, s);
  ASSERT_EQ(cudaMemsetAsync(dout.get(), 0x7f, 4 * S, s), cudaSuccess);  // not a token, not -1
  cuda::SampleArgs a;
  a.logits = dl.as<float>();
  a.params = dp.as<cuda::GpuSamplingParams>();
  a.u = du.as<float>();
  a.out = dout.as<int32_t>();
  a.S = S;
  a.V = V;
  ASSERT_TRUE(cuda::sample(a, s).ok());
  const auto got = to_host(dout.as<int32_t>(), S, s);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  int wrong = 0;
  for (int i = 0; i < S; ++i) {
    const float* row = r.logits.data() + static_cast<size_t>(i) * V;
    const cpu::SamplingParams& p = r.ps[i];
    const auto cpu_pick = [&](const cpu::SamplingParams& q, float u) {
      try {
        return cpu::sample_from_logits(row, V, q, u);
      } catch (const Error&) {
        return -1;
      }
    };
    const int32_t ref = cpu_pick(p, r.us[i]);
    if (got[i] == ref) continue;
    bool explained = false;
    if (ref >= 0) {
      const float d = 2e-5f + 6e-8f * static_cast<float>(V);
      const auto at_u = [&](float shift) {
        return cpu_pick(p, std::clamp(r.us[i] + shift, 0.0f, 0.99999994f));
      };
      explained = at_u(-d) <= got[i] && got[i] <= at_u(d);
      for (float dp2 : {-d, d}) {
        cpu::SamplingParams q = p;
        q.top_p = std::clamp(q.top_p + dp2, 1e-6f, 1.0f);
        explained = explained || cpu_pick(q, r.us[i]) == got[i];
      }
    }
    if (!explained && ++wrong <= 5)
      ADD_FAILURE() << "row " << i << ": gpu " << got[i] << " cpu " << ref << " (T "
                    << p.temperature << " k " << p.top_k << " p " << p.top_p << " minp " << p.min_p
                    << " u " << r.us[i] << ")";
  }
  EXPECT_EQ(wrong, 0);
}

std::vector<float> uniform_row(std::mt19937_64& rng, int V, float scale, bool quantize = false) {
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> v(V);
  for (auto& x : v) {
    x = unit(rng) * scale;
    if (quantize) x = std::round(x * 2) / 2;
  }
  return v;
}

float draw_u(std::mt19937_64& rng) {
  return cpu::sampling_uniform(rng(), 0);
}

// Every logit equal: every weight is 1, the threshold bin holds the whole row (far beyond the
// candidate list: the selection runs over the slices), and every tie goes by id.
TEST(GpuSamplerLists, EqualLogitsThresholdBinIsTheRow) {
  CEILING_REQUIRE_GPU();
  Stream s;
  std::mt19937_64 rng(fresh_seed());
  for (int V : {128256, 32000, 4099}) {
    for (int rows : {3, 20}) {  // 20 rows: smaller clusters (one CTA for 32000 and 4099)
      Rows r(V);
      const std::vector<float> row(V, 1.5f);
      const cpu::SamplingParams cases[] = {
          params(0.7f, 1, 1.0f),  params(0.7f, 50, 0.9f), params(1.0f, 5000, 0.5f),
          params(1.0f, 0, 0.5f),  params(1.0f, 0, 1e-6f), params(0.7f, 0, 1.0f, 0.5f),
          params(0.7f, 0, 1.0f),  params(0.0f, 0, 1.0f),  params(0.7f, 4097, 0.9f),
          params(0.7f, 64, 0.3f), params(0.7f, 65, 0.3f), params(1.3f, 3, 1.0f, 1.0f)};
      for (int i = 0; i < rows; ++i) r.add(row, cases[i % std::size(cases)], draw_u(rng));
      expect_rows_match(r, s, "equal logits");
    }
  }
}

// Logits on a grid of 0.5: large tie groups, so top-k cuts inside a group (ties by id across
// CTAs), top-p lands in a group, and the threshold bin may or may not fit the list.
TEST(GpuSamplerLists, QuantizedTiesAtTheThresholds) {
  CEILING_REQUIRE_GPU();
  Stream s;
  std::mt19937_64 rng(fresh_seed());
  const int ks[] = {0, 1, 7, 50, 64, 65, 1000, 3000, 5000};
  const float tps[] = {1.0f, 0.95f, 0.5f, 1e-6f};
  for (int V : {128256, 100003, 4099}) {
    for (int rows : {8, 24}) {
      Rows r(V);
      for (int i = 0; i < rows; ++i) {
        const float scale = i % 3 == 0 ? 0.5f : (i % 3 == 1 ? 3.0f : 8.0f);
        const cpu::SamplingParams p =
            params(i % 4 == 0 ? 1.5f : 0.7f, ks[rng() % std::size(ks)], tps[rng() % std::size(tps)],
                   i % 5 == 0 ? 0.02f : 0.0f);
        r.add(uniform_row(rng, V, scale, true), p, draw_u(rng));
      }
      expect_rows_match(r, s, "quantized");
    }
  }
}

// The top tokens form a block of n_top equal (or nearly equal: one level-1 bin, different
// digits) logits above the rest, so the candidates number exactly n_top: around the one-warp
// limit (64) and the list capacity (4096 at one row of 128256).
TEST(GpuSamplerLists, CandidateCountAtTheListBoundaries) {
  CEILING_REQUIRE_GPU();
  Stream s;
  std::mt19937_64 rng(fresh_seed());
  const int V = 128256;
  for (bool distinct : {false, true}) {
    for (int n_top : {1, 63, 64, 65, 4095, 4096, 4097, 9000}) {
      Rows r(V);
      for (int k : {1, 50, 64, 65}) {
        std::vector<float> row = uniform_row(rng, V, 4.0f);
        for (auto& x : row) x -= 6.0f;  // the rest ≤ -2: weights ≤ e^-10 below the block
        std::vector<int> ids(V);
        for (int i = 0; i < V; ++i) ids[i] = i;
        std::shuffle(ids.begin(), ids.end(), rng);
        for (int i = 0; i < n_top; ++i) row[ids[i]] = distinct ? 8.0f - 1e-6f * i : 8.0f;
        r.add(row, params(0.7f, k, k == 50 ? 0.9f : 1.0f), draw_u(rng));
      }
      // top-k off: top-p over the block (mass-based bin), min-p over it, temperature alone.
      std::vector<float> row = uniform_row(rng, V, 4.0f);
      for (auto& x : row) x -= 6.0f;
      for (int i = 0; i < n_top; ++i) row[(i * 7919) % V] = distinct ? 8.0f - 1e-6f * i : 8.0f;
      r.add(row, params(0.7f, 0, 0.9f), draw_u(rng));
      r.add(row, params(0.7f, 0, 1.0f, 0.5f), draw_u(rng));
      r.add(row, params(0.7f, 0, 1.0f), draw_u(rng));
      expect_rows_match(r, s, distinct ? "block of distinct" : "block of equal");
    }
  }
}

// top-p on a tie group, where the reference's fp32 target decides: n_top equal logits at the
// maximum (weights exactly 1) above the rest, T 1, top-k k ≤ n_top, top-p 0.3, min-p 0.02 (the
// mixed case's failing row: row 375 of sample_mixed S=512 V=32000 seed 11011704765386751168). The
// top-k mass is exactly k, and 0.3f · k is just above an integer that fp32 rounds it down to for
// k = 60, 1000, 4000 (0.3f · 1000 = 300.0000119 → 300.0f): the CPU keeps 0.3 · k of the ties, a
// target taken in double kept one more. u near 1 picks the last kept tie, so one token more is a
// different (and, by more than the tests' tolerance, wrong) pick. The blocks of 1500 ties go
// through the candidate list (one-warp finish at k = 60, radix select at 1000), those of 5000 over
// the slices; top-k off on a row of only the block (every other logit -Inf) takes the row's exact
// level-1 masses. Fixed seed: the cases are deterministic.
TEST(GpuSamplerLists, TopPOnTieGroupUsesFp32Target) {
  CEILING_REQUIRE_GPU();
  Stream s;
  std::mt19937_64 rng(20261124);
  const int V = 32000;
  for (int rows : {6, 20}) {  // clusters of 8 CTAs, and one CTA per row
    Rows r(V);
    for (int i = 0; i < rows; ++i) {
      const int n_top = i % 2 == 0 ? 1500 : 5000;
      const int kcase = (i / 2) % 3;
      const int k = kcase == 0 ? 1000 : (kcase == 1 ? 60 : (n_top == 5000 ? 4000 : 0));
      std::vector<float> row = uniform_row(rng, V, 5.5f);
      for (auto& x : row) x = k == 0 ? -INFINITY : x - 2.5f;  // the rest ≤ 3: w ≤ e^-5 < min-p
      std::vector<int> ids(V);
      for (int j = 0; j < V; ++j) ids[j] = j;
      std::shuffle(ids.begin(), ids.end(), rng);
      for (int j = 0; j < (k == 0 ? 1000 : n_top); ++j) row[ids[j]] = 8.0f;
      const float u = k == 60 ? 0.99f : (k == 4000 ? 0.9995f : 0.999f);
      r.add(row, params(1.0f, k, 0.3f, 0.02f), u);
    }
    // Rows like the failing one: logits on a grid of 0.5 (ties at every level, ~1000 at the max).
    for (int i = 0; i < 4; ++i)
      r.add(uniform_row(rng, V, 8.0f, true), params(1.0f, 1000, 0.3f, 0.02f),
            i == 0 ? 0.85454834f : draw_u(rng));
    expect_rows_match(r, s, "top-p on a tie group");
  }
}

// top-k larger than the list (the k-th element found over the slices), and top-k at 1.
TEST(GpuSamplerLists, TopKBeyondTheList) {
  CEILING_REQUIRE_GPU();
  Stream s;
  std::mt19937_64 rng(fresh_seed());
  for (int V : {128256, 131071}) {
    Rows r(V);
    for (int k : {1, 4095, 4096, 4097, 5000, 20000, V - 1, V, V + 5})
      for (float p : {1.0f, 0.9f})
        r.add(uniform_row(rng, V, 8.0f), params(0.7f, k, p, k == 5000 ? 0.01f : 0.0f), draw_u(rng));
    expect_rows_match(r, s, "large k");
  }
}

// top-k off: top-p over the whole row (exact bin masses), tiny top-p, min-p alone, temperature
// alone, on flat rows (sets of many thousand tokens: the slices) and peaked ones (the list).
TEST(GpuSamplerLists, TopPMinPAndTemperatureWithoutTopK) {
  CEILING_REQUIRE_GPU();
  Stream s;
  std::mt19937_64 rng(fresh_seed());
  for (int V : {128256, 32000, 1000}) {
    for (int rows : {12, 30}) {
      Rows r(V);
      const float scales[] = {0.5f, 3.0f, 20.0f};
      const float tps[] = {0.95f, 0.5f, 0.3f, 1e-6f, 1.0f};
      const float mps[] = {0.0f, 0.0f, 0.05f, 0.9f};
      const float temps[] = {0.3f, 1.0f, 2.0f};
      for (int i = 0; i < rows; ++i) {
        const cpu::SamplingParams p =
            params(temps[rng() % 3], 0, tps[rng() % std::size(tps)], mps[rng() % std::size(mps)]);
        r.add(uniform_row(rng, V, scales[i % 3]), p, draw_u(rng));
      }
      expect_rows_match(r, s, "no top-k");
    }
  }
}

// Masked tokens (-Inf), fewer positive weights than top_k (top-k then off), weights that
// underflow to 0 at a low temperature, and invalid rows (NaN, +Inf, every logit -Inf: -1).
TEST(GpuSamplerLists, MaskedUnderflowAndInvalidRows) {
  CEILING_REQUIRE_GPU();
  Stream s;
  std::mt19937_64 rng(fresh_seed());
  for (int V : {128256, 50001, 37}) {
    for (int rows : {10, 20}) {
      Rows r(V);
      for (int i = 0; i < rows; ++i) {
        std::vector<float> row = uniform_row(rng, V, 8.0f);
        const int kind = i % 6;
        if (kind == 0 || kind == 1) {  // all but a few masked
          const int keep = kind == 0 ? 3 : 40;
          for (int j = 0; j < V; ++j)
            if (j % std::max(1, V / keep) != 1) row[j] = -INFINITY;
        }
        if (kind == 2) row[rng() % V] = NAN;
        if (kind == 3) row[rng() % V] = INFINITY;
        if (kind == 4 && i % 12 == 4) std::fill(row.begin(), row.end(), -INFINITY);
        const float T = kind == 5 ? 0.02f : 0.8f;  // T = 0.02: most weights are 0
        const int k = i % 3 == 0 ? 50 : (i % 3 == 1 ? 0 : 1);
        r.add(row, params(T, k, i % 2 ? 0.8f : 1.0f, i % 4 == 3 ? 0.1f : 0.0f), draw_u(rng));
      }
      expect_rows_match(r, s, "masked / invalid");
    }
  }
}

// Vocabularies from 1 token to a few hundred (the one-warp finish and the small lists), with
// the parameters of the mixed sweep.
TEST(GpuSamplerLists, TinyVocabularies) {
  CEILING_REQUIRE_GPU();
  Stream s;
  std::mt19937_64 rng(fresh_seed());
  const int ks[] = {0, 1, 2, 7, 63, 64, 65, 1000};
  const float tps[] = {1.0f, 0.95f, 0.5f, 1e-6f};
  const float temps[] = {0.0f, 0.5f, 1.0f, 1.5f};
  for (int V : {1, 2, 3, 5, 63, 64, 65, 127, 300}) {
    Rows r(V);
    for (int i = 0; i < 40; ++i) {
      const cpu::SamplingParams p = params(temps[rng() % 4], ks[rng() % std::size(ks)],
                                           tps[rng() % std::size(tps)], i % 3 == 0 ? 0.1f : 0.0f);
      r.add(uniform_row(rng, V, i % 2 ? 3.0f : 0.5f, i % 4 == 1), p, draw_u(rng));
    }
    expect_rows_match(r, s, "tiny V");
  }
}

TEST(GpuSampler, UniformsMatchCpu) {
  CEILING_REQUIRE_GPU();
  Stream s;
  const int S = 100;
  std::vector<uint64_t> seeds(S);
  std::vector<int64_t> steps(S);
  for (int i = 0; i < S; ++i) {
    seeds[i] = fresh_seed() + i;
    steps[i] = i * 7919;
  }
  DeviceBuffer ds(S * 8), dt(S * 8), du(S * 4);
  to_device(ds.as<uint64_t>(), seeds, s);
  to_device(dt.as<int64_t>(), steps, s);
  ASSERT_TRUE(
      cuda::sampling_uniforms(ds.as<uint64_t>(), dt.as<int64_t>(), S, du.as<float>(), s).ok());
  const auto u = to_host(du.as<float>(), S, s);
  for (int i = 0; i < S; ++i) EXPECT_EQ(u[i], cpu::sampling_uniform(seeds[i], steps[i])) << i;
}

TEST(GpuSampler, CountKernels) {
  CEILING_REQUIRE_GPU();
  Stream s;
  const int V = 50, rows = 3;
  DeviceBuffer counts(rows * V * 4), ids(4 * 4), tok(2 * 4), rmap(2 * 4);
  ASSERT_EQ(cudaMemsetAsync(counts.get(), 0, rows * V * 4, s), cudaSuccess);
  to_device(ids.as<int32_t>(), std::vector<int32_t>{3, 3, 49, 60}, s);
  to_device(tok.as<int32_t>(), std::vector<int32_t>{3, -1}, s);
  to_device(rmap.as<int32_t>(), std::vector<int32_t>{2, 0}, s);
  ASSERT_TRUE(cuda::counts_add_prompt(counts.as<int32_t>(), V, 2, ids.as<int32_t>(), 4, s).ok());
  ASSERT_TRUE(cuda::counts_add_generated(counts.as<int32_t>(), V, rmap.as<int32_t>(),
                                         tok.as<int32_t>(), 2, s)
                  .ok());
  ASSERT_TRUE(cuda::counts_add_generated(counts.as<int32_t>(), V, rmap.as<int32_t>(),
                                         tok.as<int32_t>(), 2, s)
                  .ok());
  const auto c = to_host(counts.as<int32_t>(), rows * V, s);
  EXPECT_EQ(c[2 * V + 3], cuda::kPromptBit | 2);
  EXPECT_EQ(c[2 * V + 49], cuda::kPromptBit);
  int nonzero = 0;
  for (int32_t v : c) nonzero += v != 0;
  EXPECT_EQ(nonzero, 2);
}

TEST(GpuSampler, RejectsVocabularyBeyondItsLimit) {
  CEILING_REQUIRE_GPU();
  cuda::SampleArgs a;
  a.S = 2;
  a.V = cuda::sampler_max_vocab() + 1;
  const Status st = cuda::sample(a, nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("vocabulary"), std::string::npos);
}

}  // namespace
}  // namespace ceiling
