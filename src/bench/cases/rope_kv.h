// Cases of the fused RoPE + paged KV write (optionally with the Qwen3 q/k norm).
#pragma once

#include <memory>

#include "bench/case.h"

namespace ceiling::bench {

struct RopeKvShape {
  int T = 1, Hq = 32, Hkv = 8, D = 128;
  int block_size = 16;
  int num_blocks = 0;  // 0 = just enough for T tokens plus one spare block
  bool qk_norm = false;
  int skip_every = 0;       // every skip_every-th token gets slot -1 (0 = none)
  int max_position = 8192;  // positions uniform in [0, max_position)
};

// q, k, v come from one fused QKV buffer [T, (Hq + 2·Hkv)·D]; slots are distinct random slots of
// the cache (so blocks are scattered and contexts end mid-block).
std::unique_ptr<KernelCase> make_rope_kv_case(const RopeKvShape& shape);

}  // namespace ceiling::bench
