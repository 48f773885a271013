// SiLU-and-multiply of the gated MLP (meaning: cpu::silu_mul), bf16 in and out, fp32 arithmetic.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/status.h"

namespace ceiling::cuda {

// gate_up [T, 2I] holds gate in columns [0, I) and up in [I, 2I) (the fused gate/up projection's
// output); out [T, I] = bf16(silu(gate) · up). Any I ≥ 1 (16-byte path when I % 8 == 0).
Status silu_mul(const __nv_bfloat16* gate_up, int T, int I, __nv_bfloat16* out,
                cudaStream_t stream);

// silu_mul, and out's rows to E4M3 for the W8A8 GEMM in the same kernel: q [T, I] e4m3 and scale
// [T] f32 are byte for byte what quantize_rows_fp8(out) (quantize_act.h) writes. I a multiple of
// 8; gate_up, out, q 16-byte aligned.
Status silu_mul_fp8(const __nv_bfloat16* gate_up, int T, int I, __nv_bfloat16* out, uint8_t* q,
                    float* scale, cudaStream_t stream);

}  // namespace ceiling::cuda
