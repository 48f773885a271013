#include "model/config.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/status.h"

namespace ceiling {

std::string_view arch_name(Arch a) {
  switch (a) {
    case Arch::kLlama: return "llama";
    case Arch::kMistral: return "mistral";
    case Arch::kQwen2: return "qwen2";
    case Arch::kQwen3: return "qwen3";
  }
  return "?";
}

int64_t ModelConfig::num_params() const {
  const int64_t H = hidden_size, I = intermediate_size, V = vocab_size;
  int64_t per_layer = H * (int64_t{q_dim()} + 2 * kv_dim()) + int64_t{q_dim()} * H + 3 * H * I + 2 * H;
  if (attention_bias) per_layer += q_dim() + 2 * kv_dim();
  if (qk_norm) per_layer += 2 * head_dim;
  return V * H + num_layers * per_layer + H + (tie_word_embeddings ? 0 : V * H);
}

namespace {

using nlohmann::json;

int get_positive_int(const json& j, const char* key, const std::string& origin) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) fail("{}: missing field '{}'", origin, key);
  if (!it->is_number_integer()) fail("{}: field '{}' must be an integer", origin, key);
  const int64_t v = it->get<int64_t>();
  if (v <= 0 || v > (int64_t{1} << 30)) fail("{}: field '{}' must be positive (got {})", origin, key, v);
  return static_cast<int>(v);
}

double get_number(const json& j, const char* key, double fallback, const std::string& origin) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number()) fail("{}: field '{}' must be a number", origin, key);
  return it->get<double>();
}

std::vector<int> get_id_list(const json& v, const char* key, const std::string& origin) {
  std::vector<int> out;
  if (v.is_null()) return out;
  if (v.is_number_integer()) return {v.get<int>()};
  if (!v.is_array()) fail("{}: field '{}' must be an integer or a list of integers", origin, key);
  for (const auto& e : v) {
    if (!e.is_number_integer()) fail("{}: field '{}' must hold integers", origin, key);
    out.push_back(e.get<int>());
  }
  return out;
}

}  // namespace

