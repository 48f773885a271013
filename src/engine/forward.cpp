#include "engine/forward.h"

#include "core/status.h"

namespace ceiling::engine {

Forward::Forward(Ops& ops, ForwardLimits limits) : ops_(ops), limits_(limits) {
  const ModelConfig& c = ops.config();
  CEILING_ENSURE(limits.max_tokens > 0 && limits.max_logits_rows > 0,
                 "forward: max_tokens {} and max_logits_rows {} must be positive",
                 limits.max_tokens, limits.max_logits_rows);
  const int64_t T = limits.max_tokens, R = limits.max_logits_rows;
  const DType a = ops.act_dtype();
  ws_.residual = ops.alloc(a, {T, c.hidden_size});
  ws_.x = ops.alloc(a, {T, c.hidden_size});
  ws_.h = ops.alloc(a, {T, c.hidden_size});
  ws_.q = ops.alloc(a, {T, c.q_dim()});
  ws_.k = ops.alloc(a, {T, c.kv_dim()});
  ws_.v = ops.alloc(a, {T, c.kv_dim()});
  ws_.attn = ops.alloc(a, {T, c.q_dim()});
  ws_.gate_up = ops.alloc(a, {T, 2 * int64_t{c.intermediate_size}});
  ws_.act = ops.alloc(a, {T, c.intermediate_size});
  ws_.last = ops.alloc(a, {R, c.hidden_size});
  ws_.logits = ops.alloc(DType::kF32, {R, c.vocab_size});
}

TensorView Forward::run(const StepBatch& step, KvCache& kv) {
  const ModelConfig& c = ops_.config();
  const ModelWeights& w = ops_.weights();
  const int T = step.num_tokens(), R = step.num_logits_rows();
  CEILING_ENSURE(T <= limits_.max_tokens, "forward: step has {} tokens (max_tokens {})", T,
                 limits_.max_tokens);
  CEILING_ENSURE(R <= limits_.max_logits_rows, "forward: step wants {} logits rows (max {})", R,
                 limits_.max_logits_rows);
  CEILING_ENSURE(kv.num_layers == c.num_layers && kv.num_kv_heads == c.num_kv_heads &&
                     kv.head_dim == c.head_dim,
                 "forward: KV cache shape does not match the model");
  ops_.prepare(step, kv);

  const TensorView residual = rows(ws_.residual, T), x = rows(ws_.x, T), h = rows(ws_.h, T);
  const TensorView q = rows(ws_.q, T), k = rows(ws_.k, T), v = rows(ws_.v, T);
  const TensorView attn = rows(ws_.attn, T), gate_up = rows(ws_.gate_up, T);
  const TensorView act = rows(ws_.act, T);

  // residual [T, H] is the residual stream; x, h, act are scratch.
  ops_.embedding(residual);
  // Tensor parallel (Megatron): this rank holds some heads and MLP columns, so its o and down
  // projections are partial sums. Rank 0 adds its partial to the residual, the other ranks store
  // theirs in place of it, and the all-reduce of the residual buffer then gives every rank
  // residual + Σ partials: the same fused layer steps as on one GPU, plus one all-reduce after
  // each block. The embedding is vocab-parallel: each rank looked up its rows, zeros elsewhere.
  const Communicator* comm = ops_.communicator();
  const bool tp = comm != nullptr && comm->world() > 1;
  const ResidualUpdate update =
      !tp || comm->rank() == 0 ? ResidualUpdate::kAdd : ResidualUpdate::kStore;
  CEILING_ENSURE(!tp || !join_.parts.empty(),
                 "forward: tensor parallel without a logits join (set_logits_join)");
  if (tp) ops_.all_reduce_sum(residual);
  for (int l = 0; l < c.num_layers; ++l) {
    ops_.norm_qkv_rope(l, residual, h, q, k, v, kv);
    ops_.attention(l, q, kv, attn);
    ops_.o_proj_residual(l, attn, x, residual, update);
    if (tp) ops_.all_reduce_sum(residual);
    ops_.mlp_residual(l, residual, h, gate_up, act, x, update);
    if (tp) ops_.all_reduce_sum(residual);
  }
  ops_.rms_norm(residual, nullptr, w.final_norm, h);
  const TensorView last = rows(ws_.last, R), logits = rows(ws_.logits, R);
  ops_.gather_rows(h, last);
  ops_.lm_head(last, logits);
  if (!tp) return logits;
  const TensorView full = join_.full.data ? rows(join_.full, R) : TensorView{};
  ops_.join_logits(logits, join_.parts, join_.gathered, full);
  return full.data ? full : logits;
}

void Forward::set_logits_join(std::vector<VocabPart> parts, int64_t vocab, bool joins) {
  const Communicator* comm = ops_.communicator();
  CEILING_ENSURE(comm != nullptr && static_cast<int>(parts.size()) == comm->world(),
                 "forward: a logits join of {} parts for {} ranks", parts.size(),
                 comm ? comm->world() : 1);
  const int64_t R = limits_.max_logits_rows, Vp = ops_.config().vocab_size;
  join_.parts = std::move(parts);
  join_.gathered = ops_.alloc(DType::kF32, {static_cast<int64_t>(join_.parts.size()) * R * Vp});
  join_.full = joins ? ops_.alloc(DType::kF32, {R, vocab}) : TensorView{};
}

}  // namespace ceiling::engine
