// The Ops interface: everything the model forward needs from a backend. The forward
// (engine/forward.h) is written once against it; CpuOps (fp32, the reference) and CudaOps (bf16
// activations, later) implement it.
//
// Memory: an Ops owns every buffer the forward touches. The forward allocates its workspace once
// through alloc() (for max_tokens T_max and max logits rows R_max) and takes per-step views of the
// leading rows, so buffer addresses never change between steps: a CUDA backend can capture a
// decode step in a graph. Weights are handed over once with upload(); the KV cache comes from
// alloc_kv_cache().
//
// A step: prepare(step) makes the StepBatch visible to the kernels (CUDA: async copies into fixed
// device buffers), then the forward calls the layer ops, which read token ids, positions, slots,
// block tables and logits rows from the prepared step. All activation views passed in are views
// of Ops memory in act_dtype() except logits (always f32). Shapes: T = step tokens, R = logits
// rows, H = hidden, Hq/Hkv = query/KV heads, D = head dim, I = MLP width, V = vocab.
//
// Thread-safety: an Ops is used by one thread at a time (the engine thread).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "engine/communicator.h"
#include "engine/step_batch.h"
#include "kernels/cpu/sampling.h"
#include "model/config.h"
#include "model/weights.h"

namespace ceiling::engine {

// The paged KV cache of every layer: k[l] and v[l] are each [num_blocks, Hkv, block_size, D] in
// the Ops' kv dtype (the layout of kernels/cpu/ref.h: one head's block_size×D tile is contiguous;
// slot s lives in block s / block_size, row s % block_size). Memory is owned by the Ops.
struct KvCache {
  int num_layers = 0, num_blocks = 0, block_size = 0, num_kv_heads = 0, head_dim = 0;
  DType dtype = DType::kF32;
  std::vector<TensorView> k, v;  // [L] views of [num_blocks, Hkv, block_size, D]
  int64_t num_slots() const { return int64_t{num_blocks} * block_size; }
};

// What one logits row needs to become a token (see kernels/cpu/sampling.h for the semantics).
struct SampleRequest {
  cpu::SamplingParams params;
  float u = 0.0f;                        // sampling_uniform(params.seed, generated.size())
  std::span<const int32_t> prompt;       // for repetition_penalty
  std::span<const int32_t> generated;    // for all penalties
  std::span<const cpu::LogitBias> bias;  // added before the penalties (-Inf masks a token)
};

// How the o / down projection of a layer step meets the residual stream. kAdd: residual +=
// projection (one GPU, and tensor-parallel rank 0). kStore: residual = projection (the other
// tensor-parallel ranks: the all-reduce that follows sums rank 0's residual + partial with every
// other rank's partial, which is the new residual on every rank).
enum class ResidualUpdate { kAdd, kStore };

// A tensor-parallel rank's part of the joined logits: columns [begin, begin + valid) of the
// whole vocabulary are the rank's first `valid` logits columns.
struct VocabPart {
  int64_t begin = 0, valid = 0;
};

// Leading `n` rows of a contiguous view whose first dimension is rows ([N, ...] -> [n, ...]).
TensorView rows(const TensorView& t, int64_t n);

// Checks that `w` has every tensor `c` needs with the shape it implies (biases iff
// c.attention_bias, q/k norms iff c.qk_norm), on `device`, in f32/bf16/f16. Throws
// ceiling::Error naming the tensor (e.g. "layers.3.k_proj") and the rule. Ops::upload calls it.
// A quantized projection (LayerWeights::quant) is checked for its format's layout instead.
void check_weights(const ModelConfig& c, const ModelWeights& w, Device device);

class Ops {
 public:
  virtual ~Ops() = default;
  Ops() = default;
  Ops(const Ops&) = delete;
  Ops& operator=(const Ops&) = delete;

  virtual std::string name() const = 0;  // "cpu", "cuda"
  virtual Device device() const = 0;
  virtual DType act_dtype() const = 0;  // activations (CPU f32, CUDA bf16)
  virtual DType kv_dtype() const = 0;   // KV cache (CPU f32)

