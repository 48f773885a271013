// Cases of the fused RoPE + paged KV write (optionally with the Qwen3 q/k norm).
#pragma once

#include <memory>
#include <optional>

#include "bench/case.h"
#include "kernels/cuda/rope_kv.h"

namespace ceiling::bench {

struct RopeKvShape {
  int T = 1, Hq = 32, Hkv = 8, D = 128;
  int block_size = 16;
  int num_blocks = 0;  // 0 = just enough for T tokens plus one spare block
  bool qk_norm = false;
  int skip_every = 0;       // every skip_every-th token gets slot -1 (0 = none)
  int max_position = 8192;  // positions uniform in [0, max_position)
  bool seq_slots = false;   // token t gets slot t (a prefill's layout) instead of a random one
  // An explicit configuration: a comparison case (rope_kv_write_with_config) instead of the one
  // rope_kv_write() takes.
  std::optional<cuda::RopeKvConfig> cfg;
  // An fp8 (E4M3) cache with these per-tensor scales (kernels/cuda/kv_format.h).
  bool fp8_kv = false;
  float k_scale = 1.0f, v_scale = 1.0f;
};

// q, k, v come from one fused QKV buffer [T, (Hq + 2·Hkv)·D]; slots are distinct random slots of
// the cache (so blocks are scattered and contexts end mid-block), or consecutive (seq_slots).
std::unique_ptr<KernelCase> make_rope_kv_case(const RopeKvShape& shape);

}  // namespace ceiling::bench
