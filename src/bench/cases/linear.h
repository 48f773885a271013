// Cases of the linear layer: ceiling's GEMV, cuBLASLt, and the dispatcher between them.
#pragma once

#include <memory>

#include "bench/case.h"
#include "core/dtype.h"
#include "kernels/cuda/gemv.h"

namespace ceiling::bench {

enum class LinearImpl { kGemv, kCublasLt, kDispatch };

// out [M, N] = x [M, K] · W[N, K]^T (+ bias). The check compares up to 3 rows of out (first,
// middle, last) with cpu::linear, all N columns.
std::unique_ptr<KernelCase> make_linear_case(LinearImpl impl, int M, int N, int K, bool bias,
                                             DType out_dtype = DType::kBF16);
// The M = 1 GEMV with an explicit kernel configuration (cuda::gemv_with_config).
std::unique_ptr<KernelCase> make_gemv_config_case(const cuda::GemvConfig& cfg, int N, int K,
                                                  bool bias = false,
                                                  DType out_dtype = DType::kBF16);

}  // namespace ceiling::bench
