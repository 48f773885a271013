// Test helpers: small random models held in memory, and a naive forward that recomputes one
// token at a time with a contiguous (unpaged) KV history — an independent oracle for Forward.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/config.h"
#include "model/weights.h"

namespace ceiling::engine::testing {

// A config with GQA; tweak fields before make_random_model.
ModelConfig small_config(Arch arch = Arch::kLlama);

struct RandomModel {
  ModelConfig config;
  ModelWeights weights;
  std::vector<std::vector<uint16_t>> bf16;  // owned storage
  std::vector<std::vector<float>> f32;
};

// Fresh random weights (normal · 0.1, norms ≈ 1) in `dtype` (f32 or bf16).
std::unique_ptr<RandomModel> make_random_model(const ModelConfig& c, DType dtype, uint64_t seed);

// Logits [V] of every position of `ids` (row t = logits after token t), computed token by token
// with plain loops and a contiguous KV history.
std::vector<std::vector<float>> naive_logits(const RandomModel& m, const std::vector<int32_t>& ids);

}  // namespace ceiling::engine::testing
