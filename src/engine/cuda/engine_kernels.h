// The CUDA backend's own small kernels: weight conversion at upload, the QKV split, and
// (TEMPORARY, until the kernel library covers them) fallbacks for shapes the library's launchers
// do not support yet. Raw pointers + stream in, ceiling::Status out, like src/kernels/cuda/.
//
//  * split_qkv: the fused QKV projection writes [T, Q + 2·KV]; the Ops contract hands out q, k, v
//    as separate views. The attention launchers read q in place (a row stride), so a step splits
//    only where a caller reads those views itself, or before the fallback attention kernel.
//
// Temporary pieces and what would retire them (see the CudaOps report):
//  * fallback_rope_kv_write: cuda::rope_kv_write needs head_dim % 16 == 0 (stories260K has 8).
//  * fallback_attention: cuda::*_attention supports head_dim 64/128 and block sizes 16..256 only
//    (the tiny test presets have head_dim 16 and 32).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"
#include "kernels/cuda/rope_kv.h"

namespace ceiling::engine::cuda_impl {

using bf16 = __nv_bfloat16;

// dst [n] = bf16(src [n]) for src in f32 or f16 (round to nearest even). bf16 src: a copy.
Status convert_to_bf16(const void* src, DType src_dtype, bf16* dst, size_t n, cudaStream_t stream);

// q [T, Q], k [T, KV], v [T, KV] = the column blocks of qkv [T, Q + 2·KV]. TEMPORARY (see above).
Status split_qkv(const bf16* qkv, int T, int Q, int KV, bf16* q, bf16* k, bf16* v,
                 cudaStream_t stream);

// Meaning of cuda::rope_kv_write without the q/k norm (q_norm_w/k_norm_w must be null); any even
// head_dim, any alignment. TEMPORARY (see above).
Status fallback_rope_kv_write(const cuda::RopeKvArgs& a, cudaStream_t stream);

// Causal GQA attention over the paged cache with the meaning of cpu::attention: q, out
// [T, Hq, D]; K/V [num_blocks, Hkv, block_size, D]; sequence s owns tokens
// [query_start[s], query_start[s+1]) whose positions end at seq_lens[s] - 1. head_dim 8, 16, 32
// or 64 (128 would spill), any block size; a block-table entry outside [0, num_blocks) reads as
// zeros. One warp per (token, query head), online softmax. TEMPORARY (see above).
struct FallbackAttnArgs {
  const bf16* q = nullptr;
  const bf16* k_cache = nullptr;
  const bf16* v_cache = nullptr;
  bf16* out = nullptr;
  const int32_t* query_start = nullptr;   // [S+1]
  const int32_t* seq_lens = nullptr;      // [S]
  const int32_t* block_tables = nullptr;  // [S, max_blocks]
  int max_blocks = 0, num_blocks = 0, block_size = 0;
  int S = 0, T = 0, Hq = 0, Hkv = 0, D = 0;
  float scale = 1.0f;
};
bool fallback_attention_supports(int head_dim);
Status fallback_attention(const FallbackAttnArgs& a, cudaStream_t stream);

}  // namespace ceiling::engine::cuda_impl
