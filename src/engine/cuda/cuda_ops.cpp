// CudaOps: construction and the layer ops (each a launcher call; in a replayed graph step they
// only check that the call matches the captured one). Memory and upload are in
// cuda_ops_memory.cpp, step plumbing and graphs in cuda_ops_step.cpp, sampling in
// cuda_sampler.cpp.
#include "engine/cuda/cuda_ops.h"

#include <cmath>

#include "core/check.h"
#include "engine/cuda/engine_kernels.h"
#include "engine/cuda/sampler_state.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gemm_int4.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/linear.h"
#include "kernels/cuda/quantize_act.h"
#include "kernels/cuda/rms_norm.h"
#include "kernels/cuda/rope_kv.h"
#include "kernels/cuda/silu_mul.h"

namespace ceiling::engine {

using cuda_impl::bf16;

namespace {
enum Op : uint64_t {
  kEmbed = 1,
  kNorm,
  kQkv,
  kQkNorm,
  kRope,
  kAttn,
  kOProj,
  kGateUp,
  kSilu,
  kDown,
  kGather,
  kLmHead,
  kNormQkv,
  kNormQkvRope,
  kOProjResidual,
  kNormGateUpSilu,
  kDownResidual,
  kAllReduce,
  kJoinLogits
};
}  // namespace

CudaOps::CudaOps(CudaOpsOptions options) : options_(std::move(options)) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    cudaGetLastError();
    fail("device 'cuda': no usable CUDA device ({})",
         e != cudaSuccess ? cudaGetErrorString(e) : "none found");
  }
  CEILING_ENSURE(options_.device_index >= 0 && options_.device_index < n,
                 "device 'cuda': device index {} out of range (this machine has {} GPUs)",
                 options_.device_index, n);
  CEILING_ENSURE(options_.max_graph_batch >= 1, "cuda: max_graph_batch must be >= 1 (got {})",
                 options_.max_graph_batch);
  CEILING_CUDA_CHECK(cudaSetDevice(options_.device_index));
  CEILING_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CEILING_CUDA_CHECK(cudaEventCreateWithFlags(&meta_free_, cudaEventDisableTiming));
  linear_ = std::make_unique<cuda::Linear>(cuda::current_crossover_table());
}

CudaOps::~CudaOps() {
  abort_capture();
  drop_graphs();
  if (stream_) cudaStreamSynchronize(stream_);
  if (meta_free_) cudaEventDestroy(meta_free_);
  sampler_.reset();
  linear_.reset();
  if (stream_) cudaStreamDestroy(stream_);
}

std::unique_ptr<Ops> make_cuda_ops(const OpsOptions& options) {
  CudaOpsOptions o;
  o.device_index = options.device_index;
  o.cuda_graphs = options.cuda_graphs;
  o.fp8_kv_cache = options.fp8_kv_cache;
  o.gemm_autotune = options.gemm_autotune;
  o.upload_progress = options.upload_progress;
  return std::make_unique<CudaOps>(std::move(o));
}

nlohmann::json CudaOps::gemm_tune_log() const {
  nlohmann::json rows = nlohmann::json::array();
  if (!linear_) return rows;
  for (const cuda::LtGemm::TuneRecord& t : linear_->lt().tune_log())
    rows.push_back({{"M", t.M},
                    {"N", t.N},
                    {"K", t.K},
                    {"candidates", t.candidates},
                    {"chosen", t.chosen},
                    {"algo_id", t.algo_id},
                    {"tile_id", t.tile_id},
                    {"split_k", t.split_k},
                    {"first_us", t.first_us},
                    {"best_us", t.best_us}});
  return rows;
}

// ---- helpers --------------------------------------------------------------------------------

bf16* CudaOps::bf16_ptr(const TensorView& t, const char* what) {
  CEILING_ENSURE(t.dtype == DType::kBF16 && t.device == Device::kCuda && t.is_contiguous(),
                 "CudaOps: {} must be a contiguous bf16 device view (got {} {})", what,
                 dtype_name(t.dtype), t.shape_str());
  return static_cast<bf16*>(t.data);
}

