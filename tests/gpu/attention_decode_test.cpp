// Paged decode attention vs cpu::attention: awkward contexts (1, 15, 16, 17, block ends), batch 1
// and primes, mixed lengths, shuffled block tables, GQA groups 1/4/8/20, head dims 64/128, every
// block size, forced KV splits (including a sequence longer than the plan's bound), peaky softmax,
// CUDA-graph capture, the warp kernel's head dims (8, 16, 32) and block sizes, and rejection of
// unsupported shapes.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>

#include "attention_test_util.h"
#include "kernels/cuda/attention.h"

namespace ceiling::bench {
namespace {

using attn_test::expect_matches_reference;
using attn_test::spec;

AttentionSpec decode(const std::vector<int>& lens, int hq, int hkv, int d, int bs) {
  return spec(true, std::vector<int>(lens.size(), 1), lens, hq, hkv, d, bs);
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

// q read in place from a fused QKV output: rows (Hq + 2·Hkv)·D apart, the gaps NaN; with and
// without splits, both head dims.
TEST(AttentionDecode, StridedQRows) {
  ATTN_REQUIRE_GPU();
  for (int d : {64, 128}) {
    AttentionSpec s = decode({1, 40, 333, 17, 700}, 8, 2, d, 16);
    s.q_row_pad = 2 * 2 * d;
    expect_matches_reference(s);
    s.plan_min_split_tokens = 64;  // several splits per sequence, each reading q strided
    s.plan_num_sms = 264;
    expect_matches_reference(s);
  }
}

TEST(AttentionDecode, ContiguousBlockTable) {
  ATTN_REQUIRE_GPU();
  AttentionSpec s = decode({77, 300}, 8, 2, 128, 16);
  s.shuffle_blocks = false;
  expect_matches_reference(s);
}

TEST(AttentionDecode, ForcedSplitsAndMerge) {
  ATTN_REQUIRE_GPU();
  // Many SMs for few (sequence, head) pairs: every context of ≥ 2 × 64 tokens is split.
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

TEST(AttentionDecode, SplitLengths) {
  ATTN_REQUIRE_GPU();
  // One-tile splits (warps without a tile), the default and long minimum splits, around the
  // lengths where the split count changes.
  for (int min_split : {16, 64, 0})
    for (int d : {64, 128}) {
      AttentionSpec s =
          decode({1, 15, 16, 17, 63, 64, 127, 128, 129, 200, 255, 256, 257, 1000}, 32, 8, d, 16);
      s.plan_num_sms = 4096;
      s.plan_min_split_tokens = min_split;
      expect_matches_reference(s);
    }
}

TEST(AttentionDecode, BothPipelineDepths) {
  ATTN_REQUIRE_GPU();
  // 6 (sequence, KV head) CTAs on 4 SMs: 3 stages per warp; on 6: 4 stages, still one split;
  // on 4096: 4 stages and splits. Unsplit, the 2300-token walk is 36 tiles per warp (the
  // block-table entries reload past 32); a context ending mid-tile; a single-tile sequence.
  for (int sms : {4, 6, 4096})
    for (int d : {64, 128}) {
      AttentionSpec s = decode({2300, 61, 1}, 8, 2, d, 16);
      s.plan_num_sms = sms;
      expect_matches_reference(s);
    }
}

TEST(AttentionDecode, LongContextSplit) {
  ATTN_REQUIRE_GPU();
  AttentionSpec s = decode({32768}, 32, 8, 128, 16);
  s.check_tokens = 1;
  expect_matches_reference(s);
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

// An fp8 (E4M3) cache: scale 1 (small values land on E4M3 subnormals) and uneven per-tensor
// scales; block ends, GQA groups, every block size, head dims 64 and 128 (the two fragment
// layouts and swizzles of fp8_swz), forced splits and merges, a long split context, peaky softmax.
AttentionSpec fp8(AttentionSpec s, float k_scale, float v_scale) {
  s.fp8_kv = true;
  s.k_scale = k_scale;
  s.v_scale = v_scale;
  return s;
}

TEST(AttentionDecodeFp8, BlockEndsAndGroups) {
  ATTN_REQUIRE_GPU();
  for (auto [ks, vs] : {std::pair{1.0f, 1.0f}, {0.0173f, 0.0091f}}) {
    for (int d : {64, 128})
      expect_matches_reference(
          fp8(decode({1, 15, 16, 17, 31, 32, 33, 47, 48, 49, 63, 64, 65}, 8, 2, d, 16), ks, vs));
    for (auto [hq, hkv] : {std::pair{4, 4}, {8, 1}, {40, 2}, {32, 8}})
      expect_matches_reference(fp8(decode({1, 40, 333}, hq, hkv, 128, 16), ks, vs));
  }
}

TEST(AttentionDecodeFp8, BlockSizesDepthsAndSplits) {
  ATTN_REQUIRE_GPU();
  for (int bs : {16, 32, 64, 128, 256})
    for (int d : {64, 128})
      expect_matches_reference(fp8(decode({1, 255, 256, 257, 700}, 8, 2, d, bs), 0.02f, 0.03f));
  for (int sms : {4, 6, 4096})
    for (int d : {64, 128}) {
      AttentionSpec s = fp8(decode({2300, 61, 1, 513}, 8, 2, d, 16), 0.02f, 0.0125f);
      s.plan_num_sms = sms;
      expect_matches_reference(s);
    }
  AttentionSpec lng = fp8(decode({32768}, 32, 8, 128, 16), 0.05f, 0.05f);
  lng.check_tokens = 1;
  expect_matches_reference(lng);
  // The four-CTAs-an-SM kernel (3 stages, q's fragments in shared memory), forced: block ends,
  // both head dims, GQA groups of 4 and 8, one split or many (the SM count), block sizes 16–256,
  // a context of 1 and long ones.
  for (int bs : {16, 64, 256})
    for (int d : {64, 128}) {
      AttentionSpec s =
          fp8(decode({1, 15, 16, 17, 255, 257, 700, 2300}, 32, 8, d, bs), 0.02f, 0.0125f);
      s.plan_fp8_ctas = 4;
      expect_matches_reference(s);
    }
  for (int sms : {1, 6, 132}) {
    AttentionSpec s = fp8(decode({2, 33, 4111, 1}, 16, 2, 128, 16), 0.0173f, 0.0091f);
    s.plan_fp8_ctas = 4;
    s.plan_num_sms = sms;
    expect_matches_reference(s);
  }
  AttentionSpec peaky = fp8(decode({1, 17, 400, 1500}, 8, 2, 128, 16), 0.01f, 0.02f);
  peaky.q_scale = 8.0f;
  peaky.plan_num_sms = 4096;
  expect_matches_reference(peaky);
}

TEST(AttentionDecodeFp8, PlanAndFormatMismatch) {
  cuda::DecodeShape sh{32, 32, 8, 128, 16, 4096};
  sh.kv_format = cuda::KvFormat::kFP8;
  cuda::DecodePlan plan;
  ASSERT_TRUE(cuda::plan_decode_attention(sh, 132, &plan).ok());
  EXPECT_EQ(plan.stages, 3);      // four CTAs an SM
  EXPECT_EQ(plan.max_splits, 2);  // 512 CTAs: 0.97 of one wave of 528
  EXPECT_GT(plan.workspace_bytes, 0u);
  sh.fp8_ctas_per_sm = 3;  // three an SM: 768 CTAs, 0.97 of two waves of 396 (1 split: 0.65)
  ASSERT_TRUE(cuda::plan_decode_attention(sh, 132, &plan).ok());
  EXPECT_EQ(plan.stages, 4);
  EXPECT_EQ(plan.max_splits, 3);
  sh.fp8_ctas_per_sm = 0;
  sh.num_seqs = 48;  // 384 CTAs: 0.97 of one wave of three an SM (0.73 of four)
  ASSERT_TRUE(cuda::plan_decode_attention(sh, 132, &plan).ok());
  EXPECT_EQ(plan.stages, 4);
  EXPECT_EQ(plan.max_splits, 1);
  sh.num_seqs = 64;  // 512 CTAs: one wave of four an SM (0.65 of two of three)
  ASSERT_TRUE(cuda::plan_decode_attention(sh, 132, &plan).ok());
  EXPECT_EQ(plan.stages, 3);
  EXPECT_EQ(plan.max_splits, 1);
  sh.num_seqs = 256;  // past one wave either way: three an SM
  ASSERT_TRUE(cuda::plan_decode_attention(sh, 132, &plan).ok());
  EXPECT_EQ(plan.stages, 4);
  EXPECT_EQ(plan.max_splits, 1);
  sh.num_seqs = 16;  // 128 CTAs × 3 splits: 0.97 of one wave (four an SM would take 4 splits)
  ASSERT_TRUE(cuda::plan_decode_attention(sh, 132, &plan).ok());
  EXPECT_EQ(plan.stages, 4);
  EXPECT_EQ(plan.max_splits, 3);
  sh.fp8_ctas_per_sm = 4;  // asked: one wave of four an SM
  ASSERT_TRUE(cuda::plan_decode_attention(sh, 132, &plan).ok());
  EXPECT_EQ(plan.stages, 3);
  EXPECT_EQ(plan.max_splits, 4);
  sh.fp8_ctas_per_sm = 0;
  sh.num_seqs = 1;
  sh.max_seq_len = 32768;
  ASSERT_TRUE(cuda::plan_decode_attention(sh, 132, &plan).ok());
  EXPECT_EQ(plan.stages, 4);
  EXPECT_EQ(plan.max_splits, 49);  // 8 KV heads × 49 splits: three CTAs per SM (66 of four: short)
  sh.fp8_ctas_per_sm = 5;
  EXPECT_FALSE(cuda::plan_decode_attention(sh, 132, &plan).ok());
  sh.fp8_ctas_per_sm = 0;
  ASSERT_TRUE(cuda::plan_decode_attention(sh, 132, &plan).ok());
  // A plan for an fp8 cache does not run on a bf16 one (the check precedes any device access).
  int dummy = 0;
  cuda::PagedKvDevice kv{&dummy, &dummy, 4, 16, 8, 128};
  Status st = cuda::run_decode_attention(plan, &dummy, 32 * 128, kv, &dummy, &dummy, 1, 1.0f,
                                         &dummy, &dummy, nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("the cache is bf16 but the plan was made for fp8"), std::string::npos)
      << st.message();
  // A q row stride below Hq·D, or not a multiple of 8 (16-byte rows), is refused.
  kv.format = cuda::KvFormat::kFP8;
  for (int64_t stride : {32 * 128 - 8, 32 * 128 + 4}) {
    st = cuda::run_decode_attention(plan, &dummy, stride, kv, &dummy, &dummy, 1, 1.0f, &dummy,
                                    &dummy, nullptr);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("q row stride " + std::to_string(stride)), std::string::npos)
        << st.message();
  }
}

// Head dims the tiled kernels do not take (8, 16, 32) at any block size, and 64 at block sizes
// they do not take: the warp kernel. GQA, awkward contexts, peaky softmax, q read strided, an fp8
// cache with uneven scales, a graph-sized plan.
TEST(AttentionDecode, WarpKernelSmallHeadDimsAnyBlockSize) {
  ATTN_REQUIRE_GPU();
  for (int d : {8, 16, 32})
    for (int bs : {1, 3, 16, 512})
      expect_matches_reference(decode({1, 15, 16, 17, 100, 700}, 8, 2, d, bs));
  for (int bs : {1, 8, 24}) expect_matches_reference(decode({1, 33, 300}, 4, 4, 64, bs));
  for (int d : {8, 32}) {
    AttentionSpec s = decode({1, 40, 333, 17}, 8, 4, d, 16);
    s.q_row_pad = 2 * 4 * d;
    s.q_scale = 4.0f;
    s.plan_max_seq_len = 4096;
    expect_matches_reference(s);
    s.fp8_kv = true;
    s.k_scale = 0.0173f;
    s.v_scale = 0.0091f;
    expect_matches_reference(s);
  }
  cuda::DecodePlan plan;
  ASSERT_TRUE(cuda::plan_decode_attention({64, 8, 4, 8, 16, 1024}, 132, &plan).ok());
  EXPECT_TRUE(plan.warp);
  EXPECT_EQ(plan.workspace_bytes, 0u);
  ASSERT_TRUE(cuda::plan_decode_attention({64, 8, 4, 64, 16, 1024}, 132, &plan).ok());
  EXPECT_FALSE(plan.warp);
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

TEST(AttentionDecode, PlanSplitsOnlySmallBatches) {
  cuda::DecodePlan plan;
  ASSERT_TRUE(cuda::plan_decode_attention({32, 32, 8, 128, 16, 4096}, 132, &plan).ok());
  EXPECT_EQ(plan.max_splits, 1);
  EXPECT_EQ(plan.workspace_bytes, 0u);
  EXPECT_EQ(plan.stages, 3);  // 256 CTAs: two per SM
  ASSERT_TRUE(cuda::plan_decode_attention({1, 32, 8, 128, 16, 32768}, 132, &plan).ok());
  EXPECT_EQ(plan.max_splits, 16);  // 8 KV heads × 16 splits: one CTA per SM, whole wave
  EXPECT_EQ(plan.stages, 4);
  EXPECT_EQ(plan.min_split_tokens, 256);
  EXPECT_GT(plan.workspace_bytes, 0u);
  // A bound of 1000 tokens allows 3 splits of ≥ 256; a minimum of 1024 allows none.
  ASSERT_TRUE(cuda::plan_decode_attention({1, 32, 8, 128, 16, 1000}, 132, &plan).ok());
  EXPECT_EQ(plan.max_splits, 3);
  ASSERT_TRUE(cuda::plan_decode_attention({1, 32, 8, 128, 16, 1000, 1024}, 132, &plan).ok());
  EXPECT_EQ(plan.max_splits, 1);
  EXPECT_EQ(plan.workspace_bytes, 0u);
  const Status st = cuda::plan_decode_attention({1, 32, 8, 128, 16, 200, 40}, 132, &plan);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("min_split_tokens 40"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace ceiling::bench
