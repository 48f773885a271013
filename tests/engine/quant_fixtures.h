// Quantized checkpoints written in the real layouts (model/quant_load.h) for the loader tests:
// a small random model whose projections are quantized by ceiling's own on-load quantizer
// (model/quantize.h) and then packed the way each producer packs them (compressed-tensors,
// fbgemm_fp8, AutoAWQ's GEMM packing, GPTQ v1), so a loaded checkpoint must equal the same
// dense model quantized on load.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/config.h"

namespace ceiling::engine::testing {

enum class Layout { kDense, kCompressedTensors, kFbgemm, kAwq, kGptq };

struct FixtureTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;
};

struct FixtureOptions {
  Layout layout = Layout::kDense;
  int group_size = 64;             // awq / gptq
  bool per_tensor_fp8 = false;     // compressed-tensors strategy "tensor"
  float k_scale = 0, v_scale = 0;  // > 0: layer 0 gets self_attn.k_scale / v_scale
  // Applied to the tensors, then to quantization_config, before writing (malformed variants).
  std::function<void(std::vector<FixtureTensor>&)> mutate_tensors;
  std::function<void(nlohmann::json&)> mutate_config;
};

// H 64, I 128, 2 layers, 4 heads of 16, 2 KV heads, vocab 96.
ModelConfig fixture_config();

// Writes config.json (+ quantization_config) and model.safetensors into `dir`. The dense weights
// depend only on `seed`, whatever the layout.
void write_fixture(const std::filesystem::path& dir, const FixtureOptions& o, uint64_t seed = 7);

}  // namespace ceiling::engine::testing
