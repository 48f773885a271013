// StreamAccumulator: which chunks are output, TTFT / ITL / E2EL from the arrival times, usage,
// and every way a stream fails.
#include "loadgen/stream.h"

#include <gtest/gtest.h>

namespace ceiling::loadgen {
namespace {

struct Feed {
  explicit Feed(Api api) : t0(Clock::now()), acc(api, r, t0) {}
  bool at(double s, std::string_view data) {
    return acc.on_event(
        data, t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)));
  }
  void end(double s) {
    acc.finish(t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)));
  }
  RequestResult r;
  Clock::time_point t0;
  StreamAccumulator acc;
};

TEST(Stream, Completions) {
  Feed f(Api::kCompletions);
  EXPECT_TRUE(f.at(0.1, R"({"choices":[{"index":0,"text":"a","finish_reason":null}]})"));
  EXPECT_TRUE(f.at(0.3, R"({"choices":[{"index":0,"text":"","finish_reason":null}]})"));
  EXPECT_TRUE(f.at(0.4, R"({"choices":[{"index":0,"text":"b","finish_reason":"length"}]})"));
  EXPECT_TRUE(f.at(0.45, R"({"choices":[{"index":0,"text":"","finish_reason":"length"}]})"));
  EXPECT_TRUE(f.at(0.46, R"({"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":3}})"));
  EXPECT_TRUE(f.at(0.5, "[DONE]"));
  f.end(0.6);
  EXPECT_TRUE(f.r.success) << f.r.error;
  EXPECT_NEAR(f.r.ttft_s, 0.1, 1e-9);
  ASSERT_EQ(f.r.itl_s.size(), 2u);  // the empty-text chunk is a token; the bare finish is not
  EXPECT_NEAR(f.r.itl_s[0], 0.2, 1e-9);
  EXPECT_NEAR(f.r.itl_s[1], 0.1, 1e-9);
  EXPECT_NEAR(f.r.e2el_s, 0.5, 1e-9);  // at [DONE]
  EXPECT_EQ(f.r.content_chunks, 3);
  EXPECT_EQ(f.r.usage_output_tokens, 3);
  EXPECT_EQ(f.r.usage_prompt_tokens, 4);
  EXPECT_EQ(f.r.output_tokens(), 3);
  EXPECT_EQ(f.r.text, "ab");
}

TEST(Stream, ChatSkipsTheRoleChunk) {
  Feed f(Api::kChat);
  f.at(0.05, R"({"choices":[{"delta":{"role":"assistant","content":""}}]})");
  f.at(0.1, R"({"choices":[{"delta":{"content":"x"}}]})");
  f.at(0.2, R"({"choices":[{"delta":{"reasoning_content":"r"}}]})");
  f.at(0.25, R"({"choices":[{"delta":{"content":"y"},"finish_reason":"stop"}]})");
  f.at(0.26, R"({"choices":[{"delta":{},"finish_reason":"stop"}]})");
  f.at(0.3, "[DONE]");
  f.end(0.3);
  EXPECT_TRUE(f.r.success) << f.r.error;
  EXPECT_NEAR(f.r.ttft_s, 0.1, 1e-9);
  EXPECT_EQ(f.r.content_chunks, 3);
  EXPECT_EQ(f.r.output_tokens(), 3);  // no usage: the chunks
  EXPECT_EQ(f.r.usage_prompt_tokens, -1);
  EXPECT_EQ(f.r.text, "xry");
}

TEST(Stream, MalformedJsonFails) {
  Feed f(Api::kCompletions);
  f.at(0.1, R"({"choices":[{"text":"a"}]})");
  EXPECT_FALSE(f.at(0.2, R"({"choices":[{"text":)"));
  EXPECT_FALSE(f.at(0.3, "[DONE]"));
  f.end(0.3);
  EXPECT_FALSE(f.r.success);
  EXPECT_NE(f.r.error.find("malformed SSE data"), std::string::npos) << f.r.error;
}

TEST(Stream, NonObjectJsonFails) {
  Feed f(Api::kCompletions);
  EXPECT_FALSE(f.at(0.1, "[1, 2]"));
  f.end(0.1);
  EXPECT_FALSE(f.r.success);
}

TEST(Stream, ErrorObjectInTheStreamFails) {
  Feed f(Api::kChat);
  EXPECT_FALSE(f.at(0.1, R"({"error":{"message":"out of\nKV blocks","code":500}})"));
  f.end(0.1);
  EXPECT_FALSE(f.r.success);
  EXPECT_EQ(f.r.error, "error in stream: out of KV blocks");
}

TEST(Stream, EndWithoutDoneFails) {
  Feed f(Api::kCompletions);
  f.at(0.1, R"({"choices":[{"text":"a"}]})");
  f.end(0.2);
  EXPECT_FALSE(f.r.success);
  EXPECT_NE(f.r.error.find("[DONE]"), std::string::npos);
  EXPECT_NEAR(f.r.e2el_s, 0.2, 1e-9);
}

TEST(Stream, NoEventAtAllFails) {
  Feed f(Api::kCompletions);
  f.end(0.2);
  EXPECT_FALSE(f.r.success);
  EXPECT_NE(f.r.error.find("no SSE event"), std::string::npos) << f.r.error;
}

TEST(Stream, DoneWithoutOutputFails) {
  Feed f(Api::kCompletions);
  f.at(0.1, R"({"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":0}})");
  f.at(0.2, "[DONE]");
  f.end(0.2);
  EXPECT_FALSE(f.r.success);
  EXPECT_NE(f.r.error.find("no output"), std::string::npos);
}

TEST(Stream, OneLineTruncates) {
  EXPECT_EQ(one_line("a\nb\r\nc  "), "a b  c");
  EXPECT_EQ(one_line(std::string(500, 'x'), 10), std::string(10, 'x') + "...");
}

}  // namespace
}  // namespace ceiling::loadgen
