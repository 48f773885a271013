#include "engine/test_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/status.h"
#include "engine/thread_pool.h"
#include "kernels/cpu/sampling.h"
#include "model/loader.h"
#include "model/safetensors_writer.h"

namespace ceiling::engine {

namespace {

ModelConfig tiny(std::string name, Arch arch, int vocab, int bos, std::vector<int> eos) {
  ModelConfig c;
  c.name = std::move(name);
  c.arch = arch;
  c.vocab_size = vocab;
  c.hidden_size = 64;
  c.intermediate_size = 160;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000.0;
  c.max_position_embeddings = 2048;
  c.dtype = DType::kBF16;
  c.bos_token_id = bos;
  c.eos_token_ids = std::move(eos);
  return c;
}

std::vector<TestModelPreset> presets() {
  std::vector<TestModelPreset> p;
  // Llama with Llama-3 rope scaling (as Llama 3.2) and the Llama-2 tokenizer.
  ModelConfig llama = tiny("tiny-llama", Arch::kLlama, 32000, 1, {2});
  llama.rope_theta = 500000.0;
  // original_max_position_embeddings 64 puts D=16's frequencies in all three llama3 bands
  // (kept, smoothed, divided by the factor), so the scaling shows at short positions.
  llama.rope_scaling = {RopeScaling::Type::kLlama3, 32.0, 1.0, 4.0, 64};
  p.push_back({"tiny-llama", llama, "tinyllama"});
  ModelConfig mistral = tiny("tiny-mistral", Arch::kMistral, 32768, 1, {2});
  mistral.rope_theta = 1000000.0;
  p.push_back({"tiny-mistral", mistral, "mistral-7b-instruct-v0.3"});
  ModelConfig qwen2 = tiny("tiny-qwen2", Arch::kQwen2, 151936, 151643, {151645});
  qwen2.rope_theta = 1000000.0;
  qwen2.rms_norm_eps = 1e-6;
  qwen2.attention_bias = true;
  qwen2.tie_word_embeddings = true;
  p.push_back({"tiny-qwen2", qwen2, "qwen2.5"});
  // Qwen3: q/k norm, head_dim · heads (128) != hidden (64), 4:1 GQA.
  ModelConfig qwen3 = tiny("tiny-qwen3", Arch::kQwen3, 151936, 151643, {151645});
  qwen3.head_dim = 32;
  qwen3.num_kv_heads = 1;
  qwen3.rope_theta = 1000000.0;
  qwen3.rms_norm_eps = 1e-6;
  qwen3.qk_norm = true;
  qwen3.tie_word_embeddings = true;
  p.push_back({"tiny-qwen3", qwen3, "qwen2.5"});
  for (const char* name : {"llama-3.2-1b", "llama-3.1-8b", "qwen2.5-7b", "llama-3.1-70b"}) {
    ModelConfig c = *find_preset(name);
    c.dtype = DType::kBF16;
    p.push_back({name, c, c.arch == Arch::kQwen2 ? "qwen2.5" : "llama3"});
  }
  return p;
}

std::string_view hf_model_type(Arch a) {
  return arch_name(a);
}

std::string_view hf_architecture(Arch a) {
  switch (a) {
    case Arch::kLlama:
      return "LlamaForCausalLM";
    case Arch::kMistral:
      return "MistralForCausalLM";
    case Arch::kQwen2:
      return "Qwen2ForCausalLM";
    case Arch::kQwen3:
      return "Qwen3ForCausalLM";
  }
  return "?";
}

void write_text(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
  if (!out.flush()) fail("{}: cannot write", p.string());
}

bool is_norm(const std::string& name) {
  return name.ends_with("norm.weight");
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001B3ull;
  return h;
}

// (scale, offset) of a tensor's values (see the file comment of test_model.h).
std::pair<float, float> weight_scale(const TensorDecl& d) {
  if (is_norm(d.name)) return {0.1f, 1.0f};
  if (d.name.ends_with(".bias")) return {0.2f, 0.0f};
  // Embedding [V, H] and every linear weight [out, in]: 1/sqrt(last dim).
  return {1.0f / std::sqrt(static_cast<float>(d.shape.back())), 0.0f};
}

}  // namespace

float test_weight_normal(uint64_t seed, uint64_t tensor, uint64_t index) {
  const uint64_t z = cpu::mix64(seed ^ cpu::mix64((tensor << 40) ^ index));
  float s = 0;
  for (int j = 0; j < 4; ++j) s += static_cast<float>((z >> (16 * j)) & 0xffff);
  // Sum of four U(0, 1) has mean 2 and variance 1/3.
  return (s * (1.0f / 65536.0f) - 2.0f) * 1.7320508f;
}

std::vector<std::string> test_model_preset_names() {
  std::vector<std::string> names;
  for (const auto& p : presets()) names.push_back(p.name);
  return names;
}

TestModelPreset test_model_preset(std::string_view name) {
  for (auto& p : presets())
    if (p.name == name) return p;
  std::string names;
  for (const auto& n : test_model_preset_names()) names += (names.empty() ? "" : ", ") + n;
  fail("unknown test-model preset '{}' (known: {})", name, names);
}

std::string model_config_json(const ModelConfig& c) {
  nlohmann::ordered_json j;
  j["architectures"] = {hf_architecture(c.arch)};
  j["model_type"] = hf_model_type(c.arch);
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.num_kv_heads;
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  const RopeScaling& s = c.rope_scaling;
  if (s.type == RopeScaling::Type::kLlama3) {
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", s.factor},
                         {"low_freq_factor", s.low_freq_factor},
                         {"high_freq_factor", s.high_freq_factor},
                         {"original_max_position_embeddings", s.original_max_position_embeddings}};
  } else if (s.type == RopeScaling::Type::kLinear) {
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", s.factor}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  if (c.arch != Arch::kQwen2) j["attention_bias"] = c.attention_bias;
  if (c.arch == Arch::kLlama) j["mlp_bias"] = false;
  if (c.arch == Arch::kQwen2 || c.arch == Arch::kQwen3) j["use_sliding_window"] = false;
  if (c.arch == Arch::kMistral) j["sliding_window"] = nullptr;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["torch_dtype"] = "bfloat16";
  if (c.bos_token_id) j["bos_token_id"] = *c.bos_token_id;
  if (c.eos_token_ids.size() == 1)
    j["eos_token_id"] = c.eos_token_ids[0];
  else if (!c.eos_token_ids.empty())
    j["eos_token_id"] = c.eos_token_ids;
  return j.dump(2) + "\n";
}

void make_test_model(const MakeTestModelOptions& o) {
  const TestModelPreset preset = test_model_preset(o.preset);
  const ModelConfig& c = preset.config;
  CEILING_ENSURE(!o.tokenizer_dir.empty(),
                 "make-test-model: no tokenizer directory given (preset {} uses tokenizer '{}')",
                 o.preset, preset.tokenizer);
  const std::filesystem::path& tok_dir = o.tokenizer_dir;
  std::error_code ec;
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    CEILING_ENSURE(std::filesystem::is_regular_file(tok_dir / f, ec),
                   "make-test-model: {} not found (pass --tokenizer-dir DIR holding tokenizer.json "
                   "and tokenizer_config.json)",
                   (tok_dir / f).string());
  std::filesystem::create_directories(o.out, ec);
  CEILING_ENSURE(!ec, "make-test-model: cannot create {}: {}", o.out.string(), ec.message());

  write_text(o.out / "config.json", model_config_json(c));
  nlohmann::ordered_json gen;
  if (c.bos_token_id) gen["bos_token_id"] = *c.bos_token_id;
  if (c.eos_token_ids.size() == 1)
    gen["eos_token_id"] = c.eos_token_ids[0];
  else
    gen["eos_token_id"] = c.eos_token_ids;
  write_text(o.out / "generation_config.json", gen.dump(2) + "\n");
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
    std::filesystem::copy_file(tok_dir / f, o.out / f,
                               std::filesystem::copy_options::overwrite_existing, ec);
    CEILING_ENSURE(!ec, "make-test-model: cannot copy {}: {}", (tok_dir / f).string(),
                   ec.message());
    // Shared data may be read-only; the copy must stay writable (re-runs overwrite it).
    std::filesystem::permissions(
        o.out / f,
        std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
            std::filesystem::perms::group_read | std::filesystem::perms::others_read,
        ec);
  }