ModelConfig parse_model_config(std::string_view text, const std::string& origin) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail("{}: not valid JSON", origin);
  if (!j.is_object()) fail("{}: top level must be a JSON object", origin);

  ModelConfig c;
  std::string model_type = j.value("model_type", "");
  std::string archs;
  if (auto it = j.find("architectures"); it != j.end() && it->is_array() && !it->empty() &&
                                         (*it)[0].is_string())
    archs = (*it)[0].get<std::string>();
  if (model_type == "llama" || archs == "LlamaForCausalLM") c.arch = Arch::kLlama;
  else if (model_type == "mistral" || archs == "MistralForCausalLM") c.arch = Arch::kMistral;
  else if (model_type == "qwen2" || archs == "Qwen2ForCausalLM") c.arch = Arch::kQwen2;
  else if (model_type == "qwen3" || archs == "Qwen3ForCausalLM") c.arch = Arch::kQwen3;
  else
    fail("{}: unsupported architecture (model_type '{}', architectures '{}'); supported: llama, "
         "mistral, qwen2, qwen3", origin, model_type, archs);

  c.vocab_size = get_positive_int(j, "vocab_size", origin);
  c.hidden_size = get_positive_int(j, "hidden_size", origin);
  c.intermediate_size = get_positive_int(j, "intermediate_size", origin);
  c.num_layers = get_positive_int(j, "num_hidden_layers", origin);
  c.num_heads = get_positive_int(j, "num_attention_heads", origin);
  c.num_kv_heads = j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null()
                       ? get_positive_int(j, "num_key_value_heads", origin)
                       : c.num_heads;
  if (j.contains("head_dim") && !j["head_dim"].is_null()) {
    c.head_dim = get_positive_int(j, "head_dim", origin);
  } else {
    if (c.hidden_size % c.num_heads != 0)
      fail("{}: hidden_size {} is not divisible by num_attention_heads {}", origin, c.hidden_size,
           c.num_heads);
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.num_heads % c.num_kv_heads != 0)
    fail("{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", origin,
         c.num_heads, c.num_kv_heads);
  if (c.head_dim % 2 != 0) fail("{}: head_dim {} must be even for RoPE", origin, c.head_dim);

  c.rms_norm_eps = get_number(j, "rms_norm_eps", 1e-6, origin);
  if (!(c.rms_norm_eps > 0)) fail("{}: rms_norm_eps must be positive", origin);
  c.rope_theta = get_number(j, "rope_theta", 10000.0, origin);
  if (!(c.rope_theta > 0)) fail("{}: rope_theta must be positive", origin);
  c.max_position_embeddings = j.contains("max_position_embeddings")
                                  ? get_positive_int(j, "max_position_embeddings", origin)
                                  : 2048;
  if (auto it = j.find("tie_word_embeddings"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) fail("{}: field 'tie_word_embeddings' must be a boolean", origin);
    c.tie_word_embeddings = it->get<bool>();
  }
  c.attention_bias = c.arch == Arch::kQwen2;
  if (auto it = j.find("attention_bias"); it != j.end() && it->is_boolean())
    c.attention_bias = it->get<bool>();
  c.qk_norm = c.arch == Arch::kQwen3;

  if (auto it = j.find("rope_scaling"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) fail("{}: field 'rope_scaling' must be an object or null", origin);
    std::string type = it->value("rope_type", it->value("type", ""));
    if (type == "llama3") {
      c.rope_scaling.type = RopeScaling::Type::kLlama3;
      c.rope_scaling.factor = get_number(*it, "factor", 8.0, origin);
      c.rope_scaling.low_freq_factor = get_number(*it, "low_freq_factor", 1.0, origin);
      c.rope_scaling.high_freq_factor = get_number(*it, "high_freq_factor", 4.0, origin);
      c.rope_scaling.original_max_position_embeddings = static_cast<int>(
          get_number(*it, "original_max_position_embeddings", 8192, origin));
      if (!(c.rope_scaling.factor > 0) || !(c.rope_scaling.high_freq_factor > c.rope_scaling.low_freq_factor))
        fail("{}: rope_scaling (llama3) needs factor > 0 and high_freq_factor > low_freq_factor", origin);
    } else if (type == "linear") {
      c.rope_scaling.type = RopeScaling::Type::kLinear;
      c.rope_scaling.factor = get_number(*it, "factor", 1.0, origin);
      if (!(c.rope_scaling.factor > 0)) fail("{}: rope_scaling factor must be positive", origin);
    } else if (type == "default" || type.empty()) {
      c.rope_scaling.type = RopeScaling::Type::kNone;
    } else {
      fail("{}: unsupported rope_scaling type '{}' (supported: llama3, linear)", origin, type);
    }
  }
  if (auto it = j.find("torch_dtype"); it != j.end() && it->is_string()) {
    auto d = parse_dtype(it->get<std::string>());
    if (!d) fail("{}: unsupported torch_dtype '{}'", origin, it->get<std::string>());
    c.dtype = *d;
  }
  if (auto it = j.find("bos_token_id"); it != j.end() && it->is_number_integer())
    c.bos_token_id = it->get<int>();
  if (auto it = j.find("eos_token_id"); it != j.end())
    c.eos_token_ids = get_id_list(*it, "eos_token_id", origin);
  return c;
}

ModelConfig load_model_config(const std::filesystem::path& path) {
  std::filesystem::path file = path;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) file = path / "config.json";
  std::ifstream in(file, std::ios::binary);
  if (!in) fail("{}: cannot open config", file.string());
  std::stringstream ss;
  ss << in.rdbuf();
  ModelConfig c = parse_model_config(ss.str(), file.string());
  c.name = (std::filesystem::is_directory(path, ec) ? path : path.parent_path()).filename().string();
  if (c.name.empty()) c.name = file.string();
  return c;
}

ModelConfig resolve_model(const std::string& name_or_path) {
  if (auto p = find_preset(name_or_path)) return *p;
  std::error_code ec;
  if (std::filesystem::exists(name_or_path, ec)) return load_model_config(name_or_path);
  std::string names;
  for (const auto& n : preset_names()) names += (names.empty() ? "" : ", ") + n;
  fail("unknown model '{}': not a preset ({}) and no such file or directory", name_or_path, names);
}

}  // namespace ceiling
