// Quantized Hugging Face checkpoints: config.json's quantization_config and the tensors each
// method stores per linear layer `<p>` (e.g. "model.layers.0.self_attn.q_proj"), for W [N, K]:
//
//   compressed-tensors (format float-quantized / naive-quantized, 8-bit float weights) and
//   fbgemm_fp8:  <p>.weight F8_E4M3 [N, K]; <p>.weight_scale [N, 1] (channel) or [1] / [] (tensor);
//                optional <p>.input_scale [1] (compressed-tensors) / <p>.input_scale_ub (fbgemm).
//   awq (version gemm, zero_point): <p>.qweight I32 [K, N/8] — word j of row k holds outputs
//                8j..8j+7, output 8j + kAwqOrder[i] in bits 4i..4i+3; <p>.qzeros I32 [K/G, N/8],
//                packed the same way; <p>.scales F16/BF16 [K/G, N].
//   gptq (desc_act false): <p>.qweight I32 [K/8, N] — word (k/8, n) holds input k in bits
//                4(k%8)..; <p>.qzeros I32 [K/G, N/8] — output n in bits 4(n%8).., stored as
//                zero − 1 (checkpoint_format "gptq"; "gptq_v2" stores the zero itself);
//                <p>.scales [K/G, N]; optional <p>.g_idx I32 [K] = k / G.
//   Optional per layer (any method): self_attn.k_scale / self_attn.v_scale, one element each,
//   the fp8 KV cache scales.
// A projection stored as a plain `<p>.weight` in f32/bf16/f16 (e.g. a module the method leaves
// unconverted) stays dense. Every violation is one ceiling::Error naming the file or tensor and
// the rule.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "model/weights.h"

namespace ceiling {

// AWQ's packing: nibble i of a word holds output 8j + kAwqOrder[i]; so output 8j + c is in nibble
// kAwqNibbleOf[c] (AutoAWQ's AWQ_ORDER and AWQ_REVERSE_ORDER).
inline constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
inline constexpr int kAwqNibbleOf[8] = {0, 4, 1, 5, 2, 6, 3, 7};

enum class QuantMethod : uint8_t { kNone, kCompressedTensors, kFbgemmFp8, kAwq, kGptq };
const char* quant_method_name(QuantMethod m);  // "none", "compressed-tensors", "fbgemm_fp8", ...

struct CheckpointQuant {
  QuantMethod method = QuantMethod::kNone;
  int group_size = 0;            // awq, gptq
  bool gptq_zero_offset = true;  // gptq: qzeros hold zero − 1 (checkpoint_format "gptq")
  // The format the method's projections load into.
  WeightFormat format() const;
};

// config.json text -> its quantization_config (absent or null: kNone). Throws naming `origin`,
// the field and the rule (unsupported method, bits, group size, desc_act, packing version).
CheckpointQuant parse_quantization_config(std::string_view config_json, const std::string& origin);

class SafetensorsSet;

// Projection `prefix` of W [N, K] from a checkpoint quantized with `qc`: the QuantLinear (memory
// from `arena`), or format kDense when the checkpoint stores it unquantized. The names of the
// tensors it read go to `used`.
QuantLinear bind_quant_linear(const SafetensorsSet& files, const std::string& prefix, int64_t N,
                              int64_t K, const CheckpointQuant& qc, WeightArena& arena,
                              std::vector<std::string>& used);

// A one-element tensor `name` (f32/bf16/f16) as a positive finite float, or `fallback` when the
// files do not have it; the name goes to `used` when present.
float bind_scalar_scale(const SafetensorsSet& files, const std::string& name, float fallback,
                        std::vector<std::string>& used);

}  // namespace ceiling