const cuda_impl::FusedLayerWeights& CudaOps::fused(int layer) const {
  CEILING_ENSURE(uploaded_ && layer >= 0 && layer < config_.num_layers, "CudaOps: no layer {}",
                 layer);
  return weights_.fused[layer];
}

namespace {

// Rows of x up to which fp8 / int4 weights take the quantized GEMV (gemv_quant.h: the register
// kernel at M = 1, the tensor-core kernel above); past the GEMV's limit they are dequantized to
// bf16 for cuda::Linear (cuBLASLt), a full weight image written and read again per call — fp8
// takes W8A8 there instead, int4 gemm_int4 up to kGemmInt4MaxM rows (gemm_int4.h).
constexpr int kQuantGemvMaxM = cuda::kGemvMaxM;
static_assert(kQuantGemvMaxM + 1 == kFp8ActRowsMin,
              "W8A8 starts where the quantized GEMV stops (model/weights.h)");

// int4 gate/up at decode batches up to kGemmInt4SiluMaxM rows (gemm_int4.h) runs gemm_int4 with
// its SiLU epilogue after a separate RMSNorm instead of the GEMV with both fused.
bool int4_silu_gemm(int rows, const cuda_impl::DeviceLinear& w) {
  return w.quantized() && w.w.format == cuda::GemvWeightFormat::kInt4 &&
         rows <= cuda::kGemmInt4SiluMaxM && w.N % 2 == 0 &&
         cuda::gemm_int4_unsupported(w.w, w.N, w.K).empty();
}

cuda_impl::DeviceLinear dense_linear(const TensorView& w) {
  cuda_impl::DeviceLinear d;
  d.w.data = w.data;
  d.N = static_cast<int>(w.dim(0));
  d.K = static_cast<int>(w.dim(1));
  return d;
}

}  // namespace

void CudaOps::linear(const TensorView& x, const cuda_impl::DeviceLinear& w, const TensorView* bias,
                     void* out, DType out_dtype, int rows, bool accumulate) {
  CEILING_ENSURE(x.ndim == 2 && x.dim(1) == w.K,
                 "CudaOps: linear input {} does not match weight [{}, {}]", x.shape_str(), w.N,
                 w.K);
  if (rows == 0) return;  // e.g. a prefill chunk that wants no logits
  const bf16* b = bias ? static_cast<const bf16*>(bias->data) : nullptr;
  const void* wd = w.w.data;
  const bf16* xin = bf16_ptr(x, "linear input");
  if (w.quantized()) {
    CEILING_ENSURE(out_dtype == DType::kBF16, "CudaOps: quantized projections write bf16");
    if (rows <= kQuantGemvMaxM) {
      cuda::GemvFusion f;
      f.accumulate = accumulate;
      cuda::gemv_fused_quant(f, xin, w.w, b, static_cast<bf16*>(out), rows, w.N, w.K, stream_)
          .throw_if_error();
      return;
    }
    if (w.w.format == cuda::GemvWeightFormat::kFP8) {  // W8A8 (model/weights.h)
      CEILING_ENSURE(rows <= act_rows_, "CudaOps: W8A8 input of {} rows past the {} prepared", rows,
                     act_rows_);
      const bool ready =
          prequant_.x == xin && prequant_.rows == rows && prequant_.op + 1 == op_count_;
      prequant_ = {};
      if (!ready)
        cuda::quantize_rows_fp8(xin, rows, w.K, act_q_, act_scale_, stream_).throw_if_error();
      if (fp8_gemm_) {
        linear_->lt()
            .run_fp8(act_q_, act_scale_, static_cast<const uint8_t*>(w.w.data), w.w.row_scale, b,
                     static_cast<bf16*>(out), rows, w.N, w.K, stream_, accumulate)
            .throw_if_error();
        return;
      }
      cuda::dequantize_rows_fp8(act_q_, act_scale_, rows, w.K, act_bf16_, stream_).throw_if_error();
      xin = act_bf16_;
    } else if (rows <= cuda::kGemmInt4MaxM && cuda::gemm_int4_unsupported(w.w, w.N, w.K).empty()) {
      cuda::gemm_int4(xin, w.w, b, static_cast<bf16*>(out), rows, w.N, w.K, accumulate, stream_)
          .throw_if_error();
      return;
    }
    cuda::dequantize_weights(w.w, w.N, w.K, static_cast<bf16*>(weights_.dequant_scratch.get()),
                             stream_)
        .throw_if_error();
    wd = weights_.dequant_scratch.get();
  }
  linear_
      ->run(xin, static_cast<const bf16*>(wd), b, out, out_dtype, rows, w.N, w.K, stream_,
            accumulate)
      .throw_if_error();
}

