// Benchmark / test case of the fused GEMV (kernels/cuda/gemv.h gemv_fused): the decode-time
// RMSNorm prologue and the residual-add / SiLU-pair epilogues, checked against the unfused ops' CPU
// reference. register_gemv_fused_cases() adds Llama-3.1-8B's and Llama-3.2-1B's decode shapes.
#pragma once

#include <memory>
#include <optional>

#include "bench/case.h"
#include "kernels/cuda/gemv.h"

namespace ceiling::bench {

std::unique_ptr<KernelCase> make_gemv_fused_case(cuda::GemvInput input, bool accumulate,
                                                 bool silu_pairs, int M, int N, int K,
                                                 bool bias = false,
                                                 std::optional<cuda::GemvConfig> cfg = {});

// The QKV projection with RMSNorm prologue and the RoPE + paged KV write epilogue (GemvRope):
// M decode tokens, hidden H, Hq / Hkv heads of D.
std::unique_ptr<KernelCase> make_gemv_rope_case(int M, int H, int Hq, int Hkv, int D,
                                                std::optional<cuda::GemvConfig> cfg = {});

}  // namespace ceiling::bench
