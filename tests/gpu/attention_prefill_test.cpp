// Causal varlen prefill attention vs cpu::attention: q_len around the 64/128 tiles, prefixes
// already in the cache (chunked prefill), q_len 1..prime, mixed lengths and an empty sequence in
// one batch, shuffled block tables, GQA groups 1/4/8, head dims 64/128, every block size, peaky
// softmax, long contexts that cycle the K/V stages several times, each kernel (mma.sync; wgmma
// wgmma_ws and wgmma_tma where built), CUDA-graph capture, the wgmma build check on Hopper, the
// warp kernel for head dims below 64 and other block sizes, bad shapes.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>

#include "attention_test_util.h"
#include "kernels/cuda/attention.h"

namespace ceiling::bench {
namespace {

using attn_test::expect_matches_reference;
using attn_test::spec;

class AttentionPrefill : public ::testing::TestWithParam<cuda::PrefillKernel> {
 protected:
  void SetUp() override {
    if (!attn_test::has_gpu()) GTEST_SKIP() << "no CUDA device";
    const char* why = nullptr;
    if (!cuda::prefill_kernel_available(GetParam(), 128, &why))
      GTEST_SKIP() << "kernel unavailable: " << (why ? why : "?");
  }
  void check(std::vector<int> q_lens, std::vector<int> seq_lens, int hq, int hkv, int d, int bs,
             float q_scale = 1.0f) {
    AttentionSpec s = spec(false, std::move(q_lens), std::move(seq_lens), hq, hkv, d, bs);
    s.kernel = GetParam();
    s.q_scale = q_scale;
    expect_matches_reference(s);
  }
};

TEST_P(AttentionPrefill, NoPrefixAroundTiles) {
  for (int d : {64, 128})
    for (int n : {1, 2, 17, 63, 64, 65, 127, 128, 129, 200, 257}) check({n}, {n}, 4, 2, d, 16);
}

TEST_P(AttentionPrefill, WithPrefixInCache) {
  check({1}, {100}, 8, 2, 128, 16);
  check({37}, {300}, 8, 2, 128, 32);
  check({129}, {1000}, 8, 8, 64, 16);
  check({200}, {201}, 4, 1, 128, 64);
  for (int q : {1, 2, 3, 5, 7, 11, 13}) check({q}, {q + 50}, 4, 4, 128, 16);
}

TEST_P(AttentionPrefill, MixedBatch) {
  check({5, 0, 130, 1, 64, 17, 300}, {5, 40, 400, 1, 64, 100, 300}, 8, 2, 128, 16);
  check({3, 250, 1, 129}, {19, 250, 700, 129}, 8, 1, 64, 32);
}

TEST_P(AttentionPrefill, GqaGroupsAndBlockSizes) {
  for (auto [hq, hkv] : {std::pair{4, 4}, {8, 2}, {8, 1}})
    for (int bs : {16, 32, 64, 128, 256}) check({70, 150}, {90, 150}, hq, hkv, 128, bs);
}

TEST_P(AttentionPrefill, LongContextsCycleStages) {
  check({700}, {700}, 4, 2, 128, 16);               // 6 key tiles on the last query tile
  check({300, 1100}, {1500, 1100}, 8, 2, 128, 64);  // prefix: 12 key tiles
  check({513}, {1537}, 4, 4, 64, 32);               // head_dim 64 (4 stages)
}

// q read in place from a fused QKV output (rows (Hq + 2·Hkv)·D apart, the gaps NaN).
TEST_P(AttentionPrefill, StridedQRows) {
  for (int d : {64, 128}) {
    AttentionSpec s = spec(false, {5, 130, 1, 64}, {5, 400, 1, 100}, 8, 2, d, 16);
    s.kernel = GetParam();
    s.q_row_pad = 2 * 2 * d;
    expect_matches_reference(s);
  }
}

TEST_P(AttentionPrefill, PeakySoftmax) {
  check({190, 33}, {190, 400}, 4, 2, 128, 16, 8.0f);
  check({190}, {190}, 4, 2, 64, 16, 8.0f);
}

INSTANTIATE_TEST_SUITE_P(Kernels, AttentionPrefill,
                         ::testing::Values(cuda::PrefillKernel::kMmaSync,
                                           cuda::PrefillKernel::kWgmma,
                                           cuda::PrefillKernel::kWgmmaWs,
                                           cuda::PrefillKernel::kWgmmaTma),
                         [](const ::testing::TestParamInfo<cuda::PrefillKernel>& p) {
                           return std::string(cuda::prefill_kernel_name(p.param));
                         });

TEST(AttentionPrefillGraph, CapturesInCudaGraph) {
  ATTN_REQUIRE_GPU();
  AttentionSpec s = spec(false, {100, 300}, {150, 300}, 8, 2, 128, 16);
  auto c = make_attention_case(s);
  c->setup(1, 7, nullptr);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  const Status st = c->run(0, stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_TRUE(st.ok()) << st.message();
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// The default build targets sm_90a, so on a compute-capability 9.0 device the wgmma kernels must
// be available and chosen by kAuto (the check once reported them missing in the `ceiling` binary).
TEST(AttentionPrefillPlan, WgmmaAvailableOnHopper) {
  ATTN_REQUIRE_GPU();
  int dev = 0, major = 0, minor = 0;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev), cudaSuccess);
  if (major != 9 || minor != 0) GTEST_SKIP() << "not a compute-capability 9.0 device";
  for (int d : {64, 128}) {
    const char* why = nullptr;
    EXPECT_TRUE(cuda::prefill_kernel_available(cuda::PrefillKernel::kWgmmaTma, d, &why))
        << (why ? why : "");
    cuda::PrefillPlan plan;
    ASSERT_TRUE(cuda::plan_prefill_attention({2, 300, 8, 2, d, 16}, &plan).ok());
    EXPECT_EQ(plan.kernel, cuda::PrefillKernel::kWgmmaTma);
  }
}

// An fp8 (E4M3) cache, read by the mma.sync kernel (kAuto resolves to it): prefixes in the
// cache, tiles around 64/128, mixed batches, GQA, every block size, scale 1 and uneven scales.
TEST(AttentionPrefillFp8, MatchesReference) {
  ATTN_REQUIRE_GPU();
  const auto check = [](std::vector<int> q, std::vector<int> len, int hq, int hkv, int d, int bs,
                        float ks, float vs) {
    AttentionSpec s = spec(false, std::move(q), std::move(len), hq, hkv, d, bs);
    s.fp8_kv = true;
    s.k_scale = ks;
    s.v_scale = vs;
    expect_matches_reference(s);
  };
  for (auto [ks, vs] : {std::pair{1.0f, 1.0f}, {0.0173f, 0.0091f}}) {
    for (int d : {64, 128})
      for (int n : {1, 17, 64, 65, 129, 257}) check({n}, {n}, 4, 2, d, 16, ks, vs);
    check({37}, {300}, 8, 2, 128, 32, ks, vs);
    check({129}, {1000}, 8, 8, 64, 16, ks, vs);
    check({5, 0, 130, 1, 64, 17, 300}, {5, 40, 400, 1, 64, 100, 300}, 8, 2, 128, 16, ks, vs);
  }
  for (int bs : {16, 32, 64, 128, 256}) check({70, 150}, {90, 150}, 8, 1, 128, bs, 0.02f, 0.03f);
}

TEST(AttentionPrefillFp8, PlanPicksMmaSyncAndRejectsWgmma) {
  cuda::PrefillShape sh{2, 300, 8, 2, 128, 16};
  sh.kv_format = cuda::KvFormat::kFP8;
  cuda::PrefillPlan plan;
  ASSERT_TRUE(cuda::plan_prefill_attention(sh, &plan).ok());
  EXPECT_EQ(plan.kernel, cuda::PrefillKernel::kMmaSync);
  sh.kernel = cuda::PrefillKernel::kWgmmaWs;
  const Status st = cuda::plan_prefill_attention(sh, &plan);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("does not read an fp8 cache"), std::string::npos) << st.message();
}

// A mixed step as CudaOps runs it: the leading one-token sequences (decodes) through the decode
// kernel, the rest through the prefill kernel with its batch starting at row nd (query_start
// offset). Decodes with splits (few, long) and without; only decodes; one decode and a prefix;
// the wgmma kernels, an fp8 cache with uneven scales, the warp kernels (head dim 32), strided q.
TEST(AttentionPrefillSplit, DecodesThroughTheDecodeKernel) {
  ATTN_REQUIRE_GPU();
  const auto check = [](std::vector<int> q, std::vector<int> len, int hq, int hkv, int d, int bs,
                        bool fp8, cuda::PrefillKernel k = cuda::PrefillKernel::kAuto) {
    AttentionSpec s = spec(false, std::move(q), std::move(len), hq, hkv, d, bs);
    s.split_decodes = true;
    s.kernel = k;
    s.fp8_kv = fp8;
    if (fp8) {
      s.k_scale = 0.0173f;
      s.v_scale = 0.0091f;
    }
    expect_matches_reference(s);
    s.q_row_pad = 2 * hkv * d;  // q read in place from a fused QKV output
    expect_matches_reference(s);
  };
  for (bool fp8 : {false, true}) {
    check({1, 1, 1, 130, 5, 1}, {300, 1, 2000, 400, 5, 77}, 8, 2, 128, 16, fp8);
    check({1, 1, 257}, {5000, 3100, 257}, 8, 2, 128, 16, fp8);  // split-KV decodes
    check({1, 1, 1}, {900, 17, 4000}, 8, 2, 128, 16, fp8);      // only decodes
    check({1, 64}, {640, 100}, 8, 1, 64, 32, fp8);
    check({1, 1, 37}, {1, 129, 300}, 4, 2, 32, 16, fp8);  // the warp kernels
  }
  for (cuda::PrefillKernel k :
       {cuda::PrefillKernel::kWgmma, cuda::PrefillKernel::kWgmmaWs, cuda::PrefillKernel::kWgmmaTma})
    if (cuda::prefill_kernel_available(k, 128))
      check({1, 1, 1, 130, 5}, {300, 1, 2000, 400, 5}, 8, 2, 128, 16, false, k);
}

// The warp kernel: head dims 8, 16, 32 at any block size, and 64 at block sizes the tiled kernels
// do not take; prefixes, an empty sequence, GQA, strided q, an fp8 cache. kAuto picks it for
// exactly those shapes; asked for explicitly at head_dim 128 it is refused.
TEST(AttentionPrefillWarp, SmallHeadDimsAnyBlockSize) {
  ATTN_REQUIRE_GPU();
  for (int d : {8, 16, 32})
    for (int bs : {1, 7, 16})
      expect_matches_reference(
          spec(false, {5, 0, 130, 1, 64, 17}, {5, 40, 400, 1, 64, 100}, 8, 2, d, bs));
  expect_matches_reference(spec(false, {3, 250, 1}, {19, 250, 700}, 8, 1, 64, 8));
  for (int d : {8, 32}) {
    AttentionSpec s = spec(false, {5, 130, 1, 64}, {5, 400, 1, 100}, 8, 4, d, 16);
    s.q_row_pad = 2 * 4 * d;
    s.q_scale = 4.0f;
    expect_matches_reference(s);
    s.fp8_kv = true;
    s.k_scale = 0.0173f;
    s.v_scale = 0.0091f;
    expect_matches_reference(s);
  }
  AttentionSpec d64 = spec(false, {70, 150}, {90, 150}, 8, 2, 64, 16);  // the comparison at 64
  d64.kernel = cuda::PrefillKernel::kWarp;
  expect_matches_reference(d64);

  cuda::PrefillPlan plan;
  ASSERT_TRUE(cuda::plan_prefill_attention({2, 300, 8, 2, 32, 16}, &plan).ok());
  EXPECT_EQ(plan.kernel, cuda::PrefillKernel::kWarp);
  ASSERT_TRUE(cuda::plan_prefill_attention({2, 300, 8, 2, 64, 8}, &plan).ok());
  EXPECT_EQ(plan.kernel, cuda::PrefillKernel::kWarp);
  ASSERT_TRUE(cuda::plan_prefill_attention({2, 300, 8, 2, 64, 16}, &plan).ok());
  EXPECT_NE(plan.kernel, cuda::PrefillKernel::kWarp);
  Status st =
      cuda::plan_prefill_attention({2, 300, 8, 2, 128, 16, cuda::PrefillKernel::kWarp}, &plan);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("warp kernel unavailable for head_dim 128"), std::string::npos)
      << st.message();
  st = cuda::plan_prefill_attention({2, 300, 8, 2, 32, 16, cuda::PrefillKernel::kMmaSync}, &plan);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("head_dim 32"), std::string::npos) << st.message();
}

TEST(AttentionPrefillPlan, RejectsUnsupportedShapes) {
  cuda::PrefillPlan plan;
  Status st = cuda::plan_prefill_attention({1, 10, 8, 2, 80, 16}, &plan);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("head_dim 80"), std::string::npos) << st.message();
  st = cuda::plan_prefill_attention({1, 10, 8, 2, 128, 24}, &plan);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("block_size 24"), std::string::npos) << st.message();
  st = cuda::plan_prefill_attention({1, 10, 8, 3, 128, 16}, &plan);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("num_kv_heads 3"), std::string::npos) << st.message();
}

TEST(AttentionPrefillPlan, TileSlotsCoverAnySplit) {
  cuda::PrefillPlan plan;
  ASSERT_TRUE(
      cuda::plan_prefill_attention({3, 300, 8, 2, 128, 16, cuda::PrefillKernel::kMmaSync}, &plan)
          .ok());
  // Worst split of 300 tokens into 3 sequences of 128-row tiles: 129 + 129 + 42 → 2 + 2 + 1.
  EXPECT_GE(plan.tile_slots, 5);
}

}  // namespace
}  // namespace ceiling::bench