bool CudaOps::w8a8_input(int rows, const cuda_impl::DeviceLinear& w) const {
  return w.quantized() && w.w.format == cuda::GemvWeightFormat::kFP8 && rows > kQuantGemvMaxM &&
         rows <= act_rows_;
}

bool CudaOps::gemv_fuses(int rows, const cuda_impl::DeviceLinear& w, const void* x) const {
  if (w.quantized()) return rows <= kQuantGemvMaxM && cuda::gemv_fused_supported(w.K, x, w.w.data);
  return linear_->path(rows, w.N, w.K) == cuda::LinearPath::kGemv &&
         cuda::gemv_fused_supported(w.K, x, w.w.data);
}

void CudaOps::gemv_fused(const cuda::GemvFusion& f, const TensorView& x,
                         const cuda_impl::DeviceLinear& w, const TensorView* bias,
                         const TensorView& out, int rows) {
  const bf16* b = bias ? static_cast<const bf16*>(bias->data) : nullptr;
  const Status st =
      w.quantized()
          ? cuda::gemv_fused_quant(f, bf16_ptr(x, "GEMV input"), w.w, b,
                                   static_cast<bf16*>(out.data), rows, w.N, w.K, stream_)
          : cuda::gemv_fused(f, bf16_ptr(x, "GEMV input"), static_cast<const bf16*>(w.w.data), b,
                             static_cast<bf16*>(out.data), rows, w.N, w.K, stream_);
  st.throw_if_error();
}

bool CudaOps::pending_is(const void* q, const void* k, const void* v) const {
  return pending_.q == q && pending_.k == k && pending_.v == v;
}

void CudaOps::touch_qkv(std::initializer_list<const void*> ptrs) {
  if (!pending_.valid) return;
  for (const void* p : ptrs)
    if (p && (p == pending_.q || p == pending_.k || p == pending_.v)) return materialize_qkv();
}

void CudaOps::materialize_qkv() {
  if (!pending_.valid) return;
  pending_.valid = false;
  if (mode_ == Mode::kCapture || mode_ == Mode::kReplay) signature_ = signature_ * 31 + 0x5917;
  if (!launching()) return;
  cuda_impl::split_qkv(qkv_, pending_.rows, config_.q_dim(), config_.kv_dim(),
                       static_cast<bf16*>(pending_.q), static_cast<bf16*>(pending_.k),
                       static_cast<bf16*>(pending_.v), stream_)
      .throw_if_error();
}

// ---- layer ops ------------------------------------------------------------------------------

void CudaOps::embedding(const TensorView& out) {
  const int rows = begin_op(kEmbed, -1, {out.data}, true, out, kTokens);
  if (!launching()) return;
  const TensorView& e = weights().embed;
  cuda::embedding(static_cast<const bf16*>(e.data), e.dim(0), config_.hidden_size,
                  dev<int32_t>(meta_.tokens), rows, bf16_ptr(out, "embedding output"), stream_)
      .throw_if_error();
}

void CudaOps::rms_norm(const TensorView& x, const TensorView* residual, const TensorView& weight,
                       const TensorView& out) {
  rms_norm_for(x, residual, weight, out, nullptr);
}