  // ---- memory -------------------------------------------------------------------------------
  // A new buffer of `shape` owned by the Ops (freed with it). Contents are unspecified (CpuOps
  // fills f32 buffers with NaN so a read before a write shows).
  virtual TensorView alloc(DType dtype, std::initializer_list<int64_t> shape) = 0;
  // Makes `host` (views into host memory, e.g. the mmap of load_model) the weights of this Ops
  // for `config`. CPU keeps the views; CUDA copies them to the device and may fuse (QKV,
  // gate/up). Call once, before anything below. Returns the views the layer ops use.
  virtual const ModelWeights& upload(const ModelConfig& config, const ModelWeights& host) = 0;
  virtual const ModelWeights& weights() const = 0;
  virtual const ModelConfig& config() const = 0;
  // A KV cache for the uploaded model: num_blocks blocks of block_size slots per layer.
  virtual KvCache alloc_kv_cache(int num_blocks, int block_size) = 0;
  // Copies any Ops buffer to host as f32 (dst has src.numel() floats) / f32 host data into it.
  virtual void to_host(const TensorView& src, float* dst) = 0;
  virtual void from_host(const float* src, const TensorView& dst) = 0;
  // Waits for queued work (CPU: no-op).
  virtual void synchronize() {}
  // Makes this Ops usable from the calling thread (CUDA: its device becomes the thread's current
  // one). Needed only when another thread than the one that made the Ops calls it.
  virtual void bind_thread() {}
  // Free and total bytes of the device's memory, for sizing the KV cache; false when the backend
  // has no device memory of its own (CPU).
  virtual bool device_memory(size_t* free_bytes, size_t* total_bytes) {
    (void)free_bytes;
    (void)total_bytes;
    return false;
  }

  // ---- one step -----------------------------------------------------------------------------
  // Makes `step` the current step (validated against `kv`). The step's sizes must fit the
  // workspace the forward allocated (T <= T_max, R <= R_max).
  virtual void prepare(const StepBatch& step, const KvCache& kv) = 0;

  // out [T, H] = embed[token_ids].
  virtual void embedding(const TensorView& out) = 0;
  // Fused residual add + RMSNorm (kernels/cpu/ref.h rms_norm): with `residual` [T, H] non-null:
  // residual <- x + residual, out = norm(residual) · weight; else out = norm(x) · weight.
  // x, out [T, H] (out may alias x); weight [H] (an uploaded weight).
  virtual void rms_norm(const TensorView& x, const TensorView* residual, const TensorView& weight,
                        const TensorView& out) = 0;
  // q [T, Hq·D], k [T, Hkv·D], v [T, Hkv·D] = x [T, H] · W{q,k,v}ᵀ (+ bias when the layer has it).
  virtual void qkv_proj(int layer, const TensorView& x, const TensorView& q, const TensorView& k,
                        const TensorView& v) = 0;
  // Qwen3: per-head RMSNorm in place, q [T, Hq, D] with q_norm [D], k [T, Hkv, D] with k_norm.
  // Only called when config().qk_norm.
  virtual void qk_norm(int layer, const TensorView& q, const TensorView& k) = 0;
  // Rotate-half RoPE (config's theta and scaling) in place on q and k at the step's positions,
  // then writes k and v [T, Hkv·D] into layer `layer` of `kv` at the step's slot_mapping.
  virtual void rope_kv_write(int layer, const TensorView& q, const TensorView& k,
                             const TensorView& v, KvCache& kv) = 0;
  // Causal GQA attention of q [T, Hq·D] over layer `layer` of the cache (this step's K/V already
  // written) for the step's sequences (query_start, seq_lens, block_tables); out [T, Hq·D].
  // Scale 1/sqrt(D). Prefill chunks and decode steps go through the same call.
  virtual void attention(int layer, const TensorView& q, const KvCache& kv,
                         const TensorView& out) = 0;
  // out [T, H] = attn [T, Hq·D] · Woᵀ.
  virtual void o_proj(int layer, const TensorView& attn, const TensorView& out) = 0;
  // gate_up [T, 2I]: columns [0, I) = x · Wgateᵀ, [I, 2I) = x · Wupᵀ.
  virtual void gate_up_proj(int layer, const TensorView& x, const TensorView& gate_up) = 0;
  // out [T, I] = silu(gate) · up.
  virtual void silu_mul(const TensorView& gate_up, const TensorView& out) = 0;
  // out [T, H] = act [T, I] · Wdownᵀ.
  virtual void down_proj(int layer, const TensorView& act, const TensorView& out) = 0;

