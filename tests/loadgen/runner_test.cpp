// The client end to end against a real HTTP server in this process (fake_server.h). Checks token
// counts, TTFT ordering, the concurrency limit, and failure counting for a 500, a dropped
// connection, malformed SSE and a refused connection.
#include "loadgen/runner.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/status.h"
#include "fake_server.h"
#include "loadgen/client.h"
#include "loadgen/stats.h"

namespace ceiling::loadgen {
namespace {

using fake::FakeServer;
using namespace std::chrono_literals;

std::string completion(std::vector<int32_t> ids, int max_tokens) {
  Prompt p;
  p.ids = std::move(ids);
  p.max_tokens = max_tokens;
  return build_body(Api::kCompletions, "test-model", p, true);
}

std::string text_completion(const std::string& text, int max_tokens, Api api = Api::kCompletions) {
  Prompt p;
  p.text = text;
  p.max_tokens = max_tokens;
  return build_body(api, "test-model", p, true);
}

RunConfig config(const std::string& url, int max_concurrency) {
  RunConfig c;
  c.base = parse_base_url(url);
  c.max_concurrency = max_concurrency;
  c.timeout_s = 30;
  return c;
}

TEST(Runner, FirstModel) {
  FakeServer s;
  Connection c(parse_base_url(s.url()), "", 10);
  EXPECT_EQ(first_model(c), "test-model");
}

TEST(Runner, StreamsAndMeasures) {
  FakeServer s;
  std::vector<std::string> bodies;
  for (int i = 0; i < 12; ++i) bodies.push_back(completion({1, 2, 3}, 3 + i % 4));
  const RunOutput out = run_load(config(s.url(), 4), bodies);
  EXPECT_EQ(out.workers, 4);
  ASSERT_EQ(out.results.size(), 12u);
  for (int i = 0; i < 12; ++i) {
    const RequestResult& r = out.results[i];
    ASSERT_TRUE(r.success) << r.error;
    EXPECT_EQ(r.output_tokens(), 3 + i % 4);
    EXPECT_EQ(r.content_chunks, 3 + i % 4);
    EXPECT_EQ(r.usage_prompt_tokens, 3);
    EXPECT_EQ(r.itl_s.size(), static_cast<size_t>(2 + i % 4));
    // The server sleeps 2 ms before each chunk: nothing can arrive sooner (later, under load,
    // yes: two chunks may then be read at once, a gap of ~0).
    EXPECT_GT(r.ttft_s, 0.0019);
    EXPECT_GT(r.e2el_s, 0.0019 * r.content_chunks);
    EXPECT_LE(r.ttft_s, r.e2el_s);
    double sum = r.ttft_s;
    for (const double gap : r.itl_s) sum += gap;
    EXPECT_LE(sum, r.e2el_s + 1e-9);  // the chunks' times add up inside the request
    EXPECT_LE(r.start_s + r.e2el_s, out.duration_s);
    EXPECT_EQ(r.text, std::string(3 + i % 4, 't'));
  }
  EXPECT_LE(s.peak(), 4);
  const Metrics m = compute_metrics(out.results, std::vector<int64_t>(12, 3), out.duration_s);
  EXPECT_EQ(m.completed, 12);
  EXPECT_EQ(m.failed, 0);
  EXPECT_EQ(m.total_input_tokens, 36);
  EXPECT_EQ(m.total_output_tokens, 3 * 3 + 3 * 4 + 3 * 5 + 3 * 6);
  EXPECT_GE(m.max_concurrent_requests, 1);
  EXPECT_LE(m.max_concurrent_requests, 4);
  EXPECT_LT(m.ttft.mean, m.e2el.mean);
}

TEST(Runner, ChatAndNoUsageFallsBackToChunks) {
  FakeServer s;
  RunConfig c = config(s.url(), 2);
  c.endpoint = "/v1/chat/completions";
  c.api = Api::kChat;
  const RunOutput out = run_load(
      c, {text_completion("nousage", 5, Api::kChat), text_completion("hi", 2, Api::kChat)});
  ASSERT_TRUE(out.results[0].success) << out.results[0].error;
  EXPECT_EQ(out.results[0].usage_output_tokens, -1);
  EXPECT_EQ(out.results[0].output_tokens(), 5);
  ASSERT_TRUE(out.results[1].success) << out.results[1].error;
  EXPECT_EQ(out.results[1].output_tokens(), 2);
}

TEST(Runner, FailuresAreCountedNotFatal) {
  FakeServer s;
  const RunOutput out =
      run_load(config(s.url(), 2),
               {completion({1}, 3), text_completion("fail500", 3), text_completion("drop", 6),
                text_completion("garbage", 4), completion({1, 2}, 2)});
  const auto& r = out.results;
  EXPECT_TRUE(r[0].success) << r[0].error;
  EXPECT_FALSE(r[1].success);
  EXPECT_EQ(r[1].error, "HTTP 500: boom");
  EXPECT_FALSE(r[2].success);
  EXPECT_FALSE(r[2].error.empty());
  EXPECT_FALSE(r[3].success);
  EXPECT_NE(r[3].error.find("malformed SSE data"), std::string::npos) << r[3].error;
  EXPECT_TRUE(r[4].success) << r[4].error;  // the connections recover after each failure
  const Metrics m = compute_metrics(r, {1, -1, -1, -1, 2}, out.duration_s);
  EXPECT_EQ(m.completed, 2);
  EXPECT_EQ(m.failed, 3);
  EXPECT_EQ(m.total_output_tokens, 5);
}

// A server that closes each keep-alive connection after 2 requests: the client reconnects, no
// request fails.
TEST(Runner, ServerClosingConnectionsIsNoFailure) {
  FakeServer s(/*threads=*/4, /*keep_alive_max=*/2);
  std::vector<std::string> bodies(40, completion({1}, 2));
  const RunOutput out = run_load(config(s.url(), 4), bodies);
  for (const RequestResult& r : out.results) EXPECT_TRUE(r.success) << r.error;
}

// A server that closes idle keep-alive connections (after 1 s): the next request on that
// connection must not fail.
TEST(Runner, IdleConnectionClosedByTheServerIsNoFailure) {
  FakeServer s(/*threads=*/4, /*keep_alive_max=*/100, /*keep_alive_s=*/1);
  Connection c(parse_base_url(s.url()), "", 10);
  const std::string body = completion({1}, 2);
  EXPECT_TRUE(c.stream(Api::kCompletions, "/v1/completions", body, Clock::now()).success);
  std::this_thread::sleep_for(1500ms);  // the server has closed this connection by now
  const RequestResult r = c.stream(Api::kCompletions, "/v1/completions", body, Clock::now());
  EXPECT_TRUE(r.success) << r.error;
}

TEST(Runner, ConnectionRefused) {
  std::string url;
  {
    FakeServer s;  // a port that was free a moment ago and is closed now
    url = s.url();
  }
  const RunOutput out = run_load(config(url, 2), {completion({1}, 2), completion({1}, 2)});
  for (const RequestResult& r : out.results) {
    EXPECT_FALSE(r.success);
    EXPECT_NE(r.error.find("cannot connect"), std::string::npos) << r.error;
  }
  Connection c(parse_base_url(url), "", 5);
  EXPECT_THROW(first_model(c), Error);
}

TEST(Runner, PoissonRateSpreadsTheRequests) {
  FakeServer s;
  RunConfig c = config(s.url(), 0);
  c.request_rate = 100;  // 10 requests: the last sent at 10 / 100 = 0.1 s
  c.seed = 5;
  std::vector<std::string> bodies(10, completion({1}, 1));
  const RunOutput out = run_load(c, bodies);
  EXPECT_EQ(out.workers, 10);
  EXPECT_GE(out.duration_s, 0.1);
  double last = 0;
  for (const RequestResult& r : out.results) {
    EXPECT_TRUE(r.success) << r.error;
    last = std::max(last, r.start_s);
  }
  EXPECT_GE(last, 0.099);
}

}  // namespace
}  // namespace ceiling::loadgen
