// Benchmark / test case of the fused GEMV (kernels/cuda/gemv.h gemv_fused): the decode-time
// RMSNorm prologue and the residual-add / SiLU-pair epilogues, checked against the unfused ops' CPU
// reference. register_gemv_fused_cases() adds Llama-3.1-8B's and Llama-3.2-1B's decode shapes.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "bench/case.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/gemv_quant.h"

namespace ceiling::bench {

std::unique_ptr<KernelCase> make_gemv_fused_case(cuda::GemvInput input, bool accumulate,
                                                 bool silu_pairs, int M, int N, int K,
                                                 bool bias = false,
                                                 std::optional<cuda::GemvConfig> cfg = {});

// The QKV projection with RMSNorm prologue (or, input kPlain, of x as it is: the engine above
// M = 1, after its rms_norm) and the RoPE + paged KV write epilogue (GemvRope): M decode tokens,
// hidden H, Hq / Hkv heads of D.
std::unique_ptr<KernelCase> make_gemv_rope_case(int M, int H, int Hq, int Hkv, int D,
                                                std::optional<cuda::GemvConfig> cfg = {},
                                                cuda::GemvInput input = cuda::GemvInput::kRmsNorm);

// The same cases with fp8 or int4 weights (kernels/cuda/gemv_quant.h gemv_fused_quant), random
// codes of the format (bench/quant_weights.h), checked against the dequantized CPU reference.
// group: int4's G (0 for fp8).
std::unique_ptr<KernelCase> make_gemv_quant_case(cuda::GemvWeightFormat fmt, int group,
                                                 cuda::GemvInput input, bool accumulate,
                                                 bool silu_pairs, int M, int N, int K,
                                                 bool bias = false,
                                                 std::optional<cuda::GemvConfig> cfg = {});
std::unique_ptr<KernelCase> make_gemv_quant_rope_case(
    cuda::GemvWeightFormat fmt, int group, int M, int H, int Hq, int Hkv, int D,
    std::optional<cuda::GemvConfig> cfg = {}, cuda::GemvInput input = cuda::GemvInput::kRmsNorm);

// The M = 1 RMS-norm-input configurations gemv_fused_with_config builds (bf16 weights):
// t128r2u2, t128r4u2, t64r2u2, t64r4u2 and eight rows a CTA (t128r8u1, t64r8u1, t32r8u1).
std::vector<cuda::GemvConfig> fused_norm_configs();

// The tensor-core kernel's configurations for quantized weights that gemv_fused_quant_with_config
// builds at any M: t256r16u1 (dispatched) and two 16-row tiles a warp.
std::vector<cuda::GemvConfig> quant_mma_configs();

}  // namespace ceiling::bench
