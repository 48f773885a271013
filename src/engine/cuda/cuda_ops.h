// CudaOps: the GPU backend of the Ops interface (engine/ops.h). bf16 activations, bf16 (or fp8 /
// int4, gemv_quant.h) weights, a bf16 or fp8 (E4M3, the layers' k_scale / v_scale:
// kernels/cuda/kv_format.h) paged KV cache, fp32 logits; every op is a launcher of
// src/kernels/cuda/ on one stream.
//
// Memory: weights live in one allocation filled straight from the host views (the mmap of
// load_model) through pinned staging buffers, with QKV and gate/up fused (weight_upload.h).
// Workspace buffers (alloc(), step metadata, attention/sampler workspace) come from one device
// arena and never move; a KV cache is one allocation with a hidden extra block per layer (the
// dummy block that padding rows of a decode graph point at).
//
// Steps: prepare() packs the StepBatch into a pinned host mirror; one async copy moves it into
// fixed device buffers that the kernels read. A decode step (every sequence adds one token, one
// logits row each) of S sequences runs as a CUDA graph of B = the bucket ≥ S (1, 2, 4, ..., up
// to max_graph_batch): rows S..B-1 are padding (token 0, slot -1 so nothing is written to the
// cache, a one-token context in the dummy block). The first decode step of a bucket runs the same
// padded kernels eagerly (warm-up: module loads, cuBLASLt plans), the second is captured — metadata
// copy, the whole forward, and the argmax of every logits row with its copy to pinned host memory —
// and every later one replays it: the op calls of the forward then only check that they match what
// was captured, and lm_head() launches the graph. Bucketing needs every buffer from alloc() to have
// ≥ B rows (Forward: min(max_tokens, max_logits_rows)); otherwise the graph has exactly S rows.
// With cuda_graphs = false every step runs eagerly (like vLLM's --enforce-eager).
//
// Thread-safety: one thread at a time (the engine thread), as every Ops.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "engine/cuda/device_memory.h"
#include "engine/cuda/weight_upload.h"
#include "engine/ops.h"
#include "engine/ops_factory.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/linear.h"

namespace ceiling::engine {

struct CudaOpsOptions {
  int device_index = 0;
  bool cuda_graphs = true;    // false: every step eager (--no-graphs / --enforce-eager)
  int max_graph_batch = 256;  // largest decode bucket captured; bigger decode steps run eagerly
  // --kv-cache-dtype fp8: caches hold E4M3 (every supported head dim). The QKV GEMV then leaves
  // RoPE and the cache write to rope_kv_write (its fused epilogue writes bf16 only).
  bool fp8_kv_cache = false;
  // Tune the cuBLASLt algorithm of each GEMM shape a decode graph captures, at the bucket's
  // warm-up step (kernels/cuda/gemm_lt.h); false: cuBLASLt's first heuristic choice.
  bool gemm_autotune = true;
  // (source bytes copied, total) during upload(), e.g. for a progress line on a TTY.
  std::function<void(uint64_t, uint64_t)> upload_progress;
};

struct CudaOpsStats {
  int eager_steps = 0, graph_captures = 0, graph_replays = 0;
  double upload_ms = 0;
  uint64_t upload_bytes = 0;  // bytes read from the host weights
  uint64_t weight_bytes = 0;  // bytes of the device copy (bf16, fused)
  uint64_t arena_bytes = 0;   // workspace reserved
};

class CudaOps final : public Ops {
 public:
  // Selects the device, creates the stream and cuBLASLt state. Throws ceiling::Error when there
  // is no usable GPU at options.device_index.
  explicit CudaOps(CudaOpsOptions options = {});
  ~CudaOps() override;

  std::string name() const override { return "cuda"; }
  Device device() const override { return Device::kCuda; }
  DType act_dtype() const override { return DType::kBF16; }
  DType kv_dtype() const override { return options_.fp8_kv_cache ? DType::kF8E4M3 : DType::kBF16; }

  TensorView alloc(DType dtype, std::initializer_list<int64_t> shape) override;
  const ModelWeights& upload(const ModelConfig& config, const ModelWeights& host) override;
  const ModelWeights& weights() const override;
  const ModelConfig& config() const override;
  KvCache alloc_kv_cache(int num_blocks, int block_size) override;
  void to_host(const TensorView& src, float* dst) override;
  void from_host(const float* src, const TensorView& dst) override;
  void synchronize() override;
  void bind_thread() override;
  bool device_memory(size_t* free_bytes, size_t* total_bytes) override;

