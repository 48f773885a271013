// Issue 18, the CLI: flags that take files or JSON are bounded (regular files only, with a cap;
// JSON depth capped), and make-test-model refuses a tokenizer whose ids its vocab cannot hold.
// Also flag combinations refused before any work (bench latency --kernel-trace).
// Runs the built `ceiling` binary (CEILING_BIN); every failure is one line and exit code 1.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/cli_run.h"

namespace {

using Result = ceiling::cli_test::CliResult;

Result run(const std::string& args) {
  return ceiling::cli_test::run_cli(CEILING_BIN, args, "bounded_flags");
}

void expect_error(const std::string& args, const std::string& needle) {
  const Result r = run(args);
  EXPECT_EQ(r.code, 1) << args << " -> " << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
}

const std::string kModel = std::string(CEILING_SOURCE_DIR) + "/models/stories260K";

TEST(BoundedFlags, TextFileMustBeARegularFile) {
  // A directory used to encode nothing and exit 0; /dev/zero read until bad_alloc.
  expect_error("tokenize --model " + kModel + " --text-file /tmp", "is a directory");
  expect_error("tokenize --model " + kModel + " --text-file /dev/zero", "not a regular file");
  expect_error("detokenize --model " + kModel + " --ids-file /dev/zero", "not a regular file");
  const std::string f = testing::TempDir() + "ceiling_text.txt";
  std::ofstream(f) << "Once upon a time";
  const Result r = run("tokenize --model " + kModel + " --text-file " + f);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("[1,", 0), 0u) << r.out;
}

TEST(BoundedFlags, DetokenizeIdsAreAFlatListOfIntegers) {
  // 60,000 nested brackets overflowed the stack while building the error message.
  expect_error("detokenize --model " + kModel + " --ids '" + std::string(60000, '[') + "'",
               "element 0 is a list");
  expect_error("detokenize --model " + kModel + " --ids '[1, [2]]'", "element 1 is a list");
  expect_error("detokenize --model " + kModel + " --ids '[1, \"x\"]'", "element 1 is a string");
  expect_error("detokenize --model " + kModel + " --ids '{\"a\": 1}'", "got an object");
  expect_error("detokenize --model " + kModel + " --ids '[1] x'", "syntax error at byte");
  const Result r = run("detokenize --model " + kModel + " --ids '[1, 403, 407]'");
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST(BoundedFlags, KernelTraceNeedsAGraphStepOnOneGpu) {
  // Checked before the model loads or the GPU is touched: runs without a device. Builds without
  // the CUDA engine have no such flag (no `bench latency`, or one that only says so).
  const Result help = run("bench latency --help");
  if (help.out.find("--kernel-trace") == std::string::npos)
    GTEST_SKIP() << "no bench latency --kernel-trace in this build";
  expect_error("bench latency --model " + kModel + " --kernel-trace 5 --no-graphs",
               "--kernel-trace needs one GPU");
  expect_error("bench latency --model " + kModel + " --kernel-trace 5 --batch 300",
               "--batch <= 256");
  expect_error("bench latency --model " + kModel + " --kernel-trace 5 --tensor-parallel-size 2",
               "--tensor-parallel-size 1");
}

TEST(BoundedFlags, MakeTestModelRefusesATokenizerLargerThanItsVocab) {
  const std::string llama3 = std::string(CEILING_DATA_DIR) + "/tokenizers/llama3";
  if (!std::filesystem::exists(llama3 + "/tokenizer.json")) GTEST_SKIP() << "no " << llama3;
  const std::string out = testing::TempDir() + "ceiling_mtm_mismatch";
  expect_error("make-test-model --preset tiny-llama --tokenizer-dir " + llama3 + " --out " + out,
               "has 128256 ids but preset tiny-llama has vocab_size 32000");
  EXPECT_FALSE(std::filesystem::exists(out + "/model.safetensors"));
}

// --seed -1 or 2^64 silently became 2^64 - 1; --threads 100000 tried to start that many threads.
// (make-test-model here; generate's flags take the same validators, apps/ceiling/flag_check.h.)
TEST(BoundedFlags, NumericFlagsAreBounded) {
  const std::string out = testing::TempDir() + "ceiling_mtm_flags";
  for (const char* bad : {"--seed -1", "--seed 18446744073709551616", "--seed 1e3",
                          "--threads 100000", "--threads -2"}) {
    const Result r = run("make-test-model --preset tiny-llama --out " + out + " " + bad);
    EXPECT_NE(r.code, 0) << bad;
    EXPECT_NE(r.code, -1) << bad;
    EXPECT_FALSE(std::filesystem::exists(out + "/model.safetensors")) << bad;
  }
}

}  // namespace
