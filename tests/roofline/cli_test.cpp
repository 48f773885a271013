// Runs the built `ceiling` binary (CEILING_BIN): exit codes, one-line errors, and the formats.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "common/cli_run.h"
#include "hw/measured.h"

namespace {

using Result = ceiling::cli_test::CliResult;

Result run(const std::string& args) {
  return ceiling::cli_test::run_cli(CEILING_BIN, args, "cli");
}

void expect_error(const std::string& args, const std::string& needle) {
  const Result r = run(args);
  EXPECT_NE(r.code, 0) << args;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << args << " -> " << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << args << " -> " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
}

}  // namespace

TEST(RooflineCli, JsonOutputFollowsTheContract) {
  const Result r = run("roofline --model llama-3.1-8b --gpu h100-sxm --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["gpu"], "h100-sxm");
  EXPECT_EQ(j["total"]["limiter"], "memory");
  EXPECT_NEAR(j["total"]["time_s_roofline"].get<double>(), 4.52e-3, 0.01e-3);
  EXPECT_EQ(j["memory"]["kv_bytes_per_token"], 131072.0);
}

TEST(RooflineCli, TableCsvSweepAndLists) {
  Result r = run("roofline --model llama-3.1-8b --gpu h200 --phase prefill --context 4096");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("gate_up_proj"), std::string::npos);
  EXPECT_NE(r.out.find("compute"), std::string::npos);
  r = run("roofline --model qwen2.5-7b --gpu h100-sxm --format csv --tp 2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("attn_allreduce,28,"), std::string::npos) << r.out;
  r = run("roofline --model llama-3.2-1b --gpu l4 --sweep batch=1,8,64 --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto arr = nlohmann::json::parse(r.out);
  ASSERT_EQ(arr.size(), 3u);
  EXPECT_EQ(arr[2]["batch"], 64);
  r = run("roofline --model llama-3.2-1b --gpu l4 --sweep context=128,256 --format csv");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 3);
  r = run("roofline --list-gpus");
  ASSERT_EQ(r.code, 0);
  for (const char* id :
       {"h100-sxm", "h100-pcie", "h200", "b200", "b300", "a100-sxm-80gb", "l40s", "l4", "rtx4090"})
    EXPECT_NE(r.out.find(id), std::string::npos) << id;
  r = run("roofline --list-models");
  ASSERT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("llama-3.1-8b"), std::string::npos);
}