  void prepare(const StepBatch& step, const KvCache& kv) override;
  void embedding(const TensorView& out) override;
  void rms_norm(const TensorView& x, const TensorView* residual, const TensorView& weight,
                const TensorView& out) override;
  void qkv_proj(int layer, const TensorView& x, const TensorView& q, const TensorView& k,
                const TensorView& v) override;
  void qk_norm(int layer, const TensorView& q, const TensorView& k) override;
  void rope_kv_write(int layer, const TensorView& q, const TensorView& k, const TensorView& v,
                     KvCache& kv) override;
  void attention(int layer, const TensorView& q, const KvCache& kv, const TensorView& out) override;
  void o_proj(int layer, const TensorView& attn, const TensorView& out) override;
  void gate_up_proj(int layer, const TensorView& x, const TensorView& gate_up) override;
  void silu_mul(const TensorView& gate_up, const TensorView& out) override;
  void down_proj(int layer, const TensorView& act, const TensorView& out) override;
  void norm_qkv_rope(int layer, const TensorView& residual, const TensorView& h,
                     const TensorView& q, const TensorView& k, const TensorView& v,
                     KvCache& kv) override;
  void o_proj_residual(int layer, const TensorView& attn, const TensorView& scratch,
                       const TensorView& residual, ResidualUpdate update) override;
  void mlp_residual(int layer, const TensorView& residual, const TensorView& h,
                    const TensorView& gate_up, const TensorView& act, const TensorView& scratch,
                    ResidualUpdate update) override;
  void gather_rows(const TensorView& x, const TensorView& out) override;
  void lm_head(const TensorView& x, const TensorView& logits) override;
  void sample(const TensorView& logits, std::span<const SampleRequest> reqs, int32_t* ids) override;
  // Tensor parallel: the communicator's collective on this stream, recorded in decode graphs.
  void all_reduce_sum(const TensorView& x) override;
  void join_logits(const TensorView& local, std::span<const VocabPart> parts,
                   const TensorView& gathered, const TensorView& full) override;

  cudaStream_t stream() const { return stream_; }
  const CudaOpsStats& stats() const { return stats_; }
  bool cuda_graphs() const { return options_.cuda_graphs; }
  bool gemm_autotune() const { return options_.gemm_autotune; }
  // The GEMM shapes tuned so far (gemm_lt.h), as JSON rows {M, N, K, candidates, chosen, algo_id,
  // tile_id, split_k, first_us, best_us}: what --no-gemm-autotune would have run, and what runs.
  nlohmann::json gemm_tune_log() const;
  // Turning graphs off drops the captured ones.
  void set_cuda_graphs(bool enabled);
  // Diagnostics: replays the last step's graph n times back to back (the same step again: its
  // K/V writes repeat the same values) and returns the GPU time per replay in ms — the step
  // without the host's part. Throws unless the last step was a replayed or captured graph step.
  double time_graph_replays(int n);
  // Whether time_graph_replays can run now (the last step ran as a graph: a decode step of at
  // most max_graph_batch sequences, graphs on).
  bool graph_replayable() const;

 private:
  enum class Mode { kIdle, kEager, kCapture, kReplay };
  struct Graph {
    cudaGraphExec_t exec = nullptr;
    uint64_t signature = 0;
    bool warmed = false;  // the bucket ran once eagerly; the next step captures
  };
  // Device step metadata: fixed addresses (graphs read them); grown only between steps.
  struct StepMeta {
    int t_cap = 0, s_cap = 0, mb_cap = 0;
    size_t bytes = 0;
    int32_t* dev = nullptr;        // arena
    cuda_impl::PinnedBuffer host;  // pinned mirror, same layout
    // Offsets (in int32) of each array in both copies.
    size_t tokens = 0, positions = 0, slots = 0, query_start = 0, seq_lens = 0, logits_rows = 0,
           tables = 0;
  };
  struct KvAlloc {
    cuda_impl::DeviceBuffer mem;
    const void* k0 = nullptr;  // kv.k[0].data: identifies the cache
  };

