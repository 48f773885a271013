// The sm_90a (Hopper) prefill kernels: FlashAttention-3 style warpgroup MMA (wgmma). Internal to
// the attention files; attention_prefill.cu dispatches to them.
#pragma once

#include <cuda_runtime_api.h>

#include "core/status.h"
#include "kernels/cuda/attention_prefill.cuh"

namespace ceiling::cuda::sm90 {

inline constexpr int kPrefillBlockM = 128;  // query rows per CTA (both wgmma kernels)

// Whether the wgmma kernels are built for this head_dim and can run on the current device:
// head_dim 64 or 128, a compute-capability 9.0 device, and a device image compiled with the
// sm_90a features (probed once per device through a marker kernel, not per call). When false,
// *why (if not null) says which condition failed.
bool prefill_wgmma_available(int head_dim, const char** why = nullptr);

// Launch on grid (hq, tile_slots) with PDL; p as for the mma.sync kernel.
// run_prefill_wgmma: 2 warpgroups, all threads load (attention_prefill_sm90.cu).
Status run_prefill_wgmma(const attn::PrefillParams& p, int head_dim, int block_size, int hq,
                         int tile_slots, cudaStream_t stream);
// run_prefill_wgmma_ws: producer warpgroup + 2 ping-ponging consumers
// (attention_prefill_sm90_ws.cu); tma: the producer copies K/V tiles with TMA instead of
// cp.async (needs prefill_tma_available()).
Status run_prefill_wgmma_ws(const attn::PrefillParams& p, int head_dim, int block_size, int hq,
                            int tile_slots, bool tma, cudaStream_t stream);
// Whether the driver offers cuTensorMapEncodeTiled (resolved once); *why says why not.
bool prefill_tma_available(const char** why = nullptr);

}  // namespace ceiling::cuda::sm90
