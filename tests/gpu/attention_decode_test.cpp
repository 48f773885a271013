// Paged decode attention vs cpu::attention: awkward contexts (1, 15, 16, 17, block ends), batch 1
// and primes, mixed lengths, shuffled block tables, GQA groups 1/4/8/20, head dims 64/128, every
// block size, forced KV splits (including a sequence longer than the plan's bound), 4 and 8 warps
// per CTA each with and without splits (and the benchmark's forced warp-count variants), peaky
// softmax, CUDA-graph capture, and rejection of unsupported shapes and warp counts.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "attention_test_util.h"
#include "kernels/cuda/attention.h"

namespace ceiling::bench {

// Registered by src/bench/cases/attention.cpp (the convention of bench/case.h).
void register_attention_cases(CaseList& out);

namespace {

using attn_test::expect_matches_reference;
using attn_test::spec;

AttentionSpec decode(const std::vector<int>& lens, int hq, int hkv, int d, int bs) {
  return spec(true, std::vector<int>(lens.size(), 1), lens, hq, hkv, d, bs);
}

// The plan the case makes for s (an explicit plan_num_sms; the same inputs as the case's plan()).
cuda::DecodePlan plan_of(const AttentionSpec& s) {
  const int max_len = s.plan_max_seq_len > 0
                          ? s.plan_max_seq_len
                          : *std::max_element(s.seq_lens.begin(), s.seq_lens.end());
  const cuda::DecodeShape sh{static_cast<int>(s.seq_lens.size()),
                             s.num_q_heads,
                             s.num_kv_heads,
                             s.head_dim,
                             s.block_size,
                             max_len};
  cuda::DecodePlan plan;
  const Status st = cuda::plan_decode_attention(sh, s.plan_num_sms, &plan);
  EXPECT_TRUE(st.ok()) << st.message();
  return plan;
}

// Checks s after asserting that its plan has `warps` warps per CTA and splits (or not).
void expect_matches_with(const AttentionSpec& s, int warps, bool split) {
  const cuda::DecodePlan plan = plan_of(s);
  ASSERT_EQ(plan.warps, warps);
  ASSERT_EQ(plan.max_splits > 1, split) << "max_splits " << plan.max_splits;
  expect_matches_reference(s);
}

TEST(AttentionDecode, ShortContextsAroundBlockEnds) {
  ATTN_REQUIRE_GPU();
  for (int d : {64, 128})
    expect_matches_reference(
        decode({1, 15, 16, 17, 31, 32, 33, 47, 48, 49, 63, 64, 65}, 8, 2, d, 16));
}

TEST(AttentionDecode, BatchOneAndPrimes) {
  ATTN_REQUIRE_GPU();
  expect_matches_reference(decode({1}, 32, 8, 128, 16));
  expect_matches_reference(decode({257}, 32, 8, 128, 16));
  expect_matches_reference(decode({5, 3, 2}, 4, 4, 64, 32));
  expect_matches_reference(decode({100, 7, 1, 250, 33, 64, 129}, 16, 2, 128, 16));
  expect_matches_reference(
      decode({13, 1, 999, 300, 17, 2, 61, 64, 65, 127, 128, 129, 500}, 8, 8, 64, 64));
}

TEST(AttentionDecode, GqaGroups) {
  ATTN_REQUIRE_GPU();
  for (auto [hq, hkv] : {std::pair{4, 4}, {8, 2}, {16, 2}, {8, 1}, {40, 2}, {32, 1}})
    expect_matches_reference(decode({1, 40, 333}, hq, hkv, 128, 16));
}

TEST(AttentionDecode, EveryBlockSize) {
  ATTN_REQUIRE_GPU();
  for (int bs : {16, 32, 64, 128, 256})
    for (int d : {64, 128}) expect_matches_reference(decode({1, 255, 256, 257, 700}, 8, 2, d, bs));
}

TEST(AttentionDecode, ContiguousBlockTable) {
  ATTN_REQUIRE_GPU();
  AttentionSpec s = decode({77, 300}, 8, 2, 128, 16);
  s.shuffle_blocks = false;
  expect_matches_reference(s);
}

TEST(AttentionDecode, ForcedSplitsAndMerge) {
  ATTN_REQUIRE_GPU();
  // Many SMs for few (sequence, head) pairs: every context of ≥ 2 × 256 tokens is split.
  for (int d : {64, 128}) {
    AttentionSpec s = decode({1, 16, 300, 511, 512, 513, 2000, 4097}, 8, 2, d, 16);
    s.plan_num_sms = 4096;
    expect_matches_reference(s);
  }
  // A plan made for shorter contexts: the last split takes the remainder.
  AttentionSpec s = decode({3000, 200, 1}, 8, 1, 128, 32);
  s.plan_num_sms = 4096;
  s.plan_max_seq_len = 600;
  expect_matches_reference(s);
}

TEST(AttentionDecode, LongContextSplit) {
  ATTN_REQUIRE_GPU();
  AttentionSpec s = decode({32768}, 32, 8, 128, 16);
  s.check_tokens = 1;
  expect_matches_reference(s);
}

// The planner's warp count, each with and without splits, at prime and mid-block contexts. Under
// 8 warps: a last split of 2 tiles (1723: 6 of the 8 warps have none) or 12 (1039: warps with 2
// and 1), sequences of 1 and 16 tokens, GQA group 20 (a 4-row second query chunk).
TEST(AttentionDecode, EightWarpsSplit) {
  ATTN_REQUIRE_GPU();
  for (int d : {64, 128}) {
    AttentionSpec s = decode({4999, 1, 1723, 2999, 1039, 16, 577}, 8, 2, d, 16);
    s.plan_num_sms = 90;  // 14 (sequence, KV head) pairs × 6 splits of 848 tokens
    expect_matches_with(s, 8, true);
  }
  AttentionSpec s = decode({4001, 3, 1500, 611}, 40, 2, 128, 32);
  s.plan_num_sms = 64;  // 16 pairs × 4 splits of 1008
  expect_matches_with(s, 8, true);
}

TEST(AttentionDecode, EightWarpsUnsplit) {
  ATTN_REQUIRE_GPU();
  for (int d : {64, 128}) {
    AttentionSpec s = decode({1, 17, 511, 600, 777, 1000, 2003}, 8, 2, d, 16);
    s.plan_num_sms = 16;  // 14 CTAs: one per SM, too many to split
    expect_matches_with(s, 8, false);
  }
  AttentionSpec s = decode({1, 129, 700, 1301}, 40, 2, 64, 64);
  s.plan_num_sms = 16;
  expect_matches_with(s, 8, false);
}

TEST(AttentionDecode, FourWarpsUnsplit) {
  ATTN_REQUIRE_GPU();
  for (int d : {64, 128}) {
    AttentionSpec s = decode({1, 17, 511, 600, 777, 1000, 2003}, 8, 2, d, 16);
    s.plan_num_sms = 8;  // 14 CTAs on 8 SMs: two 4-warp CTAs share an SM
    expect_matches_with(s, 4, false);
  }
}

TEST(AttentionDecode, FourWarpsSplit) {
  ATTN_REQUIRE_GPU();
  for (int d : {64, 128}) {
    AttentionSpec s = decode({1, 16, 300, 511, 512, 513, 2000, 4097}, 8, 2, d, 16);
    s.plan_num_sms = 4096;  // splits of 272 tokens: too short for 8 warps
    expect_matches_with(s, 4, true);
  }
}

// The benchmark's comparison variants that force the warp count the planner does not pick
// (B=32 ctx 4096 with 8, B=1 ctx 32768 with 4) pass the same check.
TEST(AttentionDecode, ForcedWarpCountVariants) {
  ATTN_REQUIRE_GPU();
  CaseList cases;
  register_attention_cases(cases);
  int forced = 0;
  for (auto& c : cases) {
    if (c->op() != "attention_decode" || c->shape().find("warps=") == std::string::npos) continue;
    ++forced;
    EXPECT_FALSE(c->dispatched()) << c->shape();
    const CheckResult r = c->check(nullptr);
    std::printf("  %-18s %-60s %s\n", c->op().c_str(), c->shape().c_str(), r.detail.c_str());
    EXPECT_TRUE(r.passed()) << c->shape() << ": " << r.detail;
    c.reset();  // free its device buffers before the next
  }
  EXPECT_EQ(forced, 3);
}

TEST(AttentionDecode, PeakySoftmax) {
  ATTN_REQUIRE_GPU();
  AttentionSpec s = decode({1, 17, 400, 1500}, 8, 2, 128, 16);
  s.q_scale = 8.0f;
  s.plan_num_sms = 4096;
  expect_matches_reference(s);
}

TEST(AttentionDecode, CapturesInCudaGraph) {
  ATTN_REQUIRE_GPU();
  AttentionSpec s = decode({1000, 3000}, 32, 8, 128, 16);
  s.plan_num_sms = 4096;
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
  const CheckResult r = c->check(nullptr);
  EXPECT_TRUE(r.passed()) << r.detail;
}

TEST(AttentionDecode, RejectsUnsupportedShapes) {
  cuda::DecodePlan plan;
  Status st = cuda::plan_decode_attention({1, 8, 2, 96, 16, 100}, 132, &plan);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("head_dim 96"), std::string::npos) << st.message();
  st = cuda::plan_decode_attention({1, 8, 2, 128, 8, 100}, 132, &plan);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("block_size 8"), std::string::npos) << st.message();
  st = cuda::plan_decode_attention({1, 6, 4, 128, 16, 100}, 132, &plan);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("num_q_heads 6"), std::string::npos) << st.message();
}

