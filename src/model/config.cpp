#include "model/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/file_read.h"
#include "core/json_bounded.h"
#include "core/status.h"

namespace ceiling {

std::string_view arch_name(Arch a) {
  switch (a) {
    case Arch::kLlama:
      return "llama";
    case Arch::kMistral:
      return "mistral";
    case Arch::kQwen2:
      return "qwen2";
    case Arch::kQwen3:
      return "qwen3";
  }
  return "?";
}

int64_t ModelConfig::num_params() const {
  // In 64 bits throughout: q_dim and kv_dim may each be up to kMaxDim (2^30), 2 · kv_dim not in
  // int.
  const int64_t H = hidden_size, I = intermediate_size, V = vocab_size, Q = q_dim(), KV = kv_dim();
  int64_t per_layer = H * (Q + 2 * KV) + Q * H + 3 * H * I + 2 * H;
  if (attention_bias) per_layer += Q + 2 * KV;
  if (qk_norm) per_layer += 2 * head_dim;
  return V * H + num_layers * per_layer + H + (tie_word_embeddings ? 0 : V * H);
}

namespace {

using nlohmann::json;

int get_positive_int(const json& j, const char* key, const std::string& origin) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) fail("{}: missing field '{}'", origin, key);
  if (!it->is_number_integer())
    fail("{}: field '{}' must be an integer (got {})", origin, key, it->type_name());
  if (it->is_number_unsigned() && it->get<uint64_t>() > (uint64_t{1} << 30))
    fail("{}: field '{}' must be positive and at most 2^30 (got {})", origin, key,
         it->get<uint64_t>());
  const int64_t v = it->get<int64_t>();
  if (v <= 0 || v > (int64_t{1} << 30))
    fail("{}: field '{}' must be positive and at most 2^30 (got {})", origin, key, v);
  return static_cast<int>(v);
}

// The optional string field `key` ("" when absent or null).
std::string get_string(const json& j, const char* key, const std::string& origin) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  if (!it->is_string())
    fail("{}: field '{}' must be a string (got {})", origin, key, it->type_name());
  return it->get<std::string>();
}

// An integer field read as a token id: in [0, 2^31 - 1].
int get_id(const json& v, const char* key, const std::string& origin) {
  if (!v.is_number_integer())
    fail("{}: field '{}' must hold integer token ids (got {})", origin, key, v.type_name());
  const int64_t x = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT32_MAX}
                        ? int64_t{-1}
                        : v.get<int64_t>();
  if (x < 0 || x > INT32_MAX)
    fail("{}: field '{}' holds a token id outside [0, {}]", origin, key, INT32_MAX);
  return static_cast<int>(x);
}

double get_number(const json& j, const char* key, double fallback, const std::string& origin) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number())
    fail("{}: field '{}' must be a number (got {})", origin, key, it->type_name());
  const double d = it->get<double>();
  if (!std::isfinite(d)) fail("{}: field '{}' must be finite", origin, key);
  return d;
}

std::vector<int> get_id_list(const json& v, const char* key, const std::string& origin) {
  std::vector<int> out;
  if (v.is_null()) return out;
  if (v.is_number_integer()) return {get_id(v, key, origin)};
  if (!v.is_array()) fail("{}: field '{}' must be an integer or a list of integers", origin, key);
  for (const auto& e : v) out.push_back(get_id(e, key, origin));
  return out;
}

// a × b, failing with `what` when it overflows 64 bits or passes `limit`.
int64_t checked_mul(int64_t a, int64_t b, int64_t limit, std::string_view what,
                    const std::string& origin) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r) || r > limit)
    fail("{}: {} = {} x {} is over the limit of {} (config sizes out of range)", origin, what, a, b,
         limit);
  return r;
}

int64_t checked_add(int64_t a, int64_t b, int64_t limit, std::string_view what,
                    const std::string& origin) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r) || r > limit)
    fail("{}: {} is over the limit of {} (config sizes out of range)", origin, what, limit);
  return r;
}

}  // namespace

