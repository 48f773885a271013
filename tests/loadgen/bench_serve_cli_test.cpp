// `ceiling bench serve` end to end: the built binary against the in-process fake server
// (fake_server.h): the report on stdout, the result JSON, failures counted, and one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/cli_run.h"
#include "fake_server.h"

namespace ceiling::loadgen {
namespace {

using cli_test::run_cli;
using fake::FakeServer;

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

std::string tmp(const std::string& name) {
  return ::testing::TempDir() + "bench_serve_" + name;
}

TEST(BenchServeCli, RandomIdsToCompletions) {
  FakeServer s;
  const std::string out = tmp("random.json");
  const auto r = run_cli(CEILING_BIN,
                         "bench serve --base-url " + s.url() +
                             " --num-prompts 20 --random-input-len 8 --random-output-len 4 "
                             "--max-concurrency 4 --seed 3 --num-warmups 3 --out " +
                             out,
                         "random");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Serving Benchmark Result"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Mean TTFT (ms):"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("P99 ITL (ms):"), std::string::npos) << r.out;
  const nlohmann::json j = read_json(out);
  EXPECT_NE(r.out.find("warm-up: 3 requests, 0 failed"), std::string::npos) << r.out;
  EXPECT_EQ(j["model_id"], "test-model");  // the first of GET /v1/models
  EXPECT_EQ(j["completed"], 20);
  EXPECT_EQ(j["failed"], 0);
  EXPECT_EQ(j["total_input_tokens"], 160);
  EXPECT_EQ(j["total_output_tokens"], 80);
  EXPECT_EQ(j["max_concurrency"], 4);
  EXPECT_LE(j["max_concurrent_requests"].get<int>(), 4);
  EXPECT_EQ(j["request_rate"], "inf");
  EXPECT_EQ(j["prompt_kind"], "token ids");
  EXPECT_GT(j["mean_e2el_ms"].get<double>(), 4 * 1.9);  // 4 chunks, 2 ms apart at the server
  EXPECT_LE(j["mean_ttft_ms"].get<double>(), j["mean_e2el_ms"].get<double>());
  EXPECT_EQ(j["ttfts"].size(), 20u);
  EXPECT_EQ(j["itls"][0].size(), 3u);
  EXPECT_LE(s.peak(), 4);
}

TEST(BenchServeCli, ChatAtAPoissonRate) {
  FakeServer s;
  const std::string out = tmp("chat.json");
  const auto r = run_cli(CEILING_BIN,
                         "bench serve --base-url " + s.url() +
                             " --endpoint /v1/chat/completions --model m --num-prompts 10 "
                             "--random-input-len 16 --random-output-len 3 --request-rate 200 "
                             "--out " +
                             out,
                         "chat");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = read_json(out);
  EXPECT_EQ(j["model_id"], "m");
  EXPECT_EQ(j["backend"], "openai-chat");
  EXPECT_EQ(j["prompt_kind"], "text");
  EXPECT_EQ(j["completed"], 10);
  EXPECT_EQ(j["request_rate"], 200.0);
  EXPECT_GE(j["duration"].get<double>(), 10.0 / 200);
}

TEST(BenchServeCli, FileDatasetCountsFailures) {
  FakeServer s;
  const std::string prompts = tmp("prompts.jsonl"), out = tmp("file.json");
  std::ofstream(prompts) << R"({"prompt": "hello", "max_tokens": 2})"
                            "\n"
                         << R"({"prompt": "fail500"})"
                            "\n"
                         << R"({"prompt": "drop", "max_tokens": 5})"
                            "\n";
  const auto r = run_cli(
      CEILING_BIN, "bench serve --base-url " + s.url() + " --dataset " + prompts + " --out " + out,
      "file");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = read_json(out);
  EXPECT_EQ(j["completed"], 1);
  EXPECT_EQ(j["failed"], 2);
  EXPECT_EQ(j["total_output_tokens"], 2);
  EXPECT_EQ(j["errors"][1], "HTTP 500: boom");
  EXPECT_NE(j["errors"][2].get<std::string>(), "");
}

TEST(BenchServeCli, AllFailedExitsOne) {
  FakeServer s;
  const std::string prompts = tmp("bad.jsonl");
  std::ofstream(prompts) << R"({"prompt": "fail500"})"
                            "\n"
                         << R"({"prompt": "garbage"})"
                            "\n";
  const auto r =
      run_cli(CEILING_BIN, "bench serve --base-url " + s.url() + " --model m --dataset " + prompts,
              "allfail");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("error: bench serve: all 2 requests failed"), std::string::npos) << r.err;
}

TEST(BenchServeCli, BadInputIsOneLine) {
  for (const std::string args :
       {"--base-url localhost:8000", "--endpoint /v1/embeddings --model m", "--request-rate 0",
        "--dataset /dev/zero --model m", "--tokenizer /nonexistent --model m"}) {
    const auto r = run_cli(CEILING_BIN, "bench serve " + args, "bad");
    EXPECT_EQ(r.code, 1) << args;
    EXPECT_EQ(r.err.rfind("error: bench serve", 0) == 0 || r.err.rfind("error: ", 0) == 0, true)
        << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  }
}

TEST(BenchServeCli, ConnectionRefusedIsOneLine) {
  std::string url;
  {
    FakeServer s;
    url = s.url();
  }
  for (const std::string model : {"", " --model m"}) {
    const auto r =
        run_cli(CEILING_BIN, "bench serve --num-prompts 3 --base-url " + url + model, "refused");
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find("cannot connect to " + url), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

// The issue's server-overhead recipe: 1-token completions from 64 concurrent clients.
TEST(BenchServeCli, OneTokenAt64Clients) {
  FakeServer s;
  const std::string out = tmp("overhead.json");
  const auto r =
      run_cli(CEILING_BIN,
              "bench serve --base-url " + s.url() +
                  " --model m --num-prompts 640 --random-input-len 4 "
                  "--random-output-len 1 --max-concurrency 64 --request-rate inf --out " +
                  out,
              "overhead");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = read_json(out);
  EXPECT_EQ(j["completed"], 640);
  EXPECT_EQ(j["workers"], 64);
  EXPECT_EQ(j["mean_tpot_ms"], 0.0);
  EXPECT_GT(j["request_throughput"].get<double>(), 0.0);
}

}  // namespace
}  // namespace ceiling::loadgen
