// CudaOps step plumbing: prepare() (validate, pack the StepBatch into the pinned mirror with
// padding rows, plan, copy or begin capture), the per-op checks, and the decode graphs.
#include <algorithm>

#include "core/check.h"
#include "engine/cuda/cuda_ops.h"
#include "engine/cuda/engine_kernels.h"
#include "kernels/cuda/sampling.h"

namespace ceiling::engine {
namespace {

int next_pow2(int n) {
  int p = 1;
  while (p < n) p <<= 1;
  return p;
}

uint64_t mix(uint64_t h, uint64_t v) {
  return h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
}

}  // namespace

const CudaOps::KvAlloc& CudaOps::find_kv(const KvCache& kv) const {
  CEILING_ENSURE(!kv.k.empty(), "CudaOps: empty KV cache");
  for (const KvAlloc& a : kv_allocs_)
    if (a.k0 == kv.k[0].data) return a;
  fail("CudaOps: the KV cache was not made by this CudaOps' alloc_kv_cache");
}

void CudaOps::prepare(const StepBatch& step, const KvCache& kv) {
  const ModelConfig& c = config();
  abort_capture();
  mode_ = Mode::kIdle;
  const KvAlloc& ka = find_kv(kv);
  CEILING_ENSURE(kv.num_layers == c.num_layers && kv.num_kv_heads == c.num_kv_heads &&
                     kv.head_dim == c.head_dim && kv.dtype == kv_dtype(),
                 "CudaOps: KV cache shape or dtype does not match the model and the backend");
  step.validate(kv.num_blocks, kv.block_size);
  const int T = step.num_tokens(), S = step.num_seqs(), R = step.num_logits_rows();
  decode_ = step.is_decode();
  // The decodes the scheduler puts first: leading sequences of one new token.
  decode_seqs_ = 0;
  if (!decode_)
    while (decode_seqs_ < S &&
           step.query_start[decode_seqs_ + 1] - step.query_start[decode_seqs_] == 1)
      ++decode_seqs_;
  step_max_seq_len_ = *std::max_element(step.seq_lens.begin(), step.seq_lens.end());

  // A decode step of S sequences with one logits row each runs as the graph of bucket B.
  int B = 0;
  if (options_.cuda_graphs && decode_ && R == S && S <= options_.max_graph_batch) {
    B = next_pow2(S);
    if (B > row_cap_ || B > options_.max_graph_batch) B = S;
  }
  ensure_meta(std::max(T, B), std::max(S, B), next_pow2(std::max(step.max_blocks, 1)));
  ensure_qkv(std::max(T, B));
  ensure_act_fp8(std::max(T, B));
  if (B && graph_kv_ != ka.k0) {
    drop_graphs();
    graph_kv_ = ka.k0;
  }
  Mode mode = Mode::kEager;
  if (B) {
    const Graph& g = graphs_[B];
    mode = g.exec ? Mode::kReplay : g.warmed ? Mode::kCapture : Mode::kEager;
  }
  // The warm-up step of a bucket runs the graph's kernels eagerly: same padded rows and plans,
  // so module loads and cuBLASLt's first calls happen outside the capture.
  padded_ = B != 0;
  bucket_ = B;
  step_tokens_ = T;
  step_logits_ = R;
  rows_ = padded_ ? B : T;
  seqs_ = padded_ ? B : S;
  logit_rows_ = padded_ ? B : R;

  CEILING_CUDA_CHECK(cudaEventSynchronize(meta_free_));  // the last copy has read the mirror
  pack_step(step, kv.num_blocks);
  if (mode != Mode::kReplay) plan_step(kv, padded_);  // a replay uses the captured plans
  step_kv_ = ka.k0;
  graph_logits_ = nullptr;
  signature_ = 0;
  if (mode == Mode::kCapture) {
    CEILING_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    mode_ = Mode::kCapture;
  }
  if (mode != Mode::kReplay) {
    CEILING_CUDA_CHECK(cudaMemcpyAsync(meta_.dev, meta_.host.as<int32_t>(), meta_.bytes,
                                       cudaMemcpyHostToDevice, stream_));
    if (mode == Mode::kEager) CEILING_CUDA_CHECK(cudaEventRecord(meta_free_, stream_));
  }
  mode_ = mode;
  if (mode == Mode::kEager) ++stats_.eager_steps;
}

void CudaOps::ensure_meta(int t_rows, int s_rows, int mb) {
  if (t_rows <= meta_.t_cap && s_rows <= meta_.s_cap && mb <= meta_.mb_cap) return;
  StepMeta m;
  m.t_cap = std::max(meta_.t_cap, next_pow2(std::max(t_rows, 16)));
  m.s_cap = std::max(meta_.s_cap, next_pow2(std::max(s_rows, 4)));
  m.mb_cap = std::max(meta_.mb_cap, mb);
  size_t n = 0;  // int32 elements; every array starts 16-byte aligned
  auto take = [&](size_t count) {
    const size_t at = n;
    n += (count + 3) / 4 * 4;
    return at;
  };
  m.tokens = take(m.t_cap);
  m.positions = take(m.t_cap);
  m.slots = take(m.t_cap);
  m.logits_rows = take(m.t_cap);
  m.query_start = take(m.s_cap + 1);
  m.seq_lens = take(m.s_cap);
  m.tables = take(static_cast<size_t>(m.s_cap) * m.mb_cap);
  m.bytes = n * sizeof(int32_t);
  CEILING_CUDA_CHECK(cudaStreamSynchronize(stream_));  // nothing may still read the old mirror
  m.dev = static_cast<int32_t*>(arena_.allocate(m.bytes));
  m.host = cuda_impl::PinnedBuffer(m.bytes);
  ids_dev_ = static_cast<int32_t*>(arena_.allocate(m.t_cap * sizeof(int32_t)));
  ids_host_ = cuda_impl::PinnedBuffer(m.t_cap * sizeof(int32_t));
  meta_ = std::move(m);
  drop_graphs();  // they read the old buffers
  stats_.arena_bytes = arena_.bytes_reserved();
}

void CudaOps::ensure_qkv(int rows) {
  if (rows <= qkv_rows_) return;
  materialize_qkv();  // the pending values live in the old buffer
  const int n = next_pow2(std::max(rows, 16));
  // The old buffer stays allocated (arena): graphs that captured it remain valid.
  qkv_ = static_cast<__nv_bfloat16*>(
      arena_.allocate(static_cast<size_t>(n) * (config_.q_dim() + 2 * config_.kv_dim()) * 2));
  qkv_rows_ = n;
  stats_.arena_bytes = arena_.bytes_reserved();
}

void CudaOps::ensure_act_fp8(int rows) {
  if (!fp8_weights_ || rows < kFp8ActRowsMin || rows <= act_rows_) return;
  const int n = next_pow2(rows);
  const int64_t k = std::max({config_.hidden_size, config_.q_dim(), config_.intermediate_size});
  // The old buffers stay allocated (arena): graphs that captured them remain valid.
  act_q_ = static_cast<uint8_t*>(arena_.allocate(static_cast<size_t>(n) * k));
  act_scale_ = static_cast<float*>(arena_.allocate(static_cast<size_t>(n) * sizeof(float)));
  if (!fp8_gemm_)  // the fallback's bf16 image of the W8A8 input
    act_bf16_ = static_cast<__nv_bfloat16*>(arena_.allocate(static_cast<size_t>(n) * k * 2));
  act_rows_ = n;
  stats_.arena_bytes = arena_.bytes_reserved();
}

void CudaOps::pack_step(const StepBatch& step, int dummy_block) {
  int32_t* h = meta_.host.as<int32_t>();
  const int T = step_tokens_, S = step.num_seqs(), R = step_logits_, mb = meta_.mb_cap;
  // Padding rows (graph steps only): token 0 at position 0, no cache write (slot -1), a
  // one-token sequence whose single block is the dummy block, its own logits row.
  for (int r = 0; r < rows_; ++r) {
    h[meta_.tokens + r] = r < T ? step.token_ids[r] : 0;
    h[meta_.positions + r] = r < T ? step.positions[r] : 0;
    h[meta_.slots + r] = r < T ? step.slot_mapping[r] : -1;
  }
  for (int r = 0; r < logit_rows_; ++r) h[meta_.logits_rows + r] = r < R ? step.logits_rows[r] : r;
  for (int s = 0; s <= seqs_; ++s)
    h[meta_.query_start + s] = s <= S ? step.query_start[s] : T + s - S;
  for (int s = 0; s < seqs_; ++s) {
    h[meta_.seq_lens + s] = s < S ? step.seq_lens[s] : 1;
    int32_t* row = h + meta_.tables + static_cast<size_t>(s) * mb;
    std::fill_n(row, mb, -1);
    if (s < S) {
      const int32_t* src = step.block_tables.data() + static_cast<size_t>(s) * step.max_blocks;
      std::copy_n(src, std::min(step.max_blocks, mb), row);
    } else {
      row[0] = dummy_block;
    }
  }
}

void CudaOps::plan_step(const KvCache& kv, bool graph) {
  const ModelConfig& c = config_;
  const int D = c.head_dim, bs = kv.block_size;
  // The library picks the kernel: a tiled one, or the warp kernel for head dims below 64 and
  // other block sizes (an unsupported pair is its error).
  const int decode_seqs = decode_ ? seqs_ : decode_seqs_;
  step_decode_ws_ = nullptr;
  if (decode_seqs > 0) {
    // A graph (and its warm-up) serves every context the block table can hold; an eager
    // step its own.
    int max_len = step_max_seq_len_;
    if (graph) {
      max_len = meta_.mb_cap * bs;
    } else if (!decode_) {
      const int32_t* lens = meta_.host.as<int32_t>() + meta_.seq_lens;
      max_len = *std::max_element(lens, lens + decode_seqs);
    }
    cuda::DecodeShape sh{decode_seqs, c.num_heads, c.num_kv_heads, D, bs, max_len};
    sh.kv_format = kv_format();
    cuda::plan_decode_attention(sh, &decode_plan_).throw_if_error();
    step_decode_ws_ = decode_workspace(graph ? bucket_ : 0);
  }
  if (!decode_ && decode_seqs < seqs_) {
    cuda::PrefillShape sh;
    sh.num_seqs = seqs_ - decode_seqs;
    sh.num_tokens = rows_ - decode_seqs;
    sh.num_q_heads = c.num_heads;
    sh.num_kv_heads = c.num_kv_heads;
    sh.head_dim = D;
    sh.block_size = bs;
    sh.kv_format = kv_format();
    cuda::plan_prefill_attention(sh, &prefill_plan_).throw_if_error();
    CEILING_ENSURE(prefill_plan_.workspace_bytes == 0,
                   "CudaOps: the prefill attention plan asks for a workspace");
  }
  if (graph) {  // cuBLASLt planning is host work: do it before the capture
    const int M = rows_;
    const bool tune = options_.gemm_autotune;
    const cuda_impl::FusedLayerWeights& f = weights_.fused.at(0);
    for (const cuda_impl::DeviceLinear* d : {&f.qkv, &f.o, &f.gate_up, &f.down}) {
      const bool bias = d == &f.qkv && c.attention_bias;
      if (d->w.format == cuda::GemvWeightFormat::kFP8 && fp8_gemm_ && M >= kFp8ActRowsMin)
        linear_->lt().plan_fp8(M, d->N, d->K, bias, tune).throw_if_error();
      else
        linear_->plan(M, d->N, d->K, bias, DType::kBF16, tune).throw_if_error();
    }
    linear_->plan(M, c.vocab_size, c.hidden_size, false, DType::kF32, tune).throw_if_error();
  }
}

int CudaOps::begin_op(uint64_t op, int layer, std::initializer_list<const void*> ptrs,
                      bool needs_step, const TensorView& first, RowKind kind, bool qkv_aware) {
  CEILING_ENSURE(uploaded_, "CudaOps: no weights uploaded");
  ++op_count_;
  CEILING_ENSURE(!needs_step || mode_ != Mode::kIdle,
                 "CudaOps: op {} needs a prepared step (call prepare first)", op);
  if (mode_ == Mode::kCapture || mode_ == Mode::kReplay) {
    signature_ = mix(mix(signature_, op), static_cast<uint64_t>(layer + 1));
    for (const void* p : ptrs) signature_ = mix(signature_, reinterpret_cast<uintptr_t>(p));
  }
  const int rows = check_rows(first, kind, "input");
  if (!qkv_aware) touch_qkv(ptrs);  // an op reading or writing a pending q/k/v view
  return rows;
}

int CudaOps::check_rows(const TensorView& t, RowKind kind, const char* what) {
  CEILING_ENSURE(t.ndim >= 1 && t.device == Device::kCuda,
                 "CudaOps: {} must be a device view (got {})", what, t.shape_str());
  if (mode_ == Mode::kIdle) return static_cast<int>(t.dim(0));
  const int real = kind == kTokens ? step_tokens_ : step_logits_;
  CEILING_ENSURE(t.dim(0) == real, "CudaOps: {} has {} rows but the step has {}", what, t.dim(0),
                 real);
  if (!padded_) return real;
  const int rows = kind == kTokens ? rows_ : logit_rows_;
  if (mode_ != Mode::kReplay) {
    const size_t row_bytes = t.dim(0) ? t.nbytes() / static_cast<size_t>(t.dim(0)) : 0;
    CEILING_ENSURE(arena_.contains(t.data, row_bytes * rows),
                   "CudaOps: {} must be the leading rows of an alloc()'d buffer with at least {} "
                   "rows (the decode graph's bucket)",
                   what, rows);
  }
  return rows;
}

void CudaOps::check_step_kv(const KvCache& kv, int layer) const {
  CEILING_ENSURE(layer >= 0 && layer < static_cast<int>(kv.k.size()) && !kv.k.empty() &&
                     kv.k[0].data == step_kv_,
                 "CudaOps: layer {} of a KV cache other than the one given to prepare()", layer);
}

void CudaOps::finish_step(const TensorView& logits) {
  if (mode_ == Mode::kCapture || mode_ == Mode::kReplay) {
    Graph& g = graphs_.at(bucket_);
    if (mode_ == Mode::kCapture) {
      // The step's greedy ids come back with the graph: argmax of every row, copied to pinned.
      cuda::argmax(logits.as<float>(), logit_rows_, static_cast<int>(logits.dim(1)), ids_dev_,
                   stream_)
          .throw_if_error();
      CEILING_CUDA_CHECK(cudaMemcpyAsync(ids_host_.as<int32_t>(), ids_dev_,
                                         logit_rows_ * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                         stream_));
      cudaGraph_t graph = nullptr;
      const cudaError_t e = cudaStreamEndCapture(stream_, &graph);
      mode_ = Mode::kIdle;
      if (e != cudaSuccess) {
        if (graph) cudaGraphDestroy(graph);
        cudaGetLastError();
        fail("CudaOps: capturing the decode graph (bucket {}) failed: {}", bucket_,
             cudaGetErrorString(e));
      }
      cudaGraphExec_t exec = nullptr;
      const cudaError_t ie = cudaGraphInstantiate(&exec, graph, 0);
      cudaGraphDestroy(graph);
      if (ie != cudaSuccess) {
        cudaGetLastError();
        fail("CudaOps: instantiating the decode graph (bucket {}) failed: {}", bucket_,
             cudaGetErrorString(ie));
      }
      g.exec = exec;
      g.signature = signature_;
      ++stats_.graph_captures;
    } else {
      mode_ = Mode::kIdle;
      CEILING_ENSURE(signature_ == g.signature,
                     "CudaOps: this decode step's op calls differ from the graph captured for "
                     "bucket {}",
                     bucket_);
      ++stats_.graph_replays;
    }
    CEILING_CUDA_CHECK(cudaGraphLaunch(g.exec, stream_));
    CEILING_CUDA_CHECK(cudaEventRecord(meta_free_, stream_));
    graph_logits_ = logits.data;
    return;
  }
  if (mode_ == Mode::kEager && bucket_) graphs_[bucket_].warmed = true;  // capture next time
}

void CudaOps::abort_capture() {
  if (mode_ == Mode::kCapture) {
    cudaGraph_t g = nullptr;
    cudaStreamEndCapture(stream_, &g);
    if (g) cudaGraphDestroy(g);
    cudaGetLastError();
  }
  if (mode_ == Mode::kCapture || mode_ == Mode::kReplay) mode_ = Mode::kIdle;
}

void* CudaOps::decode_workspace(int key) {
  const cuda::DecodePlan& p = decode_plan_;
  if (p.workspace_bytes == 0) return nullptr;
  DecodeWorkspace& w = decode_ws_[key];
  bool zero = w.num_seqs != p.shape.num_seqs || w.max_splits != p.max_splits;
  if (w.bytes < p.workspace_bytes) {
    w.ptr = arena_.allocate(p.workspace_bytes);
    w.bytes = p.workspace_bytes;
    stats_.arena_bytes = arena_.bytes_reserved();
    zero = true;
  }
  if (zero) {  // before any capture: prepare() begins it after plan_step()
    cuda::init_decode_workspace(p, w.ptr, stream_).throw_if_error();
    w.num_seqs = p.shape.num_seqs;
    w.max_splits = p.max_splits;
  }
  return w.ptr;
}

void CudaOps::drop_graphs() {
  if (graphs_.empty()) return;
  if (stream_) cudaStreamSynchronize(stream_);
  for (auto& [b, g] : graphs_)
    if (g.exec) cudaGraphExecDestroy(g.exec);
  graphs_.clear();
  graph_logits_ = nullptr;
}

bool CudaOps::graph_replayable() const {
  const auto it = graphs_.find(bucket_);
  return mode_ == Mode::kIdle && padded_ && it != graphs_.end() && it->second.exec;
}

double CudaOps::time_graph_replays(int n) {
  CEILING_ENSURE(n > 0 && graph_replayable(),
                 "CudaOps::time_graph_replays: the last step was not a graph step");
  const auto it = graphs_.find(bucket_);
  cudaEvent_t a = nullptr, b = nullptr;
  CEILING_CUDA_CHECK(cudaEventCreate(&a));
  CEILING_CUDA_CHECK(cudaEventCreate(&b));
  CEILING_CUDA_CHECK(cudaEventRecord(a, stream_));
  for (int i = 0; i < n; ++i) CEILING_CUDA_CHECK(cudaGraphLaunch(it->second.exec, stream_));
  CEILING_CUDA_CHECK(cudaEventRecord(b, stream_));
  CEILING_CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  CEILING_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  CEILING_CUDA_CHECK(cudaEventRecord(meta_free_, stream_));
  return ms / n;
}

void CudaOps::set_cuda_graphs(bool enabled) {
  options_.cuda_graphs = enabled;
  if (!enabled) drop_graphs();
}

}  // namespace ceiling::engine