void CudaOps::rms_norm_for(const TensorView& x, const TensorView* residual,
                           const TensorView& weight, const TensorView& out,
                           const cuda_impl::DeviceLinear* next) {
  const int rows =
      begin_op(kNorm, -1, {x.data, residual ? residual->data : nullptr, weight.data, out.data},
               false, x, kTokens);
  if (residual) check_rows(*residual, kTokens, "rms_norm residual");
  check_rows(out, kTokens, "rms_norm output");
  if (!launching()) return;
  const bf16* xp = bf16_ptr(x, "rms_norm input");
  const bf16* wp = bf16_ptr(weight, "rms_norm weight");
  bf16* o = bf16_ptr(out, "rms_norm output");
  const int H = static_cast<int>(x.dim(1));
  const float eps = static_cast<float>(config().rms_norm_eps);
  if (next && !residual && H == next->K && w8a8_input(rows, *next)) {
    cuda::rms_norm_fp8(xp, wp, rows, H, eps, o, act_q_, act_scale_, stream_).throw_if_error();
    prequant_ = {o, rows, op_count_};
    return;
  }
  cuda::rms_norm(xp, residual ? bf16_ptr(*residual, "residual") : nullptr, wp, rows, H, eps, o,
                 stream_)
      .throw_if_error();
}

void CudaOps::qkv_proj(int l, const TensorView& x, const TensorView& q, const TensorView& k,
                       const TensorView& v) {
  qkv_proj_into_pending(l, x, nullptr, q, k, v, nullptr);
}

void CudaOps::qkv_proj_into_pending(int l, const TensorView& x, const cuda::GemvFusion* fusion,
                                    const TensorView& q, const TensorView& k, const TensorView& v,
                                    KvCache* kv) {
  const uint64_t op = kv ? kNormQkvRope : fusion ? kNormQkv : kQkv;
  const int rows =
      begin_op(op, l, {x.data, q.data, k.data, v.data}, kv != nullptr, x, kTokens, true);
  check_rows(q, kTokens, "q");
  check_rows(k, kTokens, "k");
  check_rows(v, kTokens, "v");
  if (kv) check_step_kv(*kv, l);
  const cuda_impl::FusedLayerWeights& f = fused(l);
  // Other views than the pending ones would lose their values when qkv_ is overwritten.
  if (pending_.valid && !pending_is(q.data, k.data, v.data)) materialize_qkv();
  pending_.valid = false;
  if (launching()) {
    ensure_qkv(rows);
    const TensorView* bias = f.qkv_bias.data ? &f.qkv_bias : nullptr;
    if (fusion) {
      cuda::GemvFusion fu = *fusion;
      if (kv) {  // RoPE + KV write as the epilogue: q rotated into qkv_, K/V into the cache
        fu.rope.positions = dev<int32_t>(meta_.positions);
        fu.rope.slot_mapping = dev<int32_t>(meta_.slots);
        fu.rope.inv_freq = inv_freq_;
        fu.rope.k_cache = static_cast<bf16*>(kv->k[l].data);
        fu.rope.v_cache = static_cast<bf16*>(kv->v[l].data);
        fu.rope.num_blocks = kv->num_blocks + 1;  // the dummy block is addressable (slot -1)
        fu.rope.block_size = kv->block_size;
        fu.rope.Hq = config_.num_heads;
        fu.rope.Hkv = config_.num_kv_heads;
        fu.rope.D = config_.head_dim;
      }
      gemv_fused(fu, x, f.qkv, bias, TensorView(qkv_, DType::kBF16, {rows, f.qkv.N}, Device::kCuda),
                 rows);
    } else {
      linear(x, f.qkv, bias, qkv_, DType::kBF16, rows);
    }
  }
  // q, k, v stay in qkv_ until an op needs them as separate views (materialize_qkv). After the
  // RoPE epilogue q is rotated there and the k/v columns are unwritten (their values are in the
  // cache), as norm_qkv_rope's contract allows.
  pending_ = {q.data, k.data, v.data, rows, true};
}

// ---- the layer's steps: at decode sizes the norm runs as the GEMV's prologue, SiLU-and-multiply
// as the gate/up GEMV's epilogue and the residual add as the o / down GEMV's (gemv_fused);
// otherwise the single ops in sequence, the residual add as cuBLASLt's beta = 1.

