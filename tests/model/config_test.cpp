// config.json parsing for every supported family (shapes of the real public models) and the
// error cases. Each config is written to a file and read through load_model_config.
#include "model/config.h"

#include <gtest/gtest.h>

#include "model_test_util.h"

namespace ceiling {
namespace {

using test::TempDir;

ModelConfig load(const std::string& json) {
  TempDir dir;
  test::write_text(dir / "config.json", json);
  return load_model_config(dir.path());
}

std::string error_of(const std::string& json) {
  try {
    load(json);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ModelConfig, Llama2_7B) {
  const ModelConfig c = load(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 32, "rms_norm_eps": 1e-05,
    "vocab_size": 32000, "max_position_embeddings": 4096, "tie_word_embeddings": false,
    "torch_dtype": "float16", "bos_token_id": 1, "eos_token_id": 2, "rope_scaling": null})");
  EXPECT_EQ(c.arch, Arch::kLlama);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.num_kv_heads, 32);
  EXPECT_EQ(c.dtype, DType::kF16);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kNone);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, std::vector<int>{2});
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.num_params(), 6738415616);  // Llama-2-7b
}

TEST(ModelConfig, Llama3_8B) {
  const ModelConfig c = load(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
    "rope_theta": 500000.0, "vocab_size": 128256, "max_position_embeddings": 8192,
    "torch_dtype": "bfloat16", "bos_token_id": 128000, "eos_token_id": 128001})");
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.kv_dim(), 1024);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.num_params(), 8030261248);  // Meta-Llama-3-8B
}

TEST(ModelConfig, Llama31WithLlama3RopeScaling) {
  const ModelConfig c = load(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 128256,
    "max_position_embeddings": 131072, "rope_theta": 500000.0,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "eos_token_id": [128001, 128008, 128009]})");
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{128001, 128008, 128009}));
}

TEST(ModelConfig, Llama32TiedEmbeddings) {
  const ModelConfig c = load(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 2048, "intermediate_size": 8192, "num_attention_heads": 32, "head_dim": 64,
    "num_hidden_layers": 16, "num_key_value_heads": 8, "vocab_size": 128256,
    "tie_word_embeddings": true, "rope_theta": 500000.0,
    "rope_scaling": {"factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"}})");
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_EQ(c.num_params(), 1235814400);  // Llama-3.2-1B (lm_head shared)
}

TEST(ModelConfig, Mistral7B) {
  const ModelConfig c = load(R"({"architectures": ["MistralForCausalLM"], "model_type": "mistral",
    "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 32768,
    "rope_theta": 1000000.0, "sliding_window": null, "max_position_embeddings": 32768})");
  EXPECT_EQ(c.arch, Arch::kMistral);
  EXPECT_EQ(c.num_params(), 7248023552);  // Mistral-7B-v0.3
}

TEST(ModelConfig, Qwen25HasQkvBias) {
  const ModelConfig c = load(R"({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
    "hidden_size": 896, "intermediate_size": 4864, "num_attention_heads": 14,
    "num_hidden_layers": 24, "num_key_value_heads": 2, "vocab_size": 151936,
    "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "tie_word_embeddings": true,
    "torch_dtype": "bfloat16", "max_position_embeddings": 32768})");
  EXPECT_EQ(c.arch, Arch::kQwen2);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.num_params(), 494032768);  // Qwen2.5-0.5B
}

TEST(ModelConfig, Qwen3HasQkNormAndExplicitHeadDim) {
  const ModelConfig c = load(R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
    "hidden_size": 1024, "intermediate_size": 3072, "num_attention_heads": 16, "head_dim": 128,
    "num_hidden_layers": 28, "num_key_value_heads": 8, "vocab_size": 151936,
    "attention_bias": false, "tie_word_embeddings": true, "rope_theta": 1000000,
    "max_position_embeddings": 40960, "rms_norm_eps": 1e-06})");
  EXPECT_EQ(c.arch, Arch::kQwen3);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.q_dim(), 2048);            // wider than hidden_size
  EXPECT_EQ(c.num_params(), 596049920);  // Qwen3-0.6B
}

TEST(ModelConfig, ArchitecturesFieldAloneIsEnough) {
  const ModelConfig c = load(R"({"architectures": ["Qwen2ForCausalLM"], "vocab_size": 5,
    "hidden_size": 4, "intermediate_size": 4, "num_hidden_layers": 1, "num_attention_heads": 2})");
  EXPECT_EQ(c.arch, Arch::kQwen2);
  EXPECT_EQ(c.num_kv_heads, 2);  // defaults to num_attention_heads
}

