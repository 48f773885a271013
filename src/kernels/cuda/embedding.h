// Embedding gather on the GPU (meaning: cpu::embedding).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/status.h"

namespace ceiling::cuda {

// out [T, H] = table [V, H] rows ids [T] (bf16 copies, bit-exact). An id outside [0, V) writes a
// zero row: the device never reads outside the table (the engine validates ids on the host).
// T == 0 launches nothing.
Status embedding(const __nv_bfloat16* table, int64_t V, int H, const int32_t* ids, int T,
                 __nv_bfloat16* out, cudaStream_t stream);

}  // namespace ceiling::cuda