  // ---- step plumbing (cuda_ops_step.cpp) ----
  enum RowKind { kTokens, kLogitsRows };
  // Checks the op may run now and folds it into the graph signature; returns the rows the
  // kernels process for `first` (see check_rows).
  int begin_op(uint64_t op, int layer, std::initializer_list<const void*> ptrs, bool needs_step,
               const TensorView& first, RowKind kind, bool qkv_aware = false);
  // `t` must have the step's T (or R) rows; returns the rows to process: those, or the bucket B
  // in a graph step (then `t` must be the leading rows of an alloc()'d buffer with ≥ B rows).
  int check_rows(const TensorView& t, RowKind kind, const char* what);
  void check_step_kv(const KvCache& kv, int layer) const;
  bool launching() const { return mode_ != Mode::kReplay; }
  void ensure_meta(int t_rows, int s_rows, int mb);
  void ensure_qkv(int rows);
  // The E4M3 image and per-row scales of a W8A8 call's input (fp8 projections, rows ≥
  // kFp8ActRowsMin): room for `rows` rows of the widest projection input.
  void ensure_act_fp8(int rows);
  void probe_fp8_gemm();  // sets fp8_weights_ and fp8_gemm_ after the upload
  void pack_step(const StepBatch& step, int dummy_block);
  void plan_step(const KvCache& kv, bool graph);
  // decode_plan_'s workspace for the bucket `key` (0: eager), zeroed on the stream when fresh or
  // laid out for another plan; null when the plan needs none.
  void* decode_workspace(int key);
  void finish_step(const TensorView& logits);
  void abort_capture();
  void drop_graphs();
  const KvAlloc& find_kv(const KvCache& kv) const;
  template <typename T>
  T* dev(size_t offset) const {
    return reinterpret_cast<T*>(meta_.dev + offset);
  }

  // The fused QKV output stays in qkv_ after qkv_proj ("pending"): qk_norm, rope_kv_write and
  // attention (q rows (Q + 2·KV) apart) read it there, so a step runs no split kernel. The q/k/v
  // views get their values (split_qkv) as soon as anything else reads or writes them — another op,
  // to_host/from_host, or the next qkv_proj into other views — so the Ops contract holds for every
  // caller that goes through the Ops.
  struct PendingQkv {
    void* q = nullptr;
    void* k = nullptr;
    void* v = nullptr;
    int rows = 0;
    bool valid = false;
  };
  bool pending_is(const void* q, const void* k, const void* v) const;
  void touch_qkv(std::initializer_list<const void*> ptrs);  // materializes if one is pending
  void materialize_qkv();

  // ---- helpers (cuda_ops.cpp) ----
  static __nv_bfloat16* bf16_ptr(const TensorView& t, const char* what);
  // out = x · Wᵀ (+ bias) for `rows` rows of x: bf16 weights through cuda::Linear (GEMV or
  // cuBLASLt by the measured crossover); fp8 / int4 through the quantized GEMV up to
  // kQuantGemvMaxM rows; above that fp8 runs W8A8 (x quantized per row, cuBLASLt FP8; without
  // cuBLASLt's FP8 kernels, x through E4M3 and back to bf16 and the dequantized weight in a bf16
  // GEMM, the same product) and int4 runs gemm_int4 on the packed weights up to kGemmInt4MaxM
  // rows (more rows, or groups under 128: dequantized into weights_.dequant_scratch for
  // cuda::Linear).
  void linear(const TensorView& x, const cuda_impl::DeviceLinear& w, const TensorView* bias,
              void* out, DType out_dtype, int rows, bool accumulate = false);
  // Whether `rows` of x through w take the GEMV, so a fused GEMV (norm or SiLU prologue, RoPE
  // epilogue) can replace the op before it.
  bool gemv_fuses(int rows, const cuda_impl::DeviceLinear& w, const void* x) const;
  // Whether `rows` of x through w run W8A8 (their input quantized per row, fp8 weights).
  bool w8a8_input(int rows, const cuda_impl::DeviceLinear& w) const;
  // rms_norm and silu_mul for the projection `next` that reads out (null: not known): where it
  // runs W8A8, the same kernel writes out's E4M3 image too (prequant_).
  void rms_norm_for(const TensorView& x, const TensorView* residual, const TensorView& weight,
                    const TensorView& out, const cuda_impl::DeviceLinear* next);
  void silu_mul_for(const TensorView& gate_up, const TensorView& out,
                    const cuda_impl::DeviceLinear* next);
  // gemv_fused (bf16) or gemv_fused_quant, by w's format.
  void gemv_fused(const cuda::GemvFusion& f, const TensorView& x, const cuda_impl::DeviceLinear& w,
                  const TensorView* bias, const TensorView& out, int rows);
  // qkv_proj with x through `fusion` (cuda::GemvFusion; null: plain), the pending-q/k/v logic.
  // kv non-null: RoPE + the KV write as the GEMV's epilogue too (needs `fusion`).
  void qkv_proj_into_pending(int layer, const TensorView& x, const cuda::GemvFusion* fusion,
                             const TensorView& q, const TensorView& k, const TensorView& v,
                             KvCache* kv);
  const cuda_impl::FusedLayerWeights& fused(int layer) const;
  cuda::KvFormat kv_format() const {
    return options_.fp8_kv_cache ? cuda::KvFormat::kFP8 : cuda::KvFormat::kBF16;
  }

