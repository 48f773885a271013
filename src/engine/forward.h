// The decoder-only transformer forward (Llama, Mistral, Qwen2, Qwen3), written once against Ops.
// Per layer:  h = rms_norm(x + residual)            (fused; layer 0 normalizes the embedding)
//             q, k, v = qkv_proj(h) (+bias)          [T, Hq·D], [T, Hkv·D] ×2
//             q, k = qk_norm(q, k)                   (Qwen3 only)
//             q, k = rope(q, k); cache <- k, v       (paged, at slot_mapping)
//             x = o_proj(attention(q, cache))        [T, H]
//             h = rms_norm(x + residual)             (post-attention norm, fused residual)
//             x = down(silu(gate(h)) · up(h))        [T, H]
// then h = final_norm(x + residual), and logits [R, V] = lm_head(h at logits_rows).
// With a communicator on the Ops (tensor parallel, dist/tp_group.h) the Ops holds one rank's
// shard: the embedding, the o and the down projection are partial sums, all-reduced into the
// residual; lm_head gives the rank's vocabulary slice [R, Vp] (dist/shard.h), which
// Ops::join_logits all-gathers and joins into the whole [R, V] on the joining rank (rank 0).
#pragma once

#include <vector>

#include "engine/ops.h"

namespace ceiling::engine {

struct ForwardLimits {
  int max_tokens = 256;     // T_max: tokens per step (longer prompts are prefilled in chunks)
  int max_logits_rows = 1;  // R_max: logits rows per step
};

class Forward {
 public:
  // `ops` must already hold the model's weights (Ops::upload). Allocates the activation
  // workspace once through `ops`, sized by `limits`.
  Forward(Ops& ops, ForwardLimits limits);

  const ForwardLimits& limits() const { return limits_; }
  Ops& ops() { return ops_; }

  // Runs one step: writes this step's K/V into `kv` and returns the logits [R, V] (f32, Ops
  // memory), valid until the next run. Throws when the step does not fit the limits or `kv`.
  // Tensor parallel: the joined [R, V] on the joining rank, the rank's own slice [R, Vp] on the
  // others.
  TensorView run(const StepBatch& step, KvCache& kv);

  // Tensor parallel (required before run() when the Ops has a communicator of world > 1):
  // parts[r] are rank r's columns of the whole vocabulary of `vocab` ids; `joins`: this rank
  // gets the joined logits. Allocates the gather buffers.
  void set_logits_join(std::vector<VocabPart> parts, int64_t vocab, bool joins);

 private:
  // Fixed buffers (first dimension T_max or R_max); each step uses their leading rows.
  struct Workspace {
    TensorView residual;  // [T_max, H]
    TensorView x;         // [T_max, H]   sub-layer output
    TensorView h;         // [T_max, H]   normalized input of a sub-layer
    TensorView q;         // [T_max, Hq·D]
    TensorView k, v;      // [T_max, Hkv·D]
    TensorView attn;      // [T_max, Hq·D]
    TensorView gate_up;   // [T_max, 2I]
    TensorView act;       // [T_max, I]
    TensorView last;      // [R_max, H]
    TensorView logits;    // [R_max, V] f32
  };

  struct Join {
    std::vector<VocabPart> parts;  // [N]; empty: no tensor parallelism
    TensorView gathered;           // [N · R_max · Vp] f32
    TensorView full;               // [R_max, V] f32 on the joining rank, else empty
  };

  Ops& ops_;
  ForwardLimits limits_;
  Workspace ws_;
  Join join_;
};

}  // namespace ceiling::engine
