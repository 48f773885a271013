// Cases of the GPU sampling kernels: argmax and the full sampler (vs cpu::sample_token).
#pragma once

#include <memory>

#include "bench/case.h"
#include "kernels/cpu/sampling.h"
#include "kernels/cuda/sampling.h"

namespace ceiling::bench {

std::unique_ptr<KernelCase> make_argmax_case(int S, int V);

// The GPU sampler's parameters for a CPU reference's (the same fields).
cuda::GpuSamplingParams to_gpu_params(const cpu::SamplingParams& p);

// S rows of V logits. `mixed` draws each row's parameters, logit scale, ties (quantized logits)
// and histories at random (the correctness sweep); otherwise every row uses `params` with a
// 32-token prompt and 16 generated tokens. The check fails on a pick that differs from the CPU
// unless the CPU picks the GPU's token with u or top_p moved by 2e-5 + 6e-8·V (a rounding
// boundary: the CPU's sequential fp32 sums carry up to ~V·2^-24 relative error);
// detail reports how many such boundary picks there were.
std::unique_ptr<KernelCase> make_sample_case(int S, int V, const cpu::SamplingParams& params,
                                             bool mixed = false);

}  // namespace ceiling::bench
