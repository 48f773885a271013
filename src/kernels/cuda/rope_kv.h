// RoPE fused with the write of K and V into the paged KV cache (meaning: cpu::rope followed by
// cpu::kv_write), with an optional per-head RMSNorm of q and k before the rotation (Qwen3
// q/k norm, meaning: cpu::rms_norm on each row of D). bf16 in and out, fp32 arithmetic.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "core/status.h"
#include "kernels/cuda/kv_format.h"

namespace ceiling::cuda {

struct RopeKvArgs {
  // Token t's heads start at q + t·q_stride (Hq rows of D), k + t·k_stride, v + t·v_stride (Hkv
  // rows of D each). For a fused QKV output [T, (Hq + 2·Hkv)·D] all three strides are that row
  // length and k, v point Hq·D and (Hq + Hkv)·D elements in.
  __nv_bfloat16* q = nullptr;  // rotated (and normed) in place
  const __nv_bfloat16* k = nullptr;
  const __nv_bfloat16* v = nullptr;
  int64_t q_stride = 0, k_stride = 0, v_stride = 0;
  const int32_t* positions = nullptr;     // [T]
  const int32_t* slot_mapping = nullptr;  // [T]; -1 (any negative) = skip; ≥ num_slots = skip
  const float* inv_freq = nullptr;        // [D/2], device copy of cpu::rope_inv_freq
  // Paged cache, each [num_blocks, Hkv, block_size, D]; slot s is block s / block_size, row
  // s % block_size. K is written rotated (and normed); the k input is not modified. An fp8
  // cache (kv_format.h) stores e4m3(x · scale_inv) of the bf16 value the bf16 cache would hold.
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  int num_blocks = 0, block_size = 0;
  KvFormat kv_format = KvFormat::kBF16;
  float k_scale_inv = 1.0f, v_scale_inv = 1.0f;  // 1 / the cache's k_scale, v_scale
  // Optional per-head RMSNorm weights [D] applied before the rotation (both or neither).
  const __nv_bfloat16* q_norm_w = nullptr;
  const __nv_bfloat16* k_norm_w = nullptr;
  float norm_eps = 1e-6f;
  int T = 0, Hq = 0, Hkv = 0, D = 0;
};

// D even and at most 512. A multiple of 16 takes the vectorized kernel, which needs every base
// pointer and stride 16-byte aligned; other head dims (stories260K's 8) a narrow kernel with
// element accesses (rope_kv.cu). Otherwise the Status names the value.
Status rope_kv_write(const RopeKvArgs& a, cudaStream_t stream);

// How the work is spread: tokens per CTA (1..4), and tasks (heads of a token) per thread, 1 or 4.
// rope_kv_write() takes rope_kv_config(T). Benchmark only: rope_kv_write_with_config runs another,
// so `ceiling bench kernels` can compare configurations in one run; an error names a
// configuration that is not built.
struct RopeKvConfig {
  int tokens_per_cta = 1;
  int tasks_per_thread = 1;
  bool streaming_stores = false;  // evict-first (.cs) stores of q and the cache rows
};
RopeKvConfig rope_kv_config(int T);
std::string rope_kv_config_name(const RopeKvConfig& cfg);  // "tok2u4", "tok2u4cs"
Status rope_kv_write_with_config(const RopeKvArgs& a, const RopeKvConfig& cfg, cudaStream_t stream);

}  // namespace ceiling::cuda
