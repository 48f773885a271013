// Request bodies, endpoints, base URLs and the Poisson arrival schedule.
#include "loadgen/request.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/status.h"
#include "loadgen/client.h"

namespace ceiling::loadgen {
namespace {

TEST(Request, ApiOfEndpoint) {
  EXPECT_EQ(api_of_endpoint("/v1/completions"), Api::kCompletions);
  EXPECT_EQ(api_of_endpoint("/v1/chat/completions"), Api::kChat);
  EXPECT_THROW(api_of_endpoint("/v1/embeddings"), Error);
}

TEST(Request, CompletionsBodyWithTokenIds) {
  Prompt p;
  p.ids = {5, 6, 7};
  p.max_tokens = 9;
  const nlohmann::json b = nlohmann::json::parse(build_body(Api::kCompletions, "m", p, true));
  EXPECT_EQ(b["model"], "m");
  EXPECT_EQ(b["prompt"], nlohmann::json({5, 6, 7}));
  EXPECT_EQ(b["max_tokens"], 9);
  EXPECT_EQ(b["stream"], true);
  EXPECT_EQ(b["stream_options"]["include_usage"], true);
  EXPECT_EQ(b["ignore_eos"], true);
  EXPECT_FALSE(b.contains("messages"));
}

TEST(Request, ChatBodyFromTextAndFieldsOverride) {
  Prompt p;
  p.text = "hi";
  p.fields = {{"temperature", 0.5}, {"ignore_eos", false}};
  const nlohmann::json b = nlohmann::json::parse(build_body(Api::kChat, "m", p, true));
  EXPECT_EQ(b["messages"], nlohmann::json::parse(R"([{"role":"user","content":"hi"}])"));
  EXPECT_EQ(b["temperature"], 0.5);
  EXPECT_EQ(b["ignore_eos"], false);  // the prompt's own field wins
  EXPECT_FALSE(b.contains("prompt"));
  const nlohmann::json no_eos =
      nlohmann::json::parse(build_body(Api::kChat, "m", Prompt{.text = "x"}, false));
  EXPECT_FALSE(no_eos.contains("ignore_eos"));
}

TEST(Request, PromptMustFitTheApi) {
  Prompt ids;
  ids.ids = {1};
  EXPECT_THROW(build_body(Api::kChat, "m", ids, true), Error);
  Prompt chat;
  chat.messages = nlohmann::ordered_json::parse(R"([{"role":"user","content":"x"}])");
  EXPECT_THROW(build_body(Api::kCompletions, "m", chat, true), Error);
  EXPECT_EQ(
      nlohmann::json::parse(build_body(Api::kChat, "m", chat, true))["messages"][0]["content"],
      "x");
}

TEST(Request, RandomTokenPromptsAreSeededAndInRange) {
  const auto a = random_token_prompts(4, 33, 10, 20, 7);
  EXPECT_EQ(a, random_token_prompts(4, 33, 10, 20, 7));
  EXPECT_NE(a, random_token_prompts(4, 33, 10, 20, 8));
  ASSERT_EQ(a.size(), 4u);
  for (const auto& p : a) {
    ASSERT_EQ(p.size(), 33u);
    for (const int32_t id : p) EXPECT_TRUE(id >= 10 && id < 20) << id;
  }
}

TEST(Request, BaseUrl) {
  EXPECT_EQ(parse_base_url("http://127.0.0.1:8000").origin, "http://127.0.0.1:8000");
  EXPECT_EQ(parse_base_url("http://127.0.0.1:8000/").prefix, "");
  const BaseUrl b = parse_base_url("https://host/api/");
  EXPECT_EQ(b.origin, "https://host");
  EXPECT_EQ(b.prefix, "/api");
  EXPECT_THROW(parse_base_url("127.0.0.1:8000"), Error);
  EXPECT_THROW(parse_base_url("ftp://x"), Error);
  EXPECT_THROW(parse_base_url("http://"), Error);
}

TEST(PoissonArrivals, InfiniteRateIsAllAtOnce) {
  for (const double t : poisson_arrivals(50, std::numeric_limits<double>::infinity(), 1)) {
    EXPECT_EQ(t, 0.0);
  }
}

TEST(PoissonArrivals, GapsAreExponentialAtTheRate) {
  const double rate = 20;
  const int n = 200000;
  const std::vector<double> t = poisson_arrivals(n, rate, 42, /*normalize=*/false);
  ASSERT_EQ(static_cast<int>(t.size()), n);
  double sum = 0, sum2 = 0, prev = 0;
  for (const double x : t) {
    ASSERT_GE(x, prev);
    const double gap = x - prev;
    sum += gap;
    sum2 += gap * gap;
    prev = x;
  }
  const double mean = sum / n, var = sum2 / n - mean * mean;
  // Mean gap 1/rate with a standard error of 1/(rate sqrt(n)) = 0.11 %; 1 % is ~9 sigma.
  EXPECT_NEAR(mean * rate, 1.0, 0.01);
  // Exponential: the standard deviation equals the mean.
  EXPECT_NEAR(std::sqrt(var) / mean, 1.0, 0.02);
  EXPECT_EQ(t, poisson_arrivals(n, rate, 42, false));
  EXPECT_NE(t, poisson_arrivals(n, rate, 43, false));
}

TEST(PoissonArrivals, NormalizedEndsAtNOverRate) {
  const std::vector<double> t = poisson_arrivals(100, 4, 3);
  EXPECT_NEAR(t.back(), 25.0, 1e-9);
  EXPECT_GT(t.front(), 0.0);
  EXPECT_THROW(poisson_arrivals(3, 0, 1), Error);
}

}  // namespace
}  // namespace ceiling::loadgen
