// A decoder-only transformer's hyper-parameters, read from a Hugging Face config.json or taken
// from a named preset. Shared by the roofline predictor, the loaders and the forward.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace ceiling {

enum class Arch { kLlama, kMistral, kQwen2, kQwen3 };
std::string_view arch_name(Arch a);

struct RopeScaling {
  enum class Type { kNone, kLlama3, kLinear };
  Type type = Type::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;                 // llama3
  double high_freq_factor = 4.0;                // llama3
  int original_max_position_embeddings = 8192;  // llama3
};

struct ModelConfig {
  std::string name;  // preset name or the model directory's name
  Arch arch = Arch::kLlama;
  int vocab_size = 0;
  int hidden_size = 0;        // H
  int intermediate_size = 0;  // I (gated MLP width)
  int num_layers = 0;         // L
  int num_heads = 0;          // Hq
  int num_kv_heads = 0;       // Hkv (GQA when < Hq)
  int head_dim = 0;           // D (hidden_size / num_heads unless config says otherwise)
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  int max_position_embeddings = 2048;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // bias on q/k/v projections (Qwen2)
  bool qk_norm = false;         // RMSNorm on q and k per head (Qwen3)
  DType dtype = DType::kBF16;   // torch_dtype
  std::optional<int> bos_token_id;
  std::vector<int> eos_token_ids;

  // Fit in int: check_model_sizes bounds them (every config from a file passes it).
  int q_dim() const { return num_heads * head_dim; }
  int kv_dim() const { return num_kv_heads * head_dim; }
  // Parameter count (embedding, layers, final norm, lm_head unless tied).
  int64_t num_params() const;
};

// Bounds on config.json and what it implies. Each field is in [1, 2^30]; every derived size is
// computed in 64 bits with overflow checks and must stay under these (a model past them could
// not be held in any machine's memory).
inline constexpr uint64_t kMaxConfigJsonBytes = 16u << 20;    // config.json file size
inline constexpr int kMaxLayers = 4096;                       // num_hidden_layers
inline constexpr int64_t kMaxDim = int64_t{1} << 30;          // q_dim, kv_dim, q_dim + 2 · kv_dim
inline constexpr int64_t kMaxTensorElems = int64_t{1} << 40;  // any one weight
inline constexpr int64_t kMaxModelBytes = int64_t{1} << 45;   // all weights (32 TiB)
inline constexpr int64_t kMaxKvBytesPerToken = int64_t{1} << 32;  // K and V of all layers

// Checks the 64-bit derived sizes against the bounds above; throws naming `origin`, the fields
// and the rule. parse_model_config calls it; call it for a hand-built config from outside.
void check_model_sizes(const ModelConfig& c, const std::string& origin);

// Parses config.json (a file, or a directory holding one). Throws ceiling::Error naming the file
// and the missing/invalid field, or the unsupported architecture / rope_scaling type. In a
// directory, config.json must resolve inside it (core/file_read.h).
ModelConfig load_model_config(const std::filesystem::path& path);
ModelConfig parse_model_config(std::string_view json_text, const std::string& origin);

// Named presets with the real shapes of public models (sources in presets.cpp).
std::optional<ModelConfig> find_preset(std::string_view name);
std::vector<std::string> preset_names();

// A preset name or a path to config.json / a model directory.
ModelConfig resolve_model(const std::string& name_or_path);

}  // namespace ceiling
