// Models written by the Python generator (tests/model/pyref/, independent of the C++ writer):
// loaded with load_model, every weight compared byte for byte with pattern(n, seed), where seed
// is the tensor's position in expected_tensors(config).
#include <gtest/gtest.h>

#include <cstring>

#include "model/loader.h"
#include "model/safetensors.h"
#include "model_test_util.h"

namespace ceiling {
namespace {

namespace fs = std::filesystem;

const fs::path kRef = fs::path(CEILING_SOURCE_DIR) / "tests/model/pyref";

// Compares every expected tensor's view with the generator's bytes.
void expect_pattern(const Model& m, DType dtype) {
  const auto expected = expected_tensors(m.config);
  int seed = 0;
  for (const auto& e : expected) {
    SCOPED_TRACE(e.name);
    if (e.optional) continue;  // tied lm_head: not written
    const TensorView v = m.files->view(e.name);
    EXPECT_EQ(v.dtype, dtype);
    EXPECT_TRUE(test::same_bytes(v, test::pattern(v.nbytes(), seed)));
    ++seed;
  }
  // The bound views point at the same bytes.
  EXPECT_TRUE(test::same_bytes(m.weights.embed, test::pattern(m.weights.embed.nbytes(), 0)));
  const auto& last = m.weights.layers.back();
  const TensorView down = m.files->view(
      fmt::format("model.layers.{}.mlp.down_proj.weight", m.weights.layers.size() - 1));
  EXPECT_EQ(last.down_proj.data, down.data);
}

TEST(PythonModels, LlamaBf16SingleFile) {
  const Model m = load_model(kRef / "llama_bf16");
  EXPECT_EQ(m.config.arch, Arch::kLlama);
  EXPECT_EQ(m.weights.layers.size(), 2u);
  expect_pattern(m, DType::kBF16);
  EXPECT_EQ(m.unexpected_tensors,
            std::vector<std::string>{"model.layers.0.self_attn.rotary_emb.inv_freq"});
  EXPECT_EQ(m.files->files().front()->header().metadata.at("format"), "pt");
  EXPECT_EQ(m.generation.do_sample, true);
  EXPECT_EQ(m.generation.top_k, 50);
  EXPECT_EQ(m.generation.eos_token_ids, (std::vector<int>{2, 3}));
  EXPECT_NE(m.weights.lm_head.data, m.weights.embed.data);
}

TEST(PythonModels, Qwen2F16ThreeShards) {
  const Model m = load_model(kRef / "qwen2_f16_sharded");
  EXPECT_EQ(m.config.arch, Arch::kQwen2);
  EXPECT_EQ(m.files->files().size(), 3u);
  expect_pattern(m, DType::kF16);
  ASSERT_NE(m.weights.layers[1].v_bias.data, nullptr);
  EXPECT_EQ(m.weights.layers[1].v_bias.shape[0], 4);  // Hkv * D = 1 * 4
  EXPECT_FALSE(m.generation.temperature);             // no generation_config.json
}

TEST(PythonModels, Qwen3F32Tied) {
  const Model m = load_model(kRef / "qwen3_f32_tied");
  EXPECT_EQ(m.config.arch, Arch::kQwen3);
  EXPECT_EQ(m.config.head_dim, 6);
  expect_pattern(m, DType::kF32);
  EXPECT_EQ(m.weights.lm_head.data, m.weights.embed.data);
  ASSERT_NE(m.weights.layers[0].q_norm.data, nullptr);
  EXPECT_EQ(m.weights.layers[0].q_norm.shape[0], 6);
  EXPECT_EQ(m.weights.layers[0].q_proj.shape[0], 24);  // Hq * D = 4 * 6, wider than H = 8
}

}  // namespace
}  // namespace ceiling
