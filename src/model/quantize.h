// Low-precision weights and KV values on the host: quantizing a dense linear weight into a
// QuantLinear (model/weights.h) on load, dequantizing one of its rows (the CPU reference's
// kernels), and the E4M3 rounding of a KV-cache value. Formats and their error bounds:
//   fp8  (E4M3, per output row): scale[n] = max|W[n, :]| / 448; q = e4m3(W / scale), rounded to
//        nearest even. |W − Ŵ| ≤ max(2⁻⁴·|W|, 2⁻¹⁰·scale[n]) (half an ulp of 3 mantissa bits;
//        half the subnormal step).
//   int4 (round-to-nearest, asymmetric, per group of G inputs): with lo = min(min W, 0) and
//        hi = max(max W, 0) (the range holds 0, as GPTQ's quantizer), scale = bf16((hi − lo) / 15),
//        zero = round(−lo / scale), q = clamp(round(W / scale) + zero, 0, 15).
//        |W − Ŵ| ≤ scale · (1/2 + 15·2⁻⁸) (half a step; the bf16 rounding of the scale can push
//        the group's range past 15 steps by at most 15·2⁻⁸ of a step).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "model/weights.h"

namespace ceiling {

inline constexpr float kE4m3Max = 448.0f;

// W [N, K] (f32/bf16/f16 host view) as fp8 with one scale per row. Memory from `arena`.
QuantLinear quantize_fp8(const TensorView& w, WeightArena& arena);
// W [N, K] as int4 with groups of `group_size` inputs (K % group_size == 0, else throws).
QuantLinear quantize_int4(const TensorView& w, int group_size, WeightArena& arena);

// The on-load int4 group for K inputs: `preferred` when it divides K, else 64, else K.
int int4_group_for(int64_t K, int preferred);

// Quantizes every dense projection of `w` to `format` (kFp8 or kInt4) in place: the dense views
// become empty and LayerWeights::quant holds the result. Memory from `arena`.
void quantize_projections(ModelWeights& w, WeightFormat format, int int4_group_size,
                          WeightArena& arena);

// One activation row x[K] as E4M3 with a per-row scale (W8A8, model/weights.h kFp8ActRowsMin):
// scale = max|x| / 448 (1 for an all-zero row), q[k] = e4m3(x[k] · (1 / scale)), saturating,
// nearest even — the fp32 quotient and reciprocal the GPU's quantize_rows_fp8 takes, so both
// give the same bytes for the same x.
void quantize_act_row_fp8(const float* x, int64_t K, uint8_t* q, float* scale);

// Row n of W [N, K] dequantized into dst[K] as f32 (the meaning in model/weights.h).
void dequantize_row(const QuantLinear& q, int64_t n, int64_t K, float* dst);

// x rounded through an fp8 (E4M3) KV cache with per-tensor `scale`: e4m3(x · (1 / scale)) ·
// scale, the fp32 reciprocal as the GPU's writers take it (kernels/cuda/kv_format.h).
inline float e4m3_round(float x, float scale) {
  const float inv = 1.0f / scale;
  return e4m3_to_f32(f32_to_e4m3(x * inv)) * scale;
}

}  // namespace ceiling
