// The CUDA backend's own small kernels: weight conversion at upload and the QKV split. Raw
// pointers + stream in, ceiling::Status out, like src/kernels/cuda/.
//
//  * split_qkv: the fused QKV projection writes [T, Q + 2·KV]; the Ops contract hands out q, k, v
//    as separate views. The attention and RoPE launchers read q, k, v in place (row strides), so
//    a step splits only where a caller reads those views itself.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"

namespace ceiling::engine::cuda_impl {

using bf16 = __nv_bfloat16;

// dst [n] = bf16(src [n]) for src in f32 or f16 (round to nearest even). bf16 src: a copy.
Status convert_to_bf16(const void* src, DType src_dtype, bf16* dst, size_t n, cudaStream_t stream);

// q [T, Q], k [T, KV], v [T, KV] = the column blocks of qkv [T, Q + 2·KV].
Status split_qkv(const bf16* qkv, int T, int Q, int KV, bf16* q, bf16* k, bf16* v,
                 cudaStream_t stream);

}  // namespace ceiling::engine::cuda_impl