TEST(AttentionDecode, RejectsUnbuiltWarpCount) {
  cuda::DecodePlan plan;
  ASSERT_TRUE(cuda::plan_decode_attention({1, 8, 2, 128, 16, 100}, 132, &plan).ok());
  plan.warps = 6;
  // Rejected before any launch: the pointers are never dereferenced.
  int dummy = 0;
  const cuda::PagedKvDevice kv{&dummy, &dummy, 7, 16, 2, 128};
  const Status st = cuda::run_decode_attention(plan, &dummy, kv, &dummy, &dummy, 7, 1.0f, &dummy,
                                               nullptr, nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("warps 6"), std::string::npos) << st.message();
}

TEST(AttentionDecode, PlanSplitsOnlySmallBatches) {
  cuda::DecodePlan plan;
  ASSERT_TRUE(cuda::plan_decode_attention({32, 32, 8, 128, 16, 4096}, 132, &plan).ok());
  EXPECT_EQ(plan.max_splits, 1);
  EXPECT_EQ(plan.workspace_bytes, 0u);
  EXPECT_EQ(plan.warps, 4);  // 256 CTAs: two 4-warp CTAs per SM
  ASSERT_TRUE(cuda::plan_decode_attention({1, 32, 8, 128, 16, 32768}, 132, &plan).ok());
  EXPECT_EQ(plan.max_splits, 16);  // 8 KV heads × 16 splits: one CTA per SM, whole wave
  EXPECT_EQ(plan.partition % 16, 0);
  EXPECT_GE(plan.partition * plan.max_splits, 32768);
  EXPECT_GT(plan.workspace_bytes, 0u);
  EXPECT_EQ(plan.warps, 8);  // one CTA per SM: its 8 warps are the SM's
}

