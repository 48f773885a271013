// The bundled real model end to end, through the path a user's model takes: load_model ->
// CpuOps -> Forward over the paged cache -> sampler -> StreamDecoder. Greedy decoding from BOS
// must reproduce llama2.c's published 256-step sample byte for byte.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "engine/cpu_ops.h"
#include "serve/text_generate.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"

namespace ceiling::engine {
namespace {

const std::filesystem::path kModel =
    std::filesystem::path(CEILING_SOURCE_DIR) / "models/stories260K";
const std::filesystem::path kExpected = std::filesystem::path(CEILING_SOURCE_DIR) /
                                        "tests/data/stories260K/expected_greedy_t0_256steps.txt";

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Stories : ::testing::Test {
  Model model = load_model(kModel);
  Tokenizer tok = Tokenizer::from_dir(kModel);
  CpuOps ops{CpuOpsOptions{2}};
  void SetUp() override { ops.upload(model.config, model.weights); }
  GenerateOptions greedy(int n) {
    GenerateOptions o;
    o.sampling.temperature = 0;
    o.max_new_tokens = n;
    o.stop_token_ids = model.generation.eos_token_ids;
    return o;
  }
};

TEST_F(Stories, GreedyFromBosReproducesLlama2cByteForByte) {
  if (!std::filesystem::exists(kExpected)) GTEST_SKIP() << "missing " << kExpected;
  const std::vector<int32_t> prompt = tok.encode("", true);
  ASSERT_EQ(prompt, std::vector<int32_t>{1});  // llama2.c: encode("", bos) = [BOS]
  // llama2.c's run.c with -n 256 runs 256 forwards from BOS: up to 256 tokens, stopping at BOS.
  Generator gen(ops, GeneratorLimits{512, 16, 64});
  std::string streamed;
  const auto r =
      generate_text(gen, tok, prompt, greedy(256), {}, [&](std::string_view s) { streamed += s; });
  EXPECT_EQ(r.text, streamed);
  EXPECT_EQ(r.text, tok.decode(r.tokens.tokens, true));
  // run.c ends with printf("\n").
  EXPECT_EQ(r.text + "\n", read_file(kExpected));
}

TEST_F(Stories, ChunkedPrefillAndBlockSizeDoNotChangeTheText) {
  const auto prompt = tok.encode("Once upon a time, there was a little girl", true);
  Generator a(ops, GeneratorLimits{128, 16, 256});
  const auto want = generate_text(a, tok, prompt, greedy(40), {});
  for (auto [bs, chunk] : {std::pair{1, 1}, {3, 5}, {7, 64}}) {
    CpuOps o2{CpuOpsOptions{1}};
    o2.upload(model.config, model.weights);
    Generator b(o2, GeneratorLimits{128, bs, chunk});
    EXPECT_EQ(generate_text(b, tok, prompt, greedy(40), {}).text, want.text) << bs << " " << chunk;
  }
}

TEST_F(Stories, PromptContextKeepsTheLeadingSpace) {
  const auto prompt = tok.encode("Once upon a", true);
  EXPECT_EQ(prompt, (std::vector<int32_t>{1, 403, 407, 261}));
  Generator gen(ops, GeneratorLimits{128, 16, 64});
  const auto r = generate_text(gen, tok, prompt, greedy(20), {});
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), r.tokens.tokens.begin(), r.tokens.tokens.end());
  const std::string full = tok.decode(all, true), head = tok.decode(prompt, true);
  ASSERT_EQ(full.substr(0, head.size()), head);
  EXPECT_EQ(r.text, full.substr(head.size()));
  EXPECT_EQ(r.text.substr(0, 1), " ");  // " time", not "time"
}

TEST_F(Stories, StopStringEndsGenerationAndIsNotEmitted) {
  const auto prompt = tok.encode("", true);
  Generator gen(ops, GeneratorLimits{512, 16, 64});
  const std::string full = generate_text(gen, tok, prompt, greedy(120), {}).text;
  const size_t at = full.find("Lily");
  ASSERT_NE(at, std::string::npos);
  std::string streamed;
  const auto r = generate_text(gen, tok, prompt, greedy(120), {"xyz", "Lily"},
                               [&](std::string_view s) { streamed += s; });
  EXPECT_EQ(r.tokens.finish, FinishReason::kStopString);
  EXPECT_EQ(r.text, full.substr(0, at));
  EXPECT_EQ(streamed, r.text);
}

TEST_F(Stories, SampledGenerationIsSeededAndValid) {
  Generator gen(ops, GeneratorLimits{512, 16, 64});
  GenerateOptions o = greedy(64);
  o.sampling.temperature = 0.8f;
  o.sampling.top_p = 0.9f;
  o.sampling.seed = 7;
  const auto a = generate_text(gen, tok, {1}, o, {}), b = generate_text(gen, tok, {1}, o, {});
  EXPECT_EQ(a.text, b.text);
  EXPECT_FALSE(a.text.empty());
}

}  // namespace
}  // namespace ceiling::engine
