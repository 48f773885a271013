// Real model shapes, each transcribed from the model's Hugging Face config.json:
//   llama-3.2-1b   meta-llama/Llama-3.2-1B/config.json
//   llama-3.2-3b   meta-llama/Llama-3.2-3B/config.json
//   llama-3.1-8b   meta-llama/Llama-3.1-8B/config.json
//   llama-3.1-70b  meta-llama/Llama-3.1-70B/config.json
//   qwen2.5-0.5b   Qwen/Qwen2.5-0.5B-Instruct/config.json
//   qwen2.5-7b     Qwen/Qwen2.5-7B-Instruct/config.json
//   qwen2.5-72b    Qwen/Qwen2.5-72B-Instruct/config.json
//   mistral-7b     mistralai/Mistral-7B-Instruct-v0.3/config.json
#include <array>

#include "model/config.h"

namespace ceiling {
namespace {

ModelConfig llama3(std::string name, int H, int I, int L, int heads, int kv, int D, double factor,
                   bool tie) {
  ModelConfig c;
  c.name = std::move(name);
  c.arch = Arch::kLlama;
  c.vocab_size = 128256;
  c.hidden_size = H;
  c.intermediate_size = I;
  c.num_layers = L;
  c.num_heads = heads;
  c.num_kv_heads = kv;
  c.head_dim = D;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 500000.0;
  c.rope_scaling = {RopeScaling::Type::kLlama3, factor, 1.0, 4.0, 8192};
  c.max_position_embeddings = 131072;
  c.tie_word_embeddings = tie;
  c.bos_token_id = 128000;
  c.eos_token_ids = {128001, 128008, 128009};
  return c;
}

ModelConfig qwen25(std::string name, int V, int H, int I, int L, int heads, int kv, bool tie) {
  ModelConfig c;
  c.name = std::move(name);
  c.arch = Arch::kQwen2;
  c.vocab_size = V;
  c.hidden_size = H;
  c.intermediate_size = I;
  c.num_layers = L;
  c.num_heads = heads;
  c.num_kv_heads = kv;
  c.head_dim = H / heads;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1000000.0;
  c.max_position_embeddings = 32768;
  c.tie_word_embeddings = tie;
  c.attention_bias = true;
  c.bos_token_id = 151643;
  c.eos_token_ids = {151645};
  return c;
}

ModelConfig mistral7b() {
  ModelConfig c;
  c.name = "mistral-7b";
  c.arch = Arch::kMistral;
  c.vocab_size = 32768;
  c.hidden_size = 4096;
  c.intermediate_size = 14336;
  c.num_layers = 32;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 1000000.0;
  c.max_position_embeddings = 32768;
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  return c;
}

std::vector<ModelConfig> all_presets() {
  return {
      llama3("llama-3.2-1b", 2048, 8192, 16, 32, 8, 64, 32.0, true),
      llama3("llama-3.2-3b", 3072, 8192, 28, 24, 8, 128, 32.0, true),
      llama3("llama-3.1-8b", 4096, 14336, 32, 32, 8, 128, 8.0, false),
      llama3("llama-3.1-70b", 8192, 28672, 80, 64, 8, 128, 8.0, false),
      qwen25("qwen2.5-0.5b", 151936, 896, 4864, 24, 14, 2, true),
      qwen25("qwen2.5-7b", 152064, 3584, 18944, 28, 28, 4, false),
      qwen25("qwen2.5-72b", 152064, 8192, 29568, 80, 64, 8, false),
      mistral7b(),
  };
}

}  // namespace

std::optional<ModelConfig> find_preset(std::string_view name) {
  for (auto& c : all_presets())
    if (c.name == name) return c;
  return std::nullopt;
}

std::vector<std::string> preset_names() {
  std::vector<std::string> r;
  for (auto& c : all_presets()) r.push_back(c.name);
  return r;
}

}  // namespace ceiling