void CudaOps::norm_qkv_rope(int l, const TensorView& residual, const TensorView& h,
                            const TensorView& q, const TensorView& k, const TensorView& v,
                            KvCache& kv) {
  const TensorView& norm = weights().layers.at(l).input_norm;
  const int rows = check_rows(residual, kTokens, "residual");
  if (!gemv_fuses(rows, fused(l).qkv, residual.data)) {
    rms_norm_for(residual, nullptr, norm, h, &fused(l).qkv);
    qkv_proj(l, h, q, k, v);
    if (config_.qk_norm) qk_norm(l, q, k);
    rope_kv_write(l, q, k, v, kv);
    return;
  }
  cuda::GemvFusion f;
  const TensorView* in = &residual;
  if (cuda::gemv_norm_input_pays(rows)) {
    f.input = cuda::GemvInput::kRmsNorm;
    f.norm_weight = static_cast<const bf16*>(norm.data);
    f.eps = static_cast<float>(config_.rms_norm_eps);
  } else {
    rms_norm(residual, nullptr, norm, h);
    in = &h;
  }
  // Not fused: the per-head norm needs all of a head; the epilogue writes a bf16 cache only.
  if (config_.qk_norm || options_.fp8_kv_cache) {
    qkv_proj_into_pending(l, *in, &f, q, k, v, nullptr);
    if (config_.qk_norm) qk_norm(l, q, k);
    rope_kv_write(l, q, k, v, kv);
    return;
  }
  qkv_proj_into_pending(l, *in, &f, q, k, v, &kv);
}
void CudaOps::o_proj_residual(int l, const TensorView& attn, const TensorView& /*scratch*/,
                              const TensorView& residual, ResidualUpdate update) {
  const int rows = begin_op(kOProjResidual, l, {attn.data, residual.data}, false, attn, kTokens);
  check_rows(residual, kTokens, "residual");
  if (launching())
    linear(attn, fused(l).o, nullptr, bf16_ptr(residual, "residual"), DType::kBF16, rows,
           update == ResidualUpdate::kAdd);
}

void CudaOps::mlp_residual(int l, const TensorView& residual, const TensorView& h,
                           const TensorView& gate_up, const TensorView& act,
                           const TensorView& /*scratch*/, ResidualUpdate update) {
  const TensorView& norm = weights().layers.at(l).post_attn_norm;
  const cuda_impl::DeviceLinear& wgu = fused(l).gate_up;
  const int rows = check_rows(residual, kTokens, "residual");
  if (gemv_fuses(rows, wgu, residual.data)) {
    // One GEMV from the residual (or, above one row, from h = RMSNorm(residual)) to silu(gate) ·
    // up: gate and up rows of one index in the same CTA, SiLU-and-multiply epilogue. gate_up
    // (and h, with the norm as the prologue) stay unwritten. int4: gemm_int4's SiLU pairs from h.
    const bool int4_gemm = int4_silu_gemm(rows, wgu);
    const bool norm_in = !int4_gemm && cuda::gemv_norm_input_pays(rows);
    if (!norm_in) rms_norm(residual, nullptr, norm, h);
    const TensorView& in = norm_in ? residual : h;
    begin_op(kNormGateUpSilu, l, {in.data, act.data}, false, in, kTokens);
    check_rows(act, kTokens, "act");
    if (launching() && int4_gemm) {
      cuda::gemm_int4(bf16_ptr(in, "gate/up input"), wgu.w, nullptr, bf16_ptr(act, "act"), rows,
                      wgu.N, wgu.K, false, stream_, /*silu_pairs=*/true)
          .throw_if_error();
    } else if (launching()) {
      cuda::GemvFusion f;
      if (norm_in) {
        f.input = cuda::GemvInput::kRmsNorm;
        f.norm_weight = static_cast<const bf16*>(norm.data);
        f.eps = static_cast<float>(config_.rms_norm_eps);
      }
      f.silu_pairs = true;
      gemv_fused(f, in, wgu, nullptr, act, rows);
    }
  } else {
    rms_norm_for(residual, nullptr, norm, h, &wgu);
    gate_up_proj(l, h, gate_up);
    silu_mul_for(gate_up, act, &fused(l).down);
  }
  begin_op(kDownResidual, l, {act.data, residual.data}, false, act, kTokens);
  if (launching())
    linear(act, fused(l).down, nullptr, bf16_ptr(residual, "residual"), DType::kBF16, rows,
           update == ResidualUpdate::kAdd);
}

