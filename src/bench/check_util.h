// The correctness metric of every kernel check: ‖out − ref‖₂ / ‖ref‖₂ over all elements, in
// double. Any non-finite output (an unwritten, NaN-poisoned element) gives +inf, so it fails every
// tolerance. Also bf16 <-> fp32 conversions of host vectors (the CPU reference runs in fp32 on
// the bf16-rounded inputs).
#pragma once

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ceiling::bench {

double rel_err(std::span<const float> out, std::span<const float> ref);

std::vector<float> to_f32(std::span<const __nv_bfloat16> v);
std::vector<__nv_bfloat16> to_bf16(std::span<const float> v);
// Rounds each value to bf16 and back (what the GPU stores).
std::vector<float> round_bf16(std::span<const float> v);

// "name 1.2e-03" for CheckResult::detail.
std::string err_str(const std::string& name, double err);

// Tolerances, with their reasoning (the bf16 output rounding is ≤ 2^-9 relative per element,
// ~2.3e-3 rms for uniform data; fp32 accumulation in another order adds ≪ 1e-4):
inline constexpr double kTolExact = 0.0;     // pure copies (embedding rows, V into the cache)
inline constexpr double kTolBf16Out = 1e-2;  // one bf16 output rounding after fp32 math, and bf16
                                             // intermediates (residual, q/k-norm) on the way

}  // namespace ceiling::bench
