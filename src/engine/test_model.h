// Deterministic random-weight models in Hugging Face layout (`ceiling make-test-model`): tiny
// ones for CI and parity tests against transformers, and real shapes for GPU benchmarks.
//
// Weights: element i of tensor number k (declaration order, as expected_tensors()) is
//   offset + scale · test_weight_normal(seed ^ mix64(fnv1a(preset name)), k, i)
// stored as bf16, with scale 1/sqrt(in_features) for projections and lm_head (unit-variance
// activations, so attention is far from uniform and RoPE matters), 1/sqrt(H) for the embedding,
// 0.2 for biases, and offset 1, scale 0.1 for norm weights. The value depends only on (seed,
// preset, k, i): the fill runs on any number of threads and the same seed gives the same files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "model/config.h"

namespace ceiling::engine {

struct TestModelPreset {
  std::string name;
  ModelConfig config;
  std::string tokenizer;  // directory name under <shared data>/tokenizers
};

// tiny-llama, tiny-mistral, tiny-qwen2, tiny-qwen3 (a few MB), and the real shapes
// llama-3.2-1b, llama-3.1-8b, qwen2.5-7b (from model/presets.cpp).
std::vector<std::string> test_model_preset_names();
// Throws ceiling::Error naming the known presets for an unknown name.
TestModelPreset test_model_preset(std::string_view name);


struct MakeTestModelOptions {
  std::string preset;
  std::filesystem::path out;
  uint64_t seed = 0;
  // Directory holding tokenizer.json + tokenizer_config.json (required; the CLI finds the
  // preset's tokenizer in the repository's data/tokenizers/<preset.tokenizer>).
  std::filesystem::path tokenizer_dir;
  int n_threads = 0;                      // <= 0: all hardware threads
  uint64_t max_shard_bytes = 5ull << 30;  // models larger than this are sharded
  // Called after each tensor with (bytes written, bytes total).
  std::function<void(uint64_t, uint64_t)> progress;
};

// Writes config.json, generation_config.json, model.safetensors (or shards + index),
// tokenizer.json and tokenizer_config.json into options.out (created if needed). Throws
// ceiling::Error when the tokenizer files are missing or the directory cannot be written.
void make_test_model(const MakeTestModelOptions& options);

// HF config.json text for `c` (model_type, architectures, shapes, rope, bias, tie, dtype bf16).
std::string model_config_json(const ModelConfig& c);

// The deterministic standard-normal-ish value (mean 0, variance 1; Irwin–Hall of four 16-bit
// uniforms) behind every weight.
float test_weight_normal(uint64_t seed, uint64_t tensor, uint64_t index);

}  // namespace ceiling::engine