void CudaOps::qk_norm(int l, const TensorView& q, const TensorView& k) {
  const int rows = begin_op(kQkNorm, l, {q.data, k.data}, false, q, kTokens, true);
  check_rows(k, kTokens, "k");
  const LayerWeights& w = weights().layers.at(l);
  CEILING_ENSURE(w.q_norm.data && w.k_norm.data, "CudaOps::qk_norm: the model has no q/k norm");
  const ModelConfig& c = config_;
  const bool fusedq = pending_.valid && pending_.q == q.data && pending_.k == k.data;
  if (!fusedq) touch_qkv({q.data, k.data});
  if (!launching()) return;
  const float eps = static_cast<float>(c.rms_norm_eps);
  // In qkv_ the heads of a token are (Q + 2·KV) elements apart from the next token's.
  const int64_t row = c.q_dim() + 2 * c.kv_dim();
  bf16* qp = fusedq ? qkv_ : bf16_ptr(q, "q");
  bf16* kp = fusedq ? qkv_ + c.q_dim() : bf16_ptr(k, "k");
  cuda::rms_norm_heads(qp, fusedq ? row : c.q_dim(), rows, c.num_heads, c.head_dim,
                       static_cast<const bf16*>(w.q_norm.data), eps, stream_)
      .throw_if_error();
  cuda::rms_norm_heads(kp, fusedq ? row : c.kv_dim(), rows, c.num_kv_heads, c.head_dim,
                       static_cast<const bf16*>(w.k_norm.data), eps, stream_)
      .throw_if_error();
}

void CudaOps::rope_kv_write(int l, const TensorView& q, const TensorView& k, const TensorView& v,
                            KvCache& kv) {
  const int rows = begin_op(kRope, l, {q.data, k.data, v.data}, true, q, kTokens, true);
  check_rows(k, kTokens, "k");
  check_rows(v, kTokens, "v");
  check_step_kv(kv, l);
  const bool fusedq = pending_.valid && pending_is(q.data, k.data, v.data);
  if (!fusedq) touch_qkv({q.data, k.data, v.data});
  if (!launching()) return;
  const ModelConfig& c = config_;
  cuda::RopeKvArgs a;
  if (fusedq) {  // straight from the fused projection output; q rotated in place there
    a.q = qkv_;
    a.k = qkv_ + c.q_dim();
    a.v = qkv_ + c.q_dim() + c.kv_dim();
    a.q_stride = a.k_stride = a.v_stride = c.q_dim() + 2 * c.kv_dim();
  } else {
    a.q = bf16_ptr(q, "q");
    a.k = bf16_ptr(k, "k");
    a.v = bf16_ptr(v, "v");
    a.q_stride = c.q_dim();
    a.k_stride = a.v_stride = c.kv_dim();
  }
  a.positions = dev<int32_t>(meta_.positions);
  a.slot_mapping = dev<int32_t>(meta_.slots);
  a.inv_freq = inv_freq_;
  a.k_cache = kv.k[l].data;
  a.v_cache = kv.v[l].data;
  a.kv_format = kv_format();
  if (options_.fp8_kv_cache) {
    a.k_scale_inv = 1.0f / weights_.views.layers[l].k_scale;
    a.v_scale_inv = 1.0f / weights_.views.layers[l].v_scale;
  }
  a.num_blocks = kv.num_blocks + 1;  // the dummy block is addressable (never written: slot -1)
  a.block_size = kv.block_size;
  a.norm_eps = static_cast<float>(c.rms_norm_eps);
  a.T = rows;
  a.Hq = c.num_heads;
  a.Hkv = c.num_kv_heads;
  a.D = c.head_dim;
  cuda::rope_kv_write(a, stream_).throw_if_error();
}