TEST(RooflineCli, DefaultGpuIsAnnounced) {
  const Result r = run("roofline --model llama-3.2-1b --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("note: "), std::string::npos) << "says which GPU it picked";
}

TEST(RooflineCli, BadInputGetsOneLineErrors) {
  expect_error("roofline --model llama-3.1-8b --gpu h300", "unknown GPU 'h300'");
  expect_error("roofline --model llama-9b --gpu h100-sxm", "unknown model 'llama-9b'");
  expect_error("roofline --model llama-3.1-8b --gpu h100-sxm --batch 0", "batch");
  expect_error("roofline --model llama-3.1-8b --gpu h100-sxm --context 0", "context");
  expect_error("roofline --model llama-3.1-8b --gpu h100-sxm --tp 3", "num_attention_heads 32");
  expect_error("roofline --model llama-3.1-8b --gpu h100-sxm --weight-dtype int3", "int3");
  expect_error("roofline --model llama-3.1-8b --gpu h100-sxm --sweep batch=1,x", "'x'");
  expect_error("roofline --model llama-3.1-8b --gpu h100-sxm --sweep heads=1", "heads");
  expect_error("roofline --model llama-3.1-8b --gpu l4 --ceilings measured",
               "data/ceilings/l4.json");
  expect_error("roofline --model llama-3.1-8b --gpu h100-sxm --format xml", "xml");
  expect_error("roofline --gpu h100-sxm", "--model");
  const std::string cfg = testing::TempDir() + "zero_heads_config.json";
  if (FILE* f = fopen(cfg.c_str(), "w")) {
    fputs(R"({"model_type":"llama","vocab_size":10,"hidden_size":64,"intermediate_size":128,)"
          R"("num_hidden_layers":2,"num_attention_heads":0})",
          f);
    fclose(f);
  }
  expect_error("roofline --gpu h100-sxm --model " + cfg, "num_attention_heads");
}

// The committed H200 r9 kernels file, re-predicted: the recorded counts are the file's own gaps
// counted as docs/results.md counts them.
TEST(RooflineCli, RejoinRePredictsAResultFile) {
  const auto f = ceiling::hw::find_repo_file("bench/results/2026-11-23r9_h200_kernels.json");
  if (!f) GTEST_SKIP() << "result file not found from the working directory";
  std::ifstream in(*f);
  const auto file = nlohmann::json::parse(in);
  int dispatched = 0, inside = 0;
  for (const auto& c : file["cases"]) {
    if (!c.value("dispatched", true) || !c.contains("gap")) continue;
    const double g = c["gap"].get<double>();
    ++dispatched;
    inside += g >= 1 / 1.15 && g <= 1.15;
  }
  Result r = run("roofline --rejoin " + f->string() + " --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["runs"].size(), 1u);
  EXPECT_EQ(j["runs"][0]["dispatched"], dispatched);
  EXPECT_EQ(j["runs"][0]["within_recorded"], inside);
  EXPECT_EQ(j["runs"][0]["cases"].size(), file["cases"].size());
  r = run("roofline --rejoin " + f->string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("current model"), std::string::npos) << r.out;
  expect_error("roofline --rejoin /nonexistent/kernels.json", "cannot open");
  expect_error("roofline --rejoin " + f->string() + " --format csv", "csv");
}

// A set-up whose weights and KV cache do not fit still gets its times, flagged: a WARNING line in
// the table, "DOES NOT FIT" on sweep rows, `fits: false` in JSON.
TEST(RooflineCli, SetUpsThatDoNotFitAreFlagged) {
  Result r = run("roofline --model llama-3.1-70b --gpu l4 --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["fits"], false);
  r = run("roofline --model llama-3.1-70b --gpu l4");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("WARNING: does not fit"), std::string::npos) << r.out;
  r = run("roofline --model llama-3.1-8b --gpu h100-sxm --format json");
  EXPECT_EQ(nlohmann::json::parse(r.out)["fits"], true);
  r = run("roofline --model llama-3.1-8b --gpu h100-sxm");
  EXPECT_EQ(r.out.find("WARNING"), std::string::npos) << r.out;
  r = run("roofline --model llama-3.1-8b --gpu h100-sxm --context 32768 --sweep batch=1,4096");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("DOES NOT FIT"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("WARNING: 1 of 2 points do not fit"), std::string::npos) << r.out;
}

TEST(RooflineCli, PlotIntoAMissingDirectoryIsAOneLineError) {
  expect_error("roofline --model llama-3.1-8b --gpu h100-sxm --plot /nonexistent/dir/roof.png",
               "does not exist");
  expect_error("roofline --model llama-3.1-8b --gpu h100-sxm --plot " + testing::TempDir(),
               "directory");
}

// Usage errors look like every other error (one "error: " line) and exit 2.
TEST(Cli, UnknownSubcommandsAndParseErrorsAreOneLineUsageErrors) {
  expect_error("serve-me", "unknown subcommand 'serve-me'");
  Result r = run("foo");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("roofline"), std::string::npos) << "lists the subcommands: " << r.err;
  expect_error("", "subcommand is required");
  expect_error("roofline --model llama-3.1-8b --batch many", "--batch");
  EXPECT_EQ(run("roofline --model llama-3.1-8b --batch many").code, 2);
  expect_error("roofline --no-such-flag", "--no-such-flag");
  expect_error("--no-such-flag", "--no-such-flag");
  EXPECT_EQ(run("--help").code, 0);
  EXPECT_EQ(run("roofline --help").code, 0);
}
