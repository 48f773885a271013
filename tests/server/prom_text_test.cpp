// The Prometheus text writer against the exposition format: HELP/TYPE lines, label escaping,
// number formatting, cumulative histogram buckets ending at +Inf with _sum and _count.
#include "server/prom_text.h"

#include <gtest/gtest.h>

#include <cmath>

#include "server/metrics.h"

namespace ceiling::server {
namespace {

TEST(PromText, FamilyAndSamples) {
  PromText t;
  t.family("ceiling:x_total", "Things\ncounted.", "counter");
  t.sample("ceiling:x_total", {{"model_name", "a\"b\\c\nd"}}, 3);
  t.sample("ceiling:y", {}, 0.25);
  EXPECT_EQ(t.str(),
            "# HELP ceiling:x_total Things counted.\n"
            "# TYPE ceiling:x_total counter\n"
            "ceiling:x_total{model_name=\"a\\\"b\\\\c\\nd\"} 3\n"
            "ceiling:y 0.25\n");
}

TEST(PromText, Numbers) {
  EXPECT_EQ(PromText::number(0), "0");
  EXPECT_EQ(PromText::number(-7), "-7");
  EXPECT_EQ(PromText::number(1e20), "1e+20");
  EXPECT_EQ(PromText::number(0.1), "0.1");
  EXPECT_EQ(PromText::number(INFINITY), "+Inf");
  EXPECT_EQ(PromText::number(-INFINITY), "-Inf");
  EXPECT_EQ(PromText::number(NAN), "NaN");
}

TEST(PromText, HistogramIsCumulativeWithInclusiveBounds) {
  Histogram h({0.1, 1});
  for (double x : {0.05, 0.1, 0.5, 3.0}) h.observe(x);
  PromText t;
  t.histogram("lat", {{"m", "x"}}, h);
  EXPECT_EQ(t.str(),
            "lat_bucket{m=\"x\",le=\"0.1\"} 2\n"
            "lat_bucket{m=\"x\",le=\"1\"} 3\n"
            "lat_bucket{m=\"x\",le=\"+Inf\"} 4\n"
            "lat_sum{m=\"x\"} 3.65\n"
            "lat_count{m=\"x\"} 4\n");
}

TEST(ServerMetrics, RendersEngineGaugesAndRecordedCounters) {
  ServerMetrics m("tiny");
  ServerMetrics::Finished f;
  f.prompt_tokens = 5;
  f.generation_tokens = 7;
  f.finished_reason = "length";
  f.e2e_s = 0.5;
  f.ttft_s = 0.1;
  f.queue_s = 0.01;
  m.record(f);
  m.record_inter_token(0.02);
  serve::EngineSnapshot s;
  s.num_running = 2;
  s.kv_free_blocks = 9;
  const std::string text = m.render(s);
  for (const char* want :
       {"ceiling:num_requests_running{model_name=\"tiny\"} 2\n",
        "ceiling:kv_cache_free_blocks{model_name=\"tiny\"} 9\n",
        "ceiling:prompt_tokens_total{model_name=\"tiny\"} 5\n",
        "ceiling:generation_tokens_total{model_name=\"tiny\"} 7\n",
        "ceiling:request_success_total{model_name=\"tiny\",finished_reason=\"length\"} 1\n",
        "ceiling:request_success_total{model_name=\"tiny\",finished_reason=\"stop\"} 0\n",
        "# TYPE ceiling:time_to_first_token_seconds histogram\n",
        "ceiling:inter_token_latency_seconds_count{model_name=\"tiny\"} 1\n",
        "ceiling:e2e_request_latency_seconds_bucket{model_name=\"tiny\",le=\"+Inf\"} 1\n",
        "ceiling:request_queue_time_seconds_sum{model_name=\"tiny\"} 0.01\n"})
    EXPECT_NE(text.find(want), std::string::npos) << want;
  // Every non-comment line is `name{labels} value` or `name value`.
  size_t at = 0;
  while (at < text.size()) {
    const size_t nl = text.find('\n', at);
    ASSERT_NE(nl, std::string::npos);
    const std::string line = text.substr(at, nl - at);
    at = nl + 1;
    if (line.rfind("# ", 0) == 0) continue;
    const size_t sp = line.rfind(' ');
    ASSERT_NE(sp, std::string::npos) << line;
    EXPECT_EQ(line.rfind("ceiling:", 0), 0u) << line;
  }
}

}  // namespace
}  // namespace ceiling::server
