// Device activation functions shared by the elementwise kernels and the fused GEMV prologues, so
// a fused and an unfused path compute the same values.
#pragma once

namespace ceiling::cuda::detail {

// silu(g) · u in fp32 (the gated MLP's act(gate) · up).
__device__ __forceinline__ float silu_times(float g, float u) {
  return g / (1.0f + __expf(-g)) * u;
}

}  // namespace ceiling::cuda::detail
