// Cases of the streaming kernels: embedding gather, RMSNorm (+ residual, and per-head q/k norm),
// SiLU-and-multiply. Factories for tests/gpu (awkward sizes) and the benchmark list.
#pragma once

#include <memory>

#include "bench/case.h"

namespace ceiling::bench {

// T tokens gathered from a [V, H] table (ids uniform in [0, V)).
std::unique_ptr<KernelCase> make_embedding_case(int T, int H, int V);
// rows × H, with the residual add when `residual`.
std::unique_ptr<KernelCase> make_rms_norm_case(int rows, int H, bool residual);
// In-place per-head norm of T tokens × heads rows of D at token_stride elements apart.
std::unique_ptr<KernelCase> make_rms_norm_heads_case(int T, int heads, int D, int token_stride);
std::unique_ptr<KernelCase> make_silu_mul_case(int T, int I);

}  // namespace ceiling::bench
