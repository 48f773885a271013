// Dynamic per-token FP8 (E4M3) quantization of activations: the input side of the W8A8 GEMM
// (gemm_lt.h run_fp8) that fp8 projections take for calls of kFp8ActRowsMin rows or more
// (model/weights.h). The meaning is model/quantize.h quantize_act_row_fp8's, byte for byte:
//   scale[t] = max_k |x[t, k]| / 448 (1 for an all-zero row),
//   q[t, k]  = e4m3(x[t, k] · (1 / scale[t])), saturating, nearest even.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/status.h"

namespace ceiling::cuda {

// x [T, K] bf16 → q [T, K] e4m3 bytes, scale [T] f32. K % 8 == 0, x and q 16-byte aligned.
Status quantize_rows_fp8(const __nv_bfloat16* x, int T, int K, uint8_t* q, float* scale,
                         cudaStream_t stream);

// The way back, for a GPU or cuBLASLt without the FP8 GEMM: out [T, K] bf16 = bf16(e4m3(q) ·
// scale[t]) (one bf16 rounding of the W8A8 input, inside the bf16 noise the tests allow), so the
// bf16 GEMM that follows computes W8A8's product. Same alignment rules.
Status dequantize_rows_fp8(const uint8_t* q, const float* scale, int T, int K, __nv_bfloat16* out,
                           cudaStream_t stream);

}  // namespace ceiling::cuda
