// The pieces of load_model (model/weights.h) that other code reuses: the Hugging Face tensor
// names and shapes an architecture needs, binding them from opened files, and
// generation_config.json. `ceiling make-test-model` writes exactly expected_tensors(config).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "model/config.h"
#include "model/quant_load.h"
#include "model/weights.h"

namespace ceiling {

// One weight the architecture reads, with the shape config.json implies.
struct ExpectedTensor {
  std::string name;            // e.g. "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  // outermost first, e.g. [Hq*D, H]
  bool optional = false;       // lm_head.weight when tie_word_embeddings
};

// In file order: embedding, then per layer (input norm, q/k/v [+bias] [+q/k norm], o, post-attn
// norm, gate/up/down), final norm, lm_head.
std::vector<ExpectedTensor> expected_tensors(const ModelConfig& config);

// Validates presence, dtype (F32/F16/BF16) and shape of every expected tensor in `files` and
// returns views of them; names of the remaining tensors go to `unexpected` (a bias on a
// projection ceiling loads without one is an error, not an unexpected tensor). `progress`
// receives `base` with tensors_checked counting up. With a `quant` method, projections stored
// in its layout are bound (converted) into LayerWeights::quant (model/quant_load.h); the
// self_attn.k_scale / v_scale of each layer are read when present.
ModelWeights bind_weights(const ModelConfig& config, const SafetensorsSet& files,
                          std::vector<std::string>* unexpected = nullptr,
                          const ProgressFn& progress = {}, LoadProgress base = {},
                          const CheckpointQuant& quant = {});

// generation_config.json. Absent fields (or null) stay unset; wrong types and out-of-range values
// (temperature < 0, top_p or min_p outside [0, 1], top_k < 0, repetition_penalty ≤ 0,
// max_new_tokens ≤ 0, negative token ids) throw naming the file and the field.
GenerationDefaults parse_generation_config(std::string_view json_text, const std::string& origin);
// dir/generation_config.json when it exists, else all fields unset.
GenerationDefaults load_generation_config(const std::filesystem::path& dir);

}  // namespace ceiling
