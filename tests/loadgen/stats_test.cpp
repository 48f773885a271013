// vLLM's metrics on small cases whose answers are worked out by hand in the comments.
#include "loadgen/stats.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ceiling::loadgen {
namespace {

TEST(Percentile, LinearBetweenClosestRanks) {
  EXPECT_EQ(percentile({}, 50), 0.0);
  EXPECT_EQ(percentile({7}, 99), 7.0);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 50), 2.5);           // rank 1.5
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 99), 3.97);          // rank 2.97: 3 + 0.97 * (4 - 3)
  EXPECT_DOUBLE_EQ(percentile({50, 10, 40, 20, 30}, 90), 46.0);  // rank 3.6: 40 + 0.6 * 10
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 100), 4.0);
}

TEST(Distribution, MillisecondsAndPopulationStd) {
  const Distribution d = distribution_ms({0.001, 0.002, 0.003, 0.006});
  EXPECT_NEAR(d.mean, 3.0, 1e-12);
  EXPECT_NEAR(d.median, 2.5, 1e-12);
  EXPECT_NEAR(d.std, std::sqrt(3.5), 1e-12);  // deviations -2, -1, 0, 3 ms: (4+1+0+9)/4
  EXPECT_NEAR(d.p99, 5.91, 1e-12);            // rank 2.97: 3 + 0.97 * 3 ms
  const Distribution empty = distribution_ms({});
  EXPECT_EQ(empty.mean, 0.0);
  EXPECT_EQ(empty.p99, 0.0);
}

RequestResult ok(double start, double ttft, double e2el, std::vector<double> itl, int64_t usage_out,
                 int64_t chunks, int64_t usage_in) {
  RequestResult r;
  r.success = true;
  r.start_s = start;
  r.ttft_s = ttft;
  r.e2el_s = e2el;
  r.itl_s = std::move(itl);
  r.usage_output_tokens = usage_out;
  r.content_chunks = chunks;
  r.usage_prompt_tokens = usage_in;
  return r;
}

TEST(PeakConcurrency, Intervals) {
  std::vector<RequestResult> r(2);
  r[0].start_s = 0, r[0].e2el_s = 1;
  r[1].start_s = 1, r[1].e2el_s = 1;  // starts as the first ends: never two at once
  EXPECT_EQ(peak_concurrency(r), 1);
  r[1].start_s = 0.5;
  EXPECT_EQ(peak_concurrency(r), 2);
  EXPECT_EQ(peak_concurrency({}), 0);
}

TEST(Metrics, AsVllmComputesThem) {
  std::vector<RequestResult> r;
  // Usage says 5 output tokens, 10 prompt tokens.
  r.push_back(ok(0.0, 0.1, 0.5, {0.1, 0.1, 0.1, 0.1}, 5, 5, 10));
  // No usage: 3 content chunks are the output; the prompt length as sent (7) counts.
  r.push_back(ok(0.25, 0.2, 0.3, {0.05, 0.05}, -1, 3, -1));
  RequestResult failed;
  failed.error = "HTTP 500: boom";
  failed.start_s = 0.3, failed.e2el_s = 0.1;  // in flight with both others: peak 3
  failed.usage_output_tokens = 99;            // a failed request's tokens never count
  r.push_back(failed);
  const Metrics m = compute_metrics(r, {-1, 7, 4}, 2.0);
  EXPECT_EQ(m.completed, 2);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.total_input_tokens, 17);
  EXPECT_EQ(m.total_output_tokens, 8);
  EXPECT_DOUBLE_EQ(m.request_throughput, 1.0);
  EXPECT_DOUBLE_EQ(m.output_throughput, 4.0);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 12.5);
  EXPECT_EQ(m.max_concurrent_requests, 3);
  EXPECT_NEAR(m.ttft.mean, 150, 1e-9);
  EXPECT_NEAR(m.e2el.mean, 400, 1e-9);
  // TPOT: (0.5 - 0.1) / 4 = 100 ms and (0.3 - 0.2) / 2 = 50 ms.
  EXPECT_NEAR(m.tpot.mean, 75, 1e-9);
  EXPECT_NEAR(m.tpot.median, 75, 1e-9);
  // ITL: every gap of every request: 4 x 100 ms and 2 x 50 ms.
  EXPECT_NEAR(m.itl.mean, 500.0 / 6, 1e-9);
  EXPECT_NEAR(m.itl.median, 100, 1e-9);
  EXPECT_NEAR(m.itl.p90, 100, 1e-9);
  const nlohmann::ordered_json j = metrics_json(m);
  for (const char* k : {"completed",
                        "failed",
                        "duration",
                        "total_input_tokens",
                        "total_output_tokens",
                        "request_throughput",
                        "output_throughput",
                        "total_token_throughput",
                        "max_concurrent_requests",
                        "mean_ttft_ms",
                        "median_ttft_ms",
                        "p99_ttft_ms",
                        "mean_tpot_ms",
                        "median_tpot_ms",
                        "p99_tpot_ms",
                        "mean_itl_ms",
                        "median_itl_ms",
                        "p99_itl_ms",
                        "mean_e2el_ms",
                        "median_e2el_ms",
                        "p99_e2el_ms",
                        "std_itl_ms"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_EQ(j["total_output_tokens"], 8);
}

TEST(Metrics, OneTokenOutputsHaveNoTpot) {
  const Metrics m = compute_metrics({ok(0, 0.01, 0.01, {}, 1, 1, 3)}, {3}, 1.0);
  EXPECT_EQ(m.completed, 1);
  EXPECT_EQ(m.tpot.mean, 0.0);
  EXPECT_EQ(m.itl.mean, 0.0);
  EXPECT_NEAR(m.ttft.mean, 10, 1e-12);
}

}  // namespace
}  // namespace ceiling::loadgen
