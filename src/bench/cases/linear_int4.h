// Benchmark / test cases of the linear layer with int4 weights (gate/up with SiLU at any M, every
// projection past the GEMV's M > 16): gemm_int4
// (kernels/cuda/gemm_int4.h), as CudaOps runs it, at its default or an explicit configuration,
// and the path it replaced — the weight dequantized to a bf16 image, then cuBLASLt.
#pragma once

#include <memory>

#include "bench/case.h"
#include "kernels/cuda/gemm_int4.h"

namespace ceiling::bench {

enum class Int4Path { kGemm, kConfig, kDequant };

// out [M, N] (+)= x [M, K] · Wᵀ (+ bias), W int4 [N, K] with groups of G (random codes and zero
// points, bench/quant_weights.h), checked in double against the dequantized weights. kConfig runs
// `cfg`; the others ignore it. `silu_pairs` (kGemm / kConfig, W = [gate; up]): out [M, N/2] =
// silu(bf16(gate)) · bf16(up).
std::unique_ptr<KernelCase> make_linear_int4_case(Int4Path path, int M, int N, int K, int G,
                                                  bool bias = false, bool accumulate = false,
                                                  const cuda::GemmInt4Config& cfg = {},
                                                  bool silu_pairs = false);

}  // namespace ceiling::bench
