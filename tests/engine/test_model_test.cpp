// make-test-model: every tiny preset writes a directory that load_model, the tokenizer and the
// forward accept; the weights are deterministic, sanely scaled, and seed-dependent.
#include "engine/test_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "core/status.h"
#include "engine/cpu_ops.h"
#include "serve/generate.h"
#include "model/loader.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"

namespace ceiling::engine {
namespace {

// The preset's tokenizer in the repository's data/tokenizers (the tests never read outside it).
std::filesystem::path repo_tokenizer(const std::string& preset) {
  return std::filesystem::path(CEILING_DATA_DIR) / "tokenizers" /
         test_model_preset(preset).tokenizer;
}

std::filesystem::path scratch(const std::string& name) {
  auto p = std::filesystem::temp_directory_path() /
           ("ceiling_test_model_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(p);
  return p;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(TestModel, WeightValuesAreStandardNormalish) {
  double s = 0, s2 = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = test_weight_normal(9, 3, i);
    s += x;
    s2 += x * x;
  }
  EXPECT_NEAR(s / n, 0.0, 0.01);
  EXPECT_NEAR(s2 / n, 1.0, 0.02);
  EXPECT_EQ(test_weight_normal(1, 2, 3), test_weight_normal(1, 2, 3));
  EXPECT_NE(test_weight_normal(1, 2, 3), test_weight_normal(2, 2, 3));
}

TEST(TestModel, UnknownPresetAndMissingTokenizerAreErrors) {
  EXPECT_THROW(test_model_preset("tiny-gpt5"), Error);
  MakeTestModelOptions o;
  o.preset = "tiny-llama";
  o.out = scratch("notok");
  o.tokenizer_dir = scratch("no_such_dir");
  EXPECT_THROW(make_test_model(o), Error);
}

TEST(TestModel, EveryTinyPresetLoadsAndRuns) {
  for (const char* name : {"tiny-llama", "tiny-mistral", "tiny-qwen2", "tiny-qwen3"}) {
    SCOPED_TRACE(name);
    const auto dir = scratch(name);
    MakeTestModelOptions o;
    o.preset = name;
    o.out = dir;
    o.seed = 11;
    o.tokenizer_dir = repo_tokenizer(name);
    make_test_model(o);
    const Model m = load_model(dir);
    const TestModelPreset p = test_model_preset(name);
    EXPECT_EQ(m.config.vocab_size, p.config.vocab_size);
    EXPECT_EQ(m.config.head_dim, p.config.head_dim);
    EXPECT_EQ(m.config.num_kv_heads, p.config.num_kv_heads);
    EXPECT_EQ(m.config.attention_bias, p.config.attention_bias);
    EXPECT_EQ(m.config.qk_norm, p.config.qk_norm);
    EXPECT_EQ(m.config.rope_scaling.type, p.config.rope_scaling.type);
    EXPECT_EQ(m.config.tie_word_embeddings, p.config.tie_word_embeddings);
    EXPECT_TRUE(m.unexpected_tensors.empty());
    EXPECT_EQ(m.weights.embed.dtype, DType::kBF16);
    // Projections ~ N(0, 1/in_features); norms ~ 1.
    const TensorView& q = m.weights.layers[1].q_proj;
    double s2 = 0;
    for (int64_t i = 0; i < q.numel(); ++i) {
      const double x = load_as_f32(q.data, q.dtype, i);
      s2 += x * x;
    }
    EXPECT_NEAR(std::sqrt(s2 / q.numel()), 1.0 / std::sqrt(static_cast<double>(q.dim(1))), 0.01);
    const TensorView& nw = m.weights.final_norm;
    EXPECT_NEAR(load_as_f32(nw.data, nw.dtype, 0), 1.0, 0.3);

    const Tokenizer tok = Tokenizer::from_dir(dir);
    EXPECT_LE(tok.vocab_size(), m.config.vocab_size);
    CpuOps ops(CpuOpsOptions{2});
    ops.upload(m.config, m.weights);
    Generator gen(ops, GeneratorLimits{64, 16, 32});
    const auto logits = gen.prompt_logits(tok.encode("Hello, world!", true));
    ASSERT_EQ(logits.size(), static_cast<size_t>(m.config.vocab_size));
    for (float x : logits) ASSERT_TRUE(std::isfinite(x));
    GenerateOptions g;
    g.sampling.temperature = 0;
    g.max_new_tokens = 4;
    EXPECT_EQ(gen.generate(tok.encode("Hi", true), g).tokens.size(), 4u);
    std::filesystem::remove_all(dir);
  }
}

TEST(TestModel, SameSeedSameFilesOtherSeedOtherWeights) {
  const auto a = scratch("a"), b = scratch("b"), c = scratch("c");
  MakeTestModelOptions o;
  o.preset = "tiny-mistral";
  o.seed = 5;
  o.tokenizer_dir = repo_tokenizer(o.preset);
  o.out = a;
  o.n_threads = 1;
  make_test_model(o);
  o.out = b;
  o.n_threads = 3;  // thread count must not matter
  make_test_model(o);
  o.out = c;
  o.seed = 6;
  make_test_model(o);
  const std::string wa = read_file(a / "model.safetensors");
  EXPECT_EQ(wa, read_file(b / "model.safetensors"));
  EXPECT_NE(wa, read_file(c / "model.safetensors"));
  EXPECT_EQ(read_file(a / "config.json"), read_file(c / "config.json"));
  for (const auto& d : {a, b, c}) std::filesystem::remove_all(d);
}

TEST(TestModel, ConfigJsonRoundTripsThroughTheParser) {
  for (const auto& name : test_model_preset_names()) {
    SCOPED_TRACE(name);
    const ModelConfig c = test_model_preset(name).config;
    const ModelConfig r = parse_model_config(model_config_json(c), name);
    EXPECT_EQ(r.arch, c.arch);
    EXPECT_EQ(r.num_params(), c.num_params());
    EXPECT_EQ(r.rope_scaling.type, c.rope_scaling.type);
    EXPECT_DOUBLE_EQ(r.rope_scaling.factor, c.rope_scaling.factor);
    EXPECT_DOUBLE_EQ(r.rope_theta, c.rope_theta);
    EXPECT_EQ(r.eos_token_ids, c.eos_token_ids);
  }
}

}  // namespace
}  // namespace ceiling::engine
