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
// The GEMV with an explicit kernel configuration: M = 1 the register kernel
// (cuda::gemv_with_config), M > 1 the tensor-core kernel (cuda::gemv_mma_with_config, bf16 out).
std::unique_ptr<KernelCase> make_gemv_config_case(const cuda::GemvConfig& cfg, int N, int K,
                                                  bool bias = false, DType out_dtype = DType::kBF16,
                                                  int M = 1);

}  // namespace ceiling::bench
