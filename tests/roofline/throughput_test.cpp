// The throughput workload's price: concurrency from the KV capacity or the sequence cap, decode
// steps priced at that concurrency, prefill in budget-sized steps, the shared prefix once.
#include "roofline/throughput.h"

#include <gtest/gtest.h>

#include "core/status.h"
#include "model/config.h"

namespace ceiling::roofline {
namespace {

ModelConfig llama8b() {
  return *find_preset("llama-3.1-8b");
}

TEST(Throughput, ConcurrencyIsTheSmallestOfCapKvAndRequests) {
  const GpuCeilings g = ceilings_for("h100-sxm", false);
  ThroughputWorkload w;
  w.num_prompts = 1000;
  w.input_len = 1024;
  w.output_len = 128;
  ThroughputPrediction p = predict_throughput(llama8b(), g, w);
  // ~60 GB of KV at 128 KiB a token holds > 256 sequences of 1024 + 128 tokens.
  EXPECT_EQ(p.concurrency, 256);
  EXPECT_EQ(p.concurrency_limit, "max_num_seqs");
  EXPECT_EQ(p.decode_steps, 1000 * 128 / 256);
  EXPECT_NEAR(p.total_s, p.decode_s + p.prefill_s, 1e-12);
  EXPECT_NEAR(p.output_tokens_per_s, 1000.0 * 128 / p.total_s, 1e-6);
  // Bounded by the weights streamed once per step: < 256 tokens per (16 GB / 3.35 TB/s).
  EXPECT_LT(p.output_tokens_per_s, 256 / (16e9 / 3.35e12));
  EXPECT_GT(p.output_tokens_per_s, 1000);

  w.kv_tokens = 100 * 1152;  // room for 100 sequences at their full length (lockstep waves)
  p = predict_throughput(llama8b(), g, w);
  EXPECT_EQ(p.concurrency, 100);
  EXPECT_EQ(p.concurrency_limit, "kv cache");
  w.kv_tokens = 0;
  w.output_len = 1024;  // 1024 + 1024 tokens a sequence: the cache holds fewer than 256
  p = predict_throughput(llama8b(), g, w);
  EXPECT_LT(p.concurrency, 256);
  EXPECT_EQ(p.concurrency_limit, "kv cache");
  w.num_prompts = 10;
  p = predict_throughput(llama8b(), g, w);
  EXPECT_EQ(p.concurrency, 10);
  EXPECT_EQ(p.concurrency_limit, "num_prompts");
}

TEST(Throughput, ASharedPrefixIsPrefilledOnce) {
  const GpuCeilings g = ceilings_for("h100-sxm", false);
  ThroughputWorkload w;
  w.input_len = 2176;
  w.output_len = 128;
  const ThroughputPrediction none = predict_throughput(llama8b(), g, w);
  w.prefix_len = 2048;
  const ThroughputPrediction shared = predict_throughput(llama8b(), g, w);
  EXPECT_LT(shared.prefill_s * 5, none.prefill_s);
  EXPECT_GT(shared.output_tokens_per_s, none.output_tokens_per_s);
}

TEST(Throughput, RejectsWorkloadsOutOfRange) {
  const GpuCeilings g = ceilings_for("h100-sxm", false);
  ThroughputWorkload w;
  w.prefix_len = w.input_len;
  EXPECT_THROW(predict_throughput(llama8b(), g, w), Error);
  w = {};
  w.kv_tokens = 10;  // holds no request
  EXPECT_THROW(predict_throughput(llama8b(), g, w), Error);
  w = {};
  w.num_prompts = 0;
  EXPECT_THROW(predict_throughput(llama8b(), g, w), Error);
}

}  // namespace
}  // namespace ceiling::roofline