void CudaOps::attention(int l, const TensorView& q, const KvCache& kv, const TensorView& out) {
  const int rows = begin_op(kAttn, l, {q.data, out.data}, true, q, kTokens, true);
  check_rows(out, kTokens, "attention output");
  check_step_kv(kv, l);
  // q is read in place from the fused QKV output (its rows q_dim + 2·kv_dim apart).
  const bool fusedq = pending_.valid && pending_.q == q.data;
  if (!fusedq) touch_qkv({q.data, out.data});
  if (!launching()) return;
  const ModelConfig& c = config_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const bf16* qp = fusedq ? qkv_ : bf16_ptr(q, "q");
  const int64_t q_stride = fusedq ? c.q_dim() + 2 * c.kv_dim() : c.q_dim();
  bf16* op = bf16_ptr(out, "attention output");
  cuda::PagedKvDevice pk{kv.k[l].data,  kv.v[l].data,   kv.num_blocks + 1,
                         kv.block_size, c.num_kv_heads, c.head_dim};
  pk.format = kv_format();
  if (options_.fp8_kv_cache) {
    pk.k_scale = weights_.views.layers[l].k_scale;
    pk.v_scale = weights_.views.layers[l].v_scale;
  }
  // A decode step: every sequence. Any other step: its leading one-token sequences (decodes)
  // through the decode kernel, the rest through the prefill kernel (rows are absolute in q and
  // out; the prefill batch's query_start starts at decode_seqs_).
  const int nd = decode_ ? seqs_ : decode_seqs_;
  if (nd > 0)
    cuda::run_decode_attention(decode_plan_, qp, q_stride, pk, dev<int32_t>(meta_.seq_lens),
                               dev<int32_t>(meta_.tables), meta_.mb_cap, scale, op, step_decode_ws_,
                               stream_)
        .throw_if_error();
  if (nd < seqs_) {
    const size_t mb = static_cast<size_t>(meta_.mb_cap);
    const cuda::AttnBatchDevice b{seqs_ - nd,
                                  rows - nd,
                                  dev<int32_t>(meta_.query_start + nd),
                                  dev<int32_t>(meta_.seq_lens + nd),
                                  dev<int32_t>(meta_.tables + nd * mb),
                                  meta_.mb_cap};
    cuda::run_prefill_attention(prefill_plan_, qp, q_stride, pk, b, scale, op, nullptr, stream_)
        .throw_if_error();
  }
}

void CudaOps::o_proj(int l, const TensorView& attn, const TensorView& out) {
  const int rows = begin_op(kOProj, l, {attn.data, out.data}, false, attn, kTokens);
  check_rows(out, kTokens, "o_proj output");
  if (launching())
    linear(attn, fused(l).o, nullptr, bf16_ptr(out, "o_proj output"), DType::kBF16, rows);
}

void CudaOps::all_reduce_sum(const TensorView& x) {
  Communicator* comm = communicator();
  CEILING_ENSURE(comm != nullptr, "CudaOps: all_reduce_sum without a communicator");
  const int rows = begin_op(kAllReduce, -1, {x.data}, false, x, kTokens);
  if (!launching()) return;  // a replay: the graph holds the collective
  TensorView v = x;          // a graph step reduces all B rows of the bucket
  v.shape[0] = rows;
  comm->all_reduce_sum(v, stream_);
}

void CudaOps::gate_up_proj(int l, const TensorView& x, const TensorView& gate_up) {
  const int rows = begin_op(kGateUp, l, {x.data, gate_up.data}, false, x, kTokens);
  check_rows(gate_up, kTokens, "gate_up");
  if (launching())
    linear(x, fused(l).gate_up, nullptr, bf16_ptr(gate_up, "gate_up"), DType::kBF16, rows);
}

void CudaOps::silu_mul(const TensorView& gate_up, const TensorView& out) {
  silu_mul_for(gate_up, out, nullptr);
}

void CudaOps::silu_mul_for(const TensorView& gate_up, const TensorView& out,
                           const cuda_impl::DeviceLinear* next) {
  const int rows = begin_op(kSilu, -1, {gate_up.data, out.data}, false, gate_up, kTokens);
  check_rows(out, kTokens, "silu_mul output");
  if (!launching()) return;
  const int I = config().intermediate_size;
  const bf16* g = bf16_ptr(gate_up, "gate_up");
  bf16* o = bf16_ptr(out, "silu_mul output");
  if (next && I == next->K && w8a8_input(rows, *next)) {
    cuda::silu_mul_fp8(g, rows, I, o, act_q_, act_scale_, stream_).throw_if_error();
    prequant_ = {o, rows, op_count_};
    return;
  }
  cuda::silu_mul(g, rows, I, o, stream_).throw_if_error();
}