  // ---- the layer's steps as Forward calls them ----------------------------------------------
  // Each is a sequence of the single ops above; a backend may fuse it (CudaOps does at decode
  // sizes: the norm becomes the GEMV's prologue, SiLU-and-multiply the gate/up GEMV's epilogue and
  // the residual add the o / down GEMV's epilogue).
  // Scratch views (h, act, scratch) may be left unwritten by a fused path.
  //
  // The attention block's inputs: h [T, H] = rms_norm(residual) · input_norm; q, k, v =
  // qkv_proj(h); qk_norm(q, k) when the model has it; rope_kv_write(q, k, v, kv). Afterwards q
  // holds the rotated queries and the cache this step's K and V; k and v hold unspecified values.
  virtual void norm_qkv_rope(int layer, const TensorView& residual, const TensorView& h,
                             const TensorView& q, const TensorView& k, const TensorView& v,
                             KvCache& kv) = 0;
  // residual [T, H] += o_proj(attn) (scratch [T, H]); with ResidualUpdate::kStore,
  // residual = o_proj(attn).
  virtual void o_proj_residual(int layer, const TensorView& attn, const TensorView& scratch,
                               const TensorView& residual, ResidualUpdate update) = 0;
  // The MLP block: h [T, H] = rms_norm(residual) · post_attn_norm, gate_up [T, 2I] =
  // gate_up_proj(h), act [T, I] = silu_mul(gate_up), residual += down_proj(act) (scratch [T, H]);
  // with ResidualUpdate::kStore, residual = down_proj(act).
  virtual void mlp_residual(int layer, const TensorView& residual, const TensorView& h,
                            const TensorView& gate_up, const TensorView& act,
                            const TensorView& scratch, ResidualUpdate update) = 0;

  // out [R, H] = x [T, H] at the step's logits_rows.
  virtual void gather_rows(const TensorView& x, const TensorView& out) = 0;
  // logits [R, V] (f32) = x [R, H] · lm_headᵀ.
  virtual void lm_head(const TensorView& x, const TensorView& logits) = 0;

  // ---- sampling -----------------------------------------------------------------------------
  // One token per logits row: ids[r] for logits [R, V] (f32, Ops memory) and reqs[r]
  // (reqs.size() == R). ids is host memory; the call returns when ids are written.
  virtual void sample(const TensorView& logits, std::span<const SampleRequest> reqs,
                      int32_t* ids) = 0;

  // ---- tensor parallelism -------------------------------------------------------------------
  // With a communicator set (not owned; world > 1), this Ops holds one rank's shard of the model
  // (dist/shard.h) and Forward runs the tensor-parallel layer: partial sums of the row-parallel
  // o / down projections and of the vocab-parallel embedding are all-reduced here.
  void set_communicator(Communicator* comm) { comm_ = comm; }
  Communicator* communicator() const { return comm_; }
  // x [T, H] <- Σ over ranks, in place, in this Ops' stream order. A CUDA backend records it in
  // its decode graphs like any other op.
  virtual void all_reduce_sum(const TensorView& x) {
    CEILING_ENSURE(comm_ != nullptr, "{}: all_reduce_sum without a communicator", name());
    comm_->all_reduce_sum(x, nullptr);
  }
  // After lm_head: every rank's local logits [R, Vp] all-gathered into gathered (at least
  // N·R·Vp f32), then, where `full` is a view (the joining rank), joined into full [R, V]:
  // rank r's first parts[r].valid columns at parts[r].begin. All ranks call it. Host memory
  // here; a CUDA backend overrides it and records it in its decode graph (the step's last op).
  virtual void join_logits(const TensorView& local, std::span<const VocabPart> parts,
                           const TensorView& gathered, const TensorView& full);

 private:
  Communicator* comm_ = nullptr;
};

}  // namespace ceiling::engine
