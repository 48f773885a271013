// The sm_90a (Hopper) prefill kernel: FlashAttention-3 style warpgroup MMA (wgmma). Internal to
// the attention files; attention_prefill.cu dispatches to it.
#pragma once

#include <cuda_runtime_api.h>

#include "core/status.h"
#include "kernels/cuda/attention_prefill.cuh"

namespace ceiling::cuda::sm90 {

inline constexpr int kPrefillBlockM = 128;  // query rows per CTA

// Whether the wgmma kernel is built for this head_dim (and the binary targets sm_90a).
bool prefill_wgmma_available(int head_dim);

// Launches on grid (hq, tile_slots); p as for the mma.sync kernel.
Status run_prefill_wgmma(const attn::PrefillParams& p, int head_dim, int block_size, int hq,
                         int tile_slots, cudaStream_t stream);

}  // namespace ceiling::cuda::sm90
