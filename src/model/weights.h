// A loaded model: config, generation defaults, and views of every weight in the memory-mapped
// safetensors files (host memory; the CUDA backend uploads from these views). Weight views are
// row-major: a linear layer's weight is [out_features, in_features]. A layer's projections may be
// low precision (QuantLinear): from a quantized checkpoint or quantized on load.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/config.h"

namespace ceiling {

// Owned host buffers for tensors made at load. Not thread-safe while filling; immutable after.
class WeightArena {
 public:
  // A zero-filled contiguous host tensor of `shape`, alive as long as the arena.
  TensorView alloc(DType dtype, std::initializer_list<int64_t> shape);
  // Takes over `other`'s tensors (their views stay valid). Not thread-safe, like alloc: threads
  // fill arenas of their own and the owner adopts them.
  void adopt(WeightArena&& other);
  uint64_t bytes() const { return bytes_; }

 private:
  std::vector<std::unique_ptr<std::byte[]>> buffers_;
  uint64_t bytes_ = 0;
};

// The seven projections of a layer, indexing LayerWeights::quant.
enum Proj : uint8_t { kQProj, kKProj, kVProj, kOProj, kGateProj, kUpProj, kDownProj, kNumProj };
const char* proj_name(Proj p);  // "q_proj", ..., "down_proj"

enum class WeightFormat : uint8_t {
  kDense,  // the layer's TensorView of the projection (f32 / bf16 / f16)
  kFp8,    // E4M3 values, one f32 scale per output row
  kInt4,   // unsigned 4-bit values with a scale and a zero point per group of G inputs
};
const char* weight_format_name(WeightFormat f);  // "dense", "fp8", "int4"
// The `weights` field of the bench JSONs: "bf16" for dense projections (what the GPU engine
// computes them in), else weight_format_name.
const char* bench_weights_name(WeightFormat f);

// A low-precision linear weight W [N, K] (N = out_features, K = in_features) in ceiling's CPU
// layout; every checkpoint layout (compressed-tensors, fbgemm_fp8, AWQ, GPTQ) is converted to it
// at load. The meaning (CpuOps dequantizes a row, then computes in fp32):
//   kFp8:  W[n, k] = e4m3_to_f32(qweight[n, k]) · scale[n]
//   kInt4: W[n, k] = (qweight[n, k] − zero[n, k / G]) · scale[n, k / G]
struct QuantLinear {
  WeightFormat format = WeightFormat::kDense;
  int group_size = 0;     // G, kInt4 only (K % G == 0)
  TensorView qweight;     // fp8: [N, K] f8e4m3; int4: [N, K] u8, one value in [0, 15] per byte
  TensorView scale;       // fp8: [N] f32 (a per-tensor scale repeated); int4: [N, K/G] f32
  TensorView zero;        // int4: [N, K/G] u8 in [0, 15]; fp8: empty
  float input_scale = 0;  // fp8 checkpoints' static activation scale: kept, not applied (0: none)
  bool quantized() const { return format != WeightFormat::kDense; }
};

// fp8 projections compute W8A8 on a call of at least kFp8ActRowsMin input rows (prefill chunks,
// decode batches past the GEMV's 16 rows): each row of x is quantized to E4M3 with a scale of its
// own (quantize_act_row_fp8, model/quantize.h: dynamic per token, vLLM's FP8_DYNAMIC) and the
// product runs on FP8 tensor cores (cuBLASLt), the two scales applied to the fp32 sum. Calls of
// fewer rows keep x as it is (the decode GEMV dequantizes the weights to bf16 in registers).
// CpuOps follows the same rule, so it stays the GPU's reference at every M.
inline constexpr int kFp8ActRowsMin = 17;

struct LayerWeights {
  TensorView input_norm;              // [H]
  TensorView q_proj;                  // [Hq*D, H]
  TensorView k_proj;                  // [Hkv*D, H]
  TensorView v_proj;                  // [Hkv*D, H]
  TensorView q_bias, k_bias, v_bias;  // [Hq*D], [Hkv*D], [Hkv*D]; data == nullptr when absent
  TensorView q_norm, k_norm;          // [D] (Qwen3 per-head RMSNorm); data == nullptr when absent
  TensorView o_proj;                  // [H, Hq*D]
  TensorView post_attn_norm;          // [H]
  TensorView gate_proj;               // [I, H]
  TensorView up_proj;                 // [I, H]
  TensorView down_proj;               // [H, I]
  // The low-precision form of each projection, by Proj. Where quant[p].quantized(), the dense
  // view of that projection above is empty (data == nullptr) and the kernels read quant[p].
  std::array<QuantLinear, kNumProj> quant;
  // Per-tensor scales of an fp8 KV cache (the checkpoint's self_attn.k_scale / v_scale, else 1):
  // a cached value x is stored as e4m3(x · (1 / scale)) and read as e4m3 · scale.
  float k_scale = 1.0f, v_scale = 1.0f;

  // The dense view of projection p.
  const TensorView& dense(Proj p) const;
  TensorView& dense(Proj p);
};

struct ModelWeights {
  TensorView embed;  // [V, H]
  std::vector<LayerWeights> layers;
  TensorView final_norm;  // [H]
  TensorView lm_head;     // [V, H]; the same view as `embed` when tie_word_embeddings
  // Memory of the tensors made at load (quantized or repacked weights); the views point into it.
  std::shared_ptr<const WeightArena> arena;

  // The format of the quantized projections (kDense when none is quantized).
  WeightFormat quant_format() const;
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

// How to load: `quantization` as vLLM's --quantization: "" (the checkpoint's own: dense, or the
// method of its quantization_config), "fp8" / "int4" (quantize a dense checkpoint's projections on
// load; with a quantized checkpoint it must name the checkpoint's format), or the checkpoint
// method names "compressed-tensors", "fbgemm_fp8", "awq", "gptq" (which must match it).
struct LoadOptions {
  std::string quantization;
  int int4_group_size =
      128;  // on-load int4: G, else 64, else K (per row) where G does not divide K
};

// Opens a Hugging Face model directory: config.json, generation_config.json (optional),
// model.safetensors or model.safetensors.index.json + shards. Validates every file and every
// tensor the architecture needs (presence, dtype, shape implied by config.json; for a quantized
// checkpoint, model/quant_load.h). Throws ceiling::Error naming the file, the tensor and the rule
// on any violation.
Model load_model(const std::filesystem::path& dir, const ProgressFn& progress = {},
                 const LoadOptions& options = {});

}  // namespace ceiling