TEST(ModelConfig, Errors) {
  const std::string base = R"("vocab_size": 5, "hidden_size": 8, "intermediate_size": 4,
    "num_hidden_layers": 1, "num_attention_heads": 2)";
  auto cfg = [&](const std::string& more) {
    return "{\"model_type\": \"llama\", " + base + more + "}";
  };
  struct Case {
    std::string json, want;
  };
  const std::vector<Case> cases = {
      {R"({"model_type": "gpt2", )" + base + "}", "unsupported architecture"},
      {R"({"architectures": ["FalconForCausalLM"], )" + base + "}", "unsupported architecture"},
      // `architectures` names the class: an unknown one, or a known base with another head, is
      // refused even when model_type is supported (vLLM reads the class).
      {R"({"model_type": "llama", "architectures": ["NoSuchForCausalLM"], )" + base + "}",
       "unsupported architecture 'NoSuchForCausalLM' (supported: LlamaForCausalLM"},
      {R"({"model_type": "llama", "architectures": ["LlamaForSequenceClassification"], )" + base +
           "}",
       "unsupported architecture 'LlamaForSequenceClassification'"},
      {R"({"model_type": "llama", "architectures": [], )" + base + "}",
       "'architectures' must be a non-empty list"},
      {cfg(R"(, "rope_scaling": {"rope_type": "yarn", "factor": 4.0})"),
       "unsupported rope_scaling type 'yarn'"},
      {cfg(R"(, "rope_scaling": {"type": "dynamic", "factor": 2.0})"),
       "unsupported rope_scaling type 'dynamic'"},
      {cfg(R"(, "rope_scaling": 3)"), "'rope_scaling' must be an object"},
      {R"({"model_type": "llama", "vocab_size": 5, "intermediate_size": 4,
          "num_hidden_layers": 1, "num_attention_heads": 2})",
       "missing field 'hidden_size'"},
      {R"({"model_type": "llama", "vocab_size": 5, "hidden_size": 8, "intermediate_size": 4,
          "num_attention_heads": 2})",
       "missing field 'num_hidden_layers'"},
      {R"({"model_type": "llama", "vocab_size": 5, "hidden_size": 8, "intermediate_size": 4,
          "num_hidden_layers": 1, "num_attention_heads": 0})",
       "'num_attention_heads' must be positive"},
      {cfg(R"(, "num_key_value_heads": 0)"), "'num_key_value_heads' must be positive"},
      {R"({"model_type": "llama", "vocab_size": 5, "hidden_size": 12, "intermediate_size": 4,
          "num_hidden_layers": 1, "num_attention_heads": 6, "num_key_value_heads": 4})",
       "not a multiple of num_key_value_heads"},
      {R"({"model_type": "llama", "vocab_size": 5, "hidden_size": 10, "intermediate_size": 4,
          "num_hidden_layers": 1, "num_attention_heads": 3})",
       "not divisible"},
      {R"({"model_type": "llama", "vocab_size": "5", "hidden_size": 8, "intermediate_size": 4,
          "num_hidden_layers": 1, "num_attention_heads": 2})",
       "'vocab_size' must be an integer"},
      {R"({"model_type": "llama", "vocab_size": 5.5, "hidden_size": 8, "intermediate_size": 4,
          "num_hidden_layers": 1, "num_attention_heads": 2})",
       "'vocab_size' must be an integer"},
      {cfg(R"(, "tie_word_embeddings": "yes")"), "'tie_word_embeddings' must be a boolean"},
      {cfg(R"(, "rope_theta": "big")"), "'rope_theta' must be a number"},
      {cfg(R"(, "rms_norm_eps": -1)"), "rms_norm_eps must be positive"},
      {cfg(R"(, "torch_dtype": "complex64")"), "unsupported torch_dtype"},
      {cfg(R"(, "eos_token_id": "2")"), "'eos_token_id' must be an integer"},
      {"[1, 2]", "top level must be a JSON object"},
      {"{\"model_type\": ", "not valid JSON"},
  };
  for (const auto& c : cases) {
    const std::string msg = error_of(c.json);
    EXPECT_NE(msg.find(c.want), std::string::npos) << "want '" << c.want << "', got: " << msg;
    EXPECT_NE(msg.find("config.json"), std::string::npos) << msg;  // names the file
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(ModelConfig, MissingFileNamesIt) {
  TempDir dir;
  try {
    load_model_config(dir.path());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ceiling
