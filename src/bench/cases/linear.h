// Cases of the linear layer: ceiling's GEMV, its sm_90a skinny GEMM, cuBLASLt, and the dispatcher
// between them.
#pragma once

#include <memory>
#include <vector>

#include "bench/case.h"
#include "core/dtype.h"
#include "kernels/cuda/gemm_skinny.h"
#include "kernels/cuda/gemv.h"

namespace ceiling::bench {

enum class LinearImpl { kGemv, kSkinny, kCublasLt, kDispatch };

// out [M, N] = x [M, K] · W[N, K]^T (+ bias). The check compares up to 3 rows of out (first,
// middle, last) with cpu::linear, all N columns.
std::unique_ptr<KernelCase> make_linear_case(LinearImpl impl, int M, int N, int K, bool bias,
                                             DType out_dtype = DType::kBF16);
// The GEMV with an explicit kernel configuration: M = 1 the register kernel
// (cuda::gemv_with_config), M > 1 the tensor-core kernel (cuda::gemv_mma_with_config, bf16 out).
std::unique_ptr<KernelCase> make_gemv_config_case(const cuda::GemvConfig& cfg, int N, int K,
                                                  bool bias = false, DType out_dtype = DType::kBF16,
                                                  int M = 1);
// Every built configuration of the register GEMV (cuda::gemv_with_config, M = 1) and of the
// tensor-core GEMV (cuda::gemv_mma_with_config): the benchmark's sweeps and the tests' lists.
std::vector<cuda::GemvConfig> gemv_register_configs();
std::vector<cuda::GemvConfig> gemv_mma_configs();
// The skinny GEMM (gemm_skinny.h; bf16 out; a comparison, never the dispatcher's choice) with a
// configuration ({} = its default for the shape);
// accumulate: out = out + x · W^T, out filled with random values before the run. The check
// compares rows 0, 9, 17, 30, M / 2 and M − 1 (those below M): both accumulator rows of every
// warp of a 64-row tile.
std::unique_ptr<KernelCase> make_skinny_case(int M, int N, int K, bool bias = false,
                                             bool accumulate = false,
                                             const cuda::SkinnyConfig& cfg = {});

}  // namespace ceiling::bench