  CudaOpsOptions options_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t meta_free_ = nullptr;  // after the last metadata copy: the pinned mirror is free
  cuda_impl::DeviceArena arena_;
  std::unique_ptr<cuda::Linear> linear_;
  CudaOpsStats stats_;

  bool uploaded_ = false;
  ModelConfig config_;
  cuda_impl::DeviceWeights weights_;
  float* inv_freq_ = nullptr;  // [D/2] device
  std::vector<KvAlloc> kv_allocs_;
  int64_t row_cap_ = INT64_MAX;  // fewest rows of any alloc()'d buffer of rank ≥ 2
  bool fp8_weights_ = false;     // some projection is fp8: W8A8 calls need act_q_
  bool fp8_gemm_ = false;        // cuBLASLt has the FP8 outer-vector-scale kernels (upload probes)
  uint8_t* act_q_ = nullptr;     // [act_rows_, widest K] E4M3 (arena)
  float* act_scale_ = nullptr;   // [act_rows_]
  __nv_bfloat16* act_bf16_ = nullptr;  // [act_rows_, widest K]: the fallback's (no fp8_gemm_)
  int act_rows_ = 0;
  // act_q_ / act_scale_ already hold x's E4M3 image (`rows` rows), written by the fused norm or
  // SiLU kernel of op number `op`: valid for the next op only (op_count_ == op + 1).
  struct PreQuantized {
    const void* x = nullptr;
    int rows = 0;
    uint64_t op = 0;
  };
  PreQuantized prequant_;
  uint64_t op_count_ = 0;  // begin_op calls so far

  // The current step (kIdle: none; ops that need no step metadata then run eagerly).
  Mode mode_ = Mode::kIdle;
  int step_tokens_ = 0, step_logits_ = 0;  // the step's real T and R
  int rows_ = 0;         // token rows the kernels process (T, or the bucket B in a graph)
  int seqs_ = 0;         // sequences the kernels see (S, or B)
  int logit_rows_ = 0;   // logits rows computed (R, or B)
  bool decode_ = false;  // every sequence adds one token
  bool padded_ = false;  // a graph bucket's step (warm-up, capture or replay): B rows
  int step_max_seq_len_ = 0;
  const void* step_kv_ = nullptr;  // kv.k[0].data of the prepared step's cache
  uint64_t signature_ = 0;
  StepMeta meta_;
  __nv_bfloat16* qkv_ = nullptr;  // [qkv_rows_, Q + 2·KV] fused projection output
  int qkv_rows_ = 0;
  PendingQkv pending_;
  // Attention plans of the step. A decode step runs decode_plan_ over all seqs_; any other step
  // runs decode_plan_ over its first decode_seqs_ sequences (one new token each: the decodes the
  // scheduler puts first) and prefill_plan_ over the rest, so a decode row never takes a prefill
  // kernel's query tile of 128 rows.
  cuda::DecodePlan decode_plan_;
  cuda::PrefillPlan prefill_plan_;
  int decode_seqs_ = 0;
  // The decode kernel's split workspace: partials, and merge counters that every run leaves at
  // zero but that are laid out by the plan — so one workspace per graph bucket (key B; 0 for eager
  // steps), zeroed when allocated and whenever its plan's layout changes (decode_workspace()).
  // Grown, never freed: graphs keep using the one they captured.
  struct DecodeWorkspace {
    void* ptr = nullptr;
    size_t bytes = 0;
    int num_seqs = 0, max_splits = 0;  // the layout its counters are at rest for
  };
  std::map<int, DecodeWorkspace> decode_ws_;
  void* step_decode_ws_ = nullptr;  // decode_plan_'s workspace this step (null: none needed)

  // Graphs, keyed by the bucket B, valid for graph_kv_ (the cache they were captured with).
  std::map<int, Graph> graphs_;
  const void* graph_kv_ = nullptr;
  int bucket_ = 0;  // the graph step's (or warm-up step's) bucket; 0: none

  // Ids of the last graph step: argmax of every logits row, copied to pinned memory in-graph.
  int32_t* ids_dev_ = nullptr;  // [meta_.t_cap]
  cuda_impl::PinnedBuffer ids_host_;
  const void* graph_logits_ = nullptr;  // logits the graph ids belong to (null: none valid)

  // Sampler state (cuda_sampler.cpp), grown on demand.
  struct SamplerState;
  std::unique_ptr<SamplerState> sampler_;
};

// The hook ops_factory.cpp calls for make_ops("cuda").
std::unique_ptr<Ops> make_cuda_ops(const OpsOptions& options);

}  // namespace ceiling::engine
