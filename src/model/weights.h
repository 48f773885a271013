// A loaded model: config, generation defaults, and views of every weight in the memory-mapped
// safetensors files (host memory; the CUDA backend uploads from these views). Weight views are
// row-major: a linear layer's weight is [out_features, in_features].
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/config.h"

namespace ceiling {

struct LayerWeights {
  TensorView input_norm;           // [H]
  TensorView q_proj;               // [Hq*D, H]
  TensorView k_proj;               // [Hkv*D, H]
  TensorView v_proj;               // [Hkv*D, H]
  TensorView q_bias, k_bias, v_bias;  // [Hq*D], [Hkv*D], [Hkv*D]; data == nullptr when absent
  TensorView q_norm, k_norm;       // [D] (Qwen3 per-head RMSNorm); data == nullptr when absent
  TensorView o_proj;               // [H, Hq*D]
  TensorView post_attn_norm;       // [H]
  TensorView gate_proj;            // [I, H]
  TensorView up_proj;              // [I, H]
  TensorView down_proj;            // [H, I]
};

struct ModelWeights {
  TensorView embed;       // [V, H]
  std::vector<LayerWeights> layers;
  TensorView final_norm;  // [H]
  TensorView lm_head;     // [V, H]; the same view as `embed` when tie_word_embeddings
};

// generation_config.json (all optional; absent fields stay unset).
struct GenerationDefaults {
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int> top_k, max_new_tokens;
  std::optional<bool> do_sample;
  std::optional<int> bos_token_id;
  std::vector<int> eos_token_ids;
};

struct LoadProgress {
  uint64_t bytes_mapped = 0, bytes_total = 0;
  int tensors_checked = 0, tensors_total = 0;
};
using ProgressFn = std::function<void(const LoadProgress&)>;

class SafetensorsSet;  // the open, validated, memory-mapped files (model/safetensors.h)

struct Model {
  std::filesystem::path dir;
  ModelConfig config;
  GenerationDefaults generation;
  ModelWeights weights;
  std::shared_ptr<const SafetensorsSet> files;  // keeps the mappings alive for the views
  // Tensors in the files that the architecture does not use (ignored, reported by `inspect`).
  std::vector<std::string> unexpected_tensors;
};

// Opens a Hugging Face model directory: config.json, generation_config.json (optional),
// model.safetensors or model.safetensors.index.json + shards. Validates every file and every
// tensor the architecture needs (presence, dtype, shape implied by config.json). Throws
// ceiling::Error naming the file, the tensor and the rule on any violation.
Model load_model(const std::filesystem::path& dir, const ProgressFn& progress = {});

}  // namespace ceiling