void check_model_sizes(const ModelConfig& c, const std::string& origin) {
  for (const auto& [v, name] : {std::pair{c.vocab_size, "vocab_size"},
                                {c.hidden_size, "hidden_size"},
                                {c.intermediate_size, "intermediate_size"},
                                {c.num_heads, "num_attention_heads"},
                                {c.num_kv_heads, "num_key_value_heads"},
                                {c.head_dim, "head_dim"},
                                {c.max_position_embeddings, "max_position_embeddings"}})
    if (v <= 0 || v > kMaxDim)
      fail("{}: field '{}' must be positive and at most 2^30 (got {})", origin, name, v);
  if (c.num_layers <= 0 || c.num_layers > kMaxLayers)
    fail("{}: field 'num_hidden_layers' must be in [1, {}] (got {})", origin, kMaxLayers,
         c.num_layers);
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size, L = c.num_layers;
  const int64_t Q = checked_mul(c.num_heads, c.head_dim, kMaxDim,
                                "q_dim (num_attention_heads x head_dim)", origin);
  const int64_t KV = checked_mul(c.num_kv_heads, c.head_dim, kMaxDim,
                                 "kv_dim (num_key_value_heads x head_dim)", origin);
  // The fused QKV row (the engine's q / k / v strides and its QKV output) is an int too.
  checked_add(Q, 2 * KV, kMaxDim, "the fused QKV width (q_dim + 2 x kv_dim)", origin);
  const int64_t kT = kMaxTensorElems;
  const int64_t emb =
      checked_mul(V, H, kT, "embedding elements (vocab_size x hidden_size)", origin);
  const int64_t q = checked_mul(Q, H, kT, "q_proj elements (q_dim x hidden_size)", origin);
  const int64_t kv = checked_mul(KV, H, kT, "k_proj elements (kv_dim x hidden_size)", origin);
  const int64_t mlp =
      checked_mul(I, H, kT, "gate_proj elements (intermediate_size x hidden_size)", origin);
  // Per layer: q, o, k, v, gate, up, down, two norms, biases and q/k norms (all small terms).
  int64_t layer = 0;
  for (int64_t part : {q, q, kv, kv, mlp, mlp, mlp, 2 * H + Q + 2 * KV + 2 * int64_t{c.head_dim}})
    layer = checked_add(layer, part, kT * 8, "elements per layer", origin);
  const int64_t bytes_per = std::max<int64_t>(1, (dtype_bits(c.dtype) + 7) / 8);
  const int64_t layers = checked_mul(layer, L, kMaxModelBytes, "elements of all layers", origin);
  int64_t total = checked_add(layers, 2 * emb + H, kMaxModelBytes, "parameter count", origin);
  checked_mul(total, bytes_per, kMaxModelBytes, "weight bytes (parameters x dtype size)", origin);
  checked_mul(checked_mul(2 * L, KV, kMaxKvBytesPerToken, "KV elements per token", origin), 2,
              kMaxKvBytesPerToken, "KV bytes per token (2 x layers x kv_dim x 2)", origin);
}

