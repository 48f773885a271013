// GPU argmax and sampler vs src/kernels/cpu/ (same u ⇒ same token except at rounding
// boundaries), the token-count kernels, and the uniforms.
#include "bench/cases/sampling.h"

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
