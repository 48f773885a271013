// RMSNorm fused with the residual add (meaning: cpu::rms_norm), bf16 activations and weights,
// fp32 arithmetic.
//
// Residual stream precision: the residual is kept in bf16, as Hugging Face does when a model runs
// in bf16. With a residual, r = bf16(x + residual) is stored back to `residual` and the norm is
// taken of that rounded r (so the next layer adds to exactly what was normalized). Then
// out = bf16(r · rsqrt(mean(r²) + eps) · w), all in fp32 before the final rounding.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/status.h"

namespace ceiling::cuda {

// x, out [rows, H] contiguous; residual [rows, H] or null; w [H]. out may alias x.
// Any H ≥ 1 (16-byte path when H % 8 == 0 and pointers are 16-byte aligned).
Status rms_norm(const __nv_bfloat16* x, __nv_bfloat16* residual, const __nv_bfloat16* w, int rows,
                int H, float eps, __nv_bfloat16* out, cudaStream_t stream);

// rms_norm without a residual, and out's rows to E4M3 for the W8A8 GEMM in the same kernel:
// q [rows, H] e4m3 and scale [rows] f32 are byte for byte what quantize_rows_fp8(out)
// (quantize_act.h) writes. H a multiple of 8 up to 16384; x, w, out, q 16-byte aligned.
Status rms_norm_fp8(const __nv_bfloat16* x, const __nv_bfloat16* w, int rows, int H, float eps,
                    __nv_bfloat16* out, uint8_t* q, float* scale, cudaStream_t stream);

// Per-head RMSNorm in place (Qwen3 q/k norm): x holds T tokens at `token_stride` elements apart,
// each with `heads` consecutive rows of D (e.g. the q or k part of a fused QKV output, with
// token_stride = (Hq + 2·Hkv)·D). Every row of D is normalized with w [D]. No residual.
Status rms_norm_heads(__nv_bfloat16* x, int64_t token_stride, int T, int heads, int D,
                      const __nv_bfloat16* w, float eps, cudaStream_t stream);

}  // namespace ceiling::cuda