ModelConfig parse_model_config(std::string_view text, const std::string& origin) {
  const json j = parse_json_or_fail(text, origin);
  if (!j.is_object()) fail("{}: top level must be a JSON object", origin);

  ModelConfig c;
  const std::string model_type = get_string(j, "model_type", origin);
  // `architectures` names the model class (as vLLM and transformers read it): when present, its
  // first entry must be a supported causal-LM class — another head on a known base (e.g.
  // LlamaForSequenceClassification) is a different model. Without it, model_type decides.
  static constexpr std::pair<const char*, Arch> kClasses[] = {
      {"LlamaForCausalLM", Arch::kLlama},
      {"MistralForCausalLM", Arch::kMistral},
      {"Qwen2ForCausalLM", Arch::kQwen2},
      {"Qwen3ForCausalLM", Arch::kQwen3}};
  const std::string supported =
      "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM";
  if (auto it = j.find("architectures"); it != j.end() && !it->is_null()) {
    if (!it->is_array() || it->empty() || !(*it)[0].is_string())
      fail("{}: field 'architectures' must be a non-empty list of class names (supported: {})",
           origin, supported);
    const std::string cls = (*it)[0].get<std::string>();
    bool known = false;
    for (const auto& [name, arch] : kClasses)
      if (cls == name) {
        c.arch = arch;
        known = true;
      }
    if (!known)
      fail("{}: field 'architectures': unsupported architecture {} (supported: {})", origin,
           quote_text(cls, 64), supported);
  } else if (model_type == "llama") {
    c.arch = Arch::kLlama;
  } else if (model_type == "mistral") {
    c.arch = Arch::kMistral;
  } else if (model_type == "qwen2") {
    c.arch = Arch::kQwen2;
  } else if (model_type == "qwen3") {
    c.arch = Arch::kQwen3;
  } else {
    fail(
        "{}: field 'model_type': unsupported architecture {} and no 'architectures' (supported: "
        "llama, mistral, qwen2, qwen3)",
        origin, quote_text(model_type, 64));
  }

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
    std::string type = get_string(*it, "rope_type", origin + ": rope_scaling");
    if (type.empty()) type = get_string(*it, "type", origin + ": rope_scaling");
    if (type == "llama3") {
      c.rope_scaling.type = RopeScaling::Type::kLlama3;
      c.rope_scaling.factor = get_number(*it, "factor", 8.0, origin);
      c.rope_scaling.low_freq_factor = get_number(*it, "low_freq_factor", 1.0, origin);
      c.rope_scaling.high_freq_factor = get_number(*it, "high_freq_factor", 4.0, origin);
      const double orig = get_number(*it, "original_max_position_embeddings", 8192, origin);
      if (!(orig >= 1 && orig <= double(kMaxDim)))
        fail("{}: rope_scaling field 'original_max_position_embeddings' must be in [1, 2^30]",
             origin);
      c.rope_scaling.original_max_position_embeddings = static_cast<int>(orig);
      if (!(c.rope_scaling.factor > 0) ||
          !(c.rope_scaling.high_freq_factor > c.rope_scaling.low_freq_factor))
        fail("{}: rope_scaling (llama3) needs factor > 0 and high_freq_factor > low_freq_factor",
             origin);
    } else if (type == "linear") {
      c.rope_scaling.type = RopeScaling::Type::kLinear;
      c.rope_scaling.factor = get_number(*it, "factor", 1.0, origin);
      if (!(c.rope_scaling.factor > 0)) fail("{}: rope_scaling factor must be positive", origin);
    } else if (type == "default" || type.empty()) {
      c.rope_scaling.type = RopeScaling::Type::kNone;
    } else {
      fail("{}: unsupported rope_scaling type {} (supported: llama3, linear)", origin,
           quote_text(type, 64));
    }
  }
  if (auto it = j.find("torch_dtype"); it != j.end() && it->is_string()) {
    auto d = parse_dtype(it->get<std::string>());
    if (!d) fail("{}: unsupported torch_dtype {}", origin, quote_text(it->get<std::string>(), 64));
    c.dtype = *d;
  }
  if (auto it = j.find("bos_token_id"); it != j.end() && it->is_number_integer())
    c.bos_token_id = get_id(*it, "bos_token_id", origin);
  if (auto it = j.find("eos_token_id"); it != j.end())
    c.eos_token_ids = get_id_list(*it, "eos_token_id", origin);
  check_model_sizes(c, origin);
  return c;
}

ModelConfig load_model_config(const std::filesystem::path& path) {
  std::filesystem::path file = path;
  std::error_code ec;
  std::string text;
  if (std::filesystem::is_directory(path, ec)) {
    file = path / "config.json";
    text = read_model_file(path, "config.json", "config", kMaxConfigJsonBytes);
  } else {
    text = read_regular_file(file, kMaxConfigJsonBytes);
  }
  ModelConfig c = parse_model_config(text, file.string());
  c.name =
      (std::filesystem::is_directory(path, ec) ? path : path.parent_path()).filename().string();
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