TEST(AttentionDecode, PlanWarpsPerCta) {
  cuda::DecodePlan plan;
  // B=8 ctx 8192: 64 pairs × 2 splits = 128 CTAs, one per SM.
  ASSERT_TRUE(cuda::plan_decode_attention({8, 32, 8, 128, 16, 8192}, 132, &plan).ok());
  EXPECT_EQ(plan.warps, 8);
  // B=64 ctx 1024 D=64: 512 CTAs.
  ASSERT_TRUE(cuda::plan_decode_attention({64, 32, 8, 64, 16, 1024}, 132, &plan).ok());
  EXPECT_EQ(plan.warps, 4);
  // B=1 ctx 4096: 16 splits of 256 tokens, 2 tiles per warp at 8: stays 4.
  ASSERT_TRUE(cuda::plan_decode_attention({1, 32, 8, 128, 16, 4096}, 132, &plan).ok());
  EXPECT_EQ(plan.max_splits, 16);
  EXPECT_EQ(plan.warps, 4);
  // B=1 ctx 8192: 16 splits of 512, 4 tiles per warp.
  ASSERT_TRUE(cuda::plan_decode_attention({1, 32, 8, 128, 16, 8192}, 132, &plan).ok());
  EXPECT_EQ(plan.warps, 8);
  // Planned for 264 SMs: 264 CTAs of 8 warps (each gets an SM of its own there).
  ASSERT_TRUE(cuda::plan_decode_attention({1, 32, 8, 128, 16, 32768}, 264, &plan).ok());
  EXPECT_EQ(plan.max_splits, 33);
  EXPECT_EQ(plan.warps, 8);
}

}  // namespace
}  // namespace ceiling::bench