void CudaOps::down_proj(int l, const TensorView& act, const TensorView& out) {
  const int rows = begin_op(kDown, l, {act.data, out.data}, false, act, kTokens);
  check_rows(out, kTokens, "down_proj output");
  if (launching())
    linear(act, fused(l).down, nullptr, bf16_ptr(out, "down_proj output"), DType::kBF16, rows);
}

void CudaOps::gather_rows(const TensorView& x, const TensorView& out) {
  const int in_rows = begin_op(kGather, -1, {x.data, out.data}, true, x, kTokens);
  const int out_rows = check_rows(out, kLogitsRows, "gather output");
  if (!launching()) return;
  cuda::embedding(bf16_ptr(x, "gather input"), in_rows, static_cast<int>(x.dim(1)),
                  dev<int32_t>(meta_.logits_rows), out_rows, bf16_ptr(out, "gather output"),
                  stream_)
      .throw_if_error();
}

void CudaOps::lm_head(const TensorView& x, const TensorView& logits) {
  const int rows = begin_op(kLmHead, -1, {x.data, logits.data}, false, x, kLogitsRows);
  check_rows(logits, kLogitsRows, "logits");
  CEILING_ENSURE(logits.dtype == DType::kF32 && logits.device == Device::kCuda &&
                     logits.is_contiguous() && logits.dim(1) == config().vocab_size,
                 "CudaOps::lm_head: logits must be a contiguous f32 device view [R, V] (got {} {})",
                 dtype_name(logits.dtype), logits.shape_str());
  if (launching())
    linear(x, dense_linear(weights().lm_head), nullptr, logits.data, DType::kF32, rows);
  const Communicator* comm = communicator();
  if (comm == nullptr || comm->world() == 1) finish_step(logits);  // else join_logits does
}

void CudaOps::join_logits(const TensorView& local, std::span<const VocabPart> parts,
                          const TensorView& gathered, const TensorView& full) {
  Communicator* comm = communicator();
  CEILING_ENSURE(comm != nullptr && comm->world() == static_cast<int>(parts.size()),
                 "CudaOps::join_logits: {} parts without a communicator of as many ranks",
                 parts.size());
  const int rows =
      begin_op(kJoinLogits, -1, {local.data, gathered.data, full.data}, false, local, kLogitsRows);
  if (full.data) check_rows(full, kLogitsRows, "joined logits");
  // A graph step joins all B rows of the bucket: rank r's rows sit at r · B · Vp.
  const int64_t Vp = local.dim(1), N = static_cast<int64_t>(parts.size());
  CEILING_ENSURE(gathered.numel() >= N * rows * Vp,
                 "CudaOps::join_logits: gather buffer of {} floats for {} x {} x {}",
                 gathered.numel(), N, rows, Vp);
  if (launching() && rows > 0) {
    float* g = gathered.as<float>();
    comm->all_gather(TensorView(local.data, DType::kF32, {rows * Vp}, Device::kCuda),
                     TensorView(g, DType::kF32, {N * rows * Vp}, Device::kCuda), stream_);
    if (full.data)
      for (int64_t r = 0; r < N; ++r) {
        const VocabPart& p = parts[static_cast<size_t>(r)];
        CEILING_ENSURE(p.begin >= 0 && p.valid <= Vp && p.begin + p.valid <= full.dim(1),
                       "CudaOps::join_logits: part {} ({} columns at {}) does not fit", r, p.valid,
                       p.begin);
        CEILING_CUDA_CHECK(cudaMemcpy2DAsync(
            full.as<float>() + p.begin, full.dim(1) * sizeof(float), g + r * rows * Vp,
            Vp * sizeof(float), p.valid * sizeof(float), rows, cudaMemcpyDeviceToDevice, stream_));
      }
  }
  finish_step(full.data ? full : local);
}

}  // namespace ceiling::engine
