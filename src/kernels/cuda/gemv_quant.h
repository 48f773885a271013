// Decode-shaped linear layer with low-precision weights: the GEMV kernels of gemv.h (every fusion
// of gemv_fused: RMS-norm input, residual add, SiLU pairs, RoPE + KV write) reading fp8 or int4
// weights and dequantizing them in registers — to fp32 in the register kernel (M = 1), to bf16
// pairs for mma.sync in the tensor-core kernel (2 ≤ M ≤ 16; int4 there needs G ≥ 128, smaller
// groups take the register kernel); bf16 activations, fp32 accumulation.
// Prefill-sized M: dequantize_weights into a bf16 buffer, then the bf16 GEMM (linear.h).
//
// The meaning is model/weights.h QuantLinear's (CpuOps dequantizes the same way):
//   fp8:  W[n, k] = e4m3(data[n, k]) · row_scale[n]
//   int4: W[n, k] = (q[n, k] − zero[n, k/G]) · scale[n, k/G]
// Device layouts (made on the host at upload, pack_gemv_int4 / pack_gemv_int4_group):
//   fp8:  data [N, K] bytes as they are; row_scale [N] f32.
//   int4: data [N, K/2] bytes: 32 k per 16 bytes; in each 32-bit word (8 consecutive k: k0 + e)
//         element e = 2s sits in nibble s and e = 2s + 1 in nibble 4 + s, so one shift and one
//         mask give a bf16 pair (128 + q) of two elements. groups [N, K/G] u32: the scale with
//         its 8 low mantissa bits dropped (fp16 and bf16 scales exactly) | the zero point.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/status.h"
#include "kernels/cuda/gemv.h"

namespace ceiling::cuda {

enum class GemvWeightFormat : uint8_t { kBF16, kFP8, kInt4 };
const char* gemv_weight_format_name(GemvWeightFormat f);  // "bf16", "fp8", "int4"

struct GemvWeights {
  GemvWeightFormat format = GemvWeightFormat::kBF16;
  const void* data = nullptr;        // see above (bf16: W [N, K])
  const float* row_scale = nullptr;  // fp8 [N]
  const uint32_t* groups = nullptr;  // int4 [N, K/G]
  int group_size = 0;                // int4: G, a power of two ≥ 32 dividing K
};

// Weights per 16-byte load: 8 (bf16), 16 (fp8), 32 (int4). K must be a multiple of it.
int gemv_weight_elems_per_load(GemvWeightFormat f);
// Bytes of the device image of W [N, K] in `f` (data + scales / groups).
int64_t gemv_weight_bytes(GemvWeightFormat f, int64_t N, int64_t K, int group_size);

// Why `w` cannot run the quantized GEMV at (N, K), or "" (K a multiple of the load's elements,
// the group size a power of two ≥ 32 dividing K, the pointers set and 16-byte aligned).
std::string gemv_quant_unsupported(const GemvWeights& w, int N, int K);

// gemv_fused's contract (gemv.h) with low-precision weights `w` (fp8 or int4), 1 ≤ M ≤ 16. x and
// out as there; bias optional (bf16 [N]).
Status gemv_fused_quant(const GemvFusion& f, const __nv_bfloat16* x, const GemvWeights& w,
                        const __nv_bfloat16* bias, __nv_bfloat16* out, int M, int N, int K,
                        cudaStream_t stream);

// Benchmark only: an explicit configuration (GemvConfig). The register kernel at M = 1 (threads,
// rows per CTA, loads in flight per row): t128r2u2, t64r4u2, t64r4u1, t64r2u2, and for fp8
// t64r8u1 and t32r8u1. The tensor-core kernel at any M (fp8, and int4 with G ≥ 128; threads =
// 32 · k slices, rows = 16 · tiles a warp): t256r16u1, t256r32u1w2, t128r32u1w2 (4 tiles a warp
// spill).
Status gemv_fused_quant_with_config(const GemvConfig& cfg, const GemvFusion& f,
                                    const __nv_bfloat16* x, const GemvWeights& w,
                                    const __nv_bfloat16* bias, __nv_bfloat16* out, int M, int N,
                                    int K, cudaStream_t stream);

// out [N, K] bf16 = W dequantized (each value rounded to bf16 once), for the GEMM path.
Status dequantize_weights(const GemvWeights& w, int N, int K, __nv_bfloat16* out,
                          cudaStream_t stream);

// Host: q [N, K] (one value in [0, 15] per byte, QuantLinear's int4 layout) into the device
// order above, out [N, K/2]. K % 32 == 0.
void pack_gemv_int4(const uint8_t* q, int64_t N, int64_t K, uint8_t* out);
// Host: one group's word (scale rounded to 15 mantissa bits, zero in [0, 15]).
uint32_t pack_gemv_int4_group(float scale, uint8_t zero);

}  // namespace ceiling::cuda