  // Stream the weights: each tensor is filled chunk by chunk on the pool and appended.
  const std::vector<ExpectedTensor> want = expected_tensors(c);
  std::vector<TensorDecl> decls;
  uint64_t total = 0;
  for (const auto& t : want) {
    if (t.optional && c.tie_word_embeddings) continue;
    decls.push_back({t.name, DType::kBF16, t.shape});
    total += tensor_decl_bytes(decls.back());
  }
  const std::map<std::string, std::string> meta = {{"format", "pt"}};
  std::unique_ptr<SafetensorsWriter> single;
  std::unique_ptr<ShardedSafetensorsWriter> sharded;
  for (const char* stale : {"model.safetensors", "model.safetensors.index.json"})
    std::filesystem::remove(o.out / stale, ec);
  if (total > o.max_shard_bytes)
    sharded = std::make_unique<ShardedSafetensorsWriter>(o.out, decls, o.max_shard_bytes, meta);
  else
    single = std::make_unique<SafetensorsWriter>(o.out / "model.safetensors", decls, meta);

  const uint64_t seed = o.seed ^ cpu::mix64(fnv1a(preset.name));
  ThreadPool pool(o.n_threads);
  constexpr int64_t kChunk = int64_t{1} << 22;
  std::vector<uint16_t> buf;
  uint64_t done = 0;
  for (size_t k = 0; k < decls.size(); ++k) {
    const TensorDecl& d = decls[k];
    int64_t n = 1;
    for (int64_t s : d.shape) n *= s;
    // Plain variables, not a structured binding: clang 14 (the fuzz build) cannot capture those.
    const auto scale_offset = weight_scale(d);
    const float scale = scale_offset.first, offset = scale_offset.second;
    for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
      const int64_t len = std::min(kChunk, n - c0);
      buf.resize(static_cast<size_t>(len));
      pool.parallel_for(len, 1 << 16, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i)
          buf[i] = f32_to_bf16(offset + scale * test_weight_normal(seed, k, c0 + i));
      });
      const auto bytes = std::as_bytes(std::span<const uint16_t>(buf.data(), buf.size()));
      if (sharded)
        sharded->write(d.name, bytes);
      else
        single->write(d.name, bytes);
    }
    done += tensor_decl_bytes(d);
    if (o.progress) o.progress(done, total);
  }
  if (sharded)
    sharded->finish();
  else
    single->finish();
}

}  // namespace ceiling::engine
