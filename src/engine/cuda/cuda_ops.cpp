// CudaOps: construction, memory, upload, and the layer ops (each a launcher call; in a replayed
// graph step they only check that the call matches the captured one). Step plumbing and graphs
// are in cuda_ops_step.cpp, sampling in cuda_sampler.cpp.
#include "engine/cuda/cuda_ops.h"

#include <chrono>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "engine/cuda/engine_kernels.h"
#include "engine/cuda/sampler_state.h"
#include "kernels/cpu/ref.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/rms_norm.h"
#include "kernels/cuda/rope_kv.h"
#include "kernels/cuda/silu_mul.h"

namespace ceiling::engine {

using cuda_impl::bf16;

namespace {
enum Op : uint64_t {
  kEmbed = 1, kNorm, kQkv, kQkNorm, kRope, kAttn, kOProj, kGateUp, kSilu, kDown, kGather, kLmHead
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
  linear_ = std::make_unique<cuda::Linear>();
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
  o.upload_progress = options.upload_progress;
  return std::make_unique<CudaOps>(std::move(o));
}

// ---- memory -------------------------------------------------------------------------------

TensorView CudaOps::alloc(DType dtype, std::initializer_list<int64_t> shape) {
  CEILING_ENSURE(mode_ != Mode::kCapture && mode_ != Mode::kReplay,
                 "CudaOps::alloc: not allowed inside a graph step");
  TensorView t(nullptr, dtype, shape, Device::kCuda);
  for (int i = 0; i < t.ndim; ++i)
    CEILING_ENSURE(t.shape[i] >= 0, "CudaOps::alloc: negative size {}", t.shape_str());
  t.data = arena_.allocate(t.nbytes());
  // 0xFF bytes: NaN in bf16/f16/f32, so a read before a write shows.
  CEILING_CUDA_CHECK(cudaMemsetAsync(t.data, 0xFF, t.nbytes(), stream_));
  if (t.ndim >= 2) row_cap_ = std::min(row_cap_, t.shape[0]);
  stats_.arena_bytes = arena_.bytes_reserved();
  return t;
}

const ModelWeights& CudaOps::upload(const ModelConfig& config, const ModelWeights& host) {
  CEILING_ENSURE(!uploaded_, "CudaOps::upload: weights were already uploaded");
  check_weights(config, host, Device::kCpu);
  const int D = config.head_dim;
  CEILING_ENSURE(D == 64 || D == 128 || cuda_impl::fallback_attention_supports(D),
                 "cuda: head_dim {} not supported (8, 16, 32, 64, 128)", D);
  const auto t0 = std::chrono::steady_clock::now();
  weights_ = cuda_impl::upload_weights(config, host, stream_, options_.upload_progress);
  stats_.upload_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  stats_.upload_bytes = weights_.source_bytes;
  stats_.weight_bytes = weights_.storage.bytes();
  config_ = config;
  const std::vector<float> inv = cpu::rope_inv_freq(config);
  inv_freq_ = static_cast<float*>(arena_.allocate(inv.size() * sizeof(float)));
  CEILING_CUDA_CHECK(cudaMemcpy(inv_freq_, inv.data(), inv.size() * sizeof(float),
                                cudaMemcpyHostToDevice));
  fallback_rope_ = D % 16 != 0;
  uploaded_ = true;
  return weights_.views;
}

const ModelWeights& CudaOps::weights() const {
  CEILING_ENSURE(uploaded_, "CudaOps: no weights uploaded");
  return weights_.views;
}

const ModelConfig& CudaOps::config() const {
  CEILING_ENSURE(uploaded_, "CudaOps: no weights uploaded");
  return config_;
}

KvCache CudaOps::alloc_kv_cache(int num_blocks, int block_size) {
  const ModelConfig& c = config();
  CEILING_ENSURE(num_blocks > 0 && block_size > 0,
                 "KV cache: num_blocks {} and block_size {} must be positive", num_blocks,
                 block_size);
  // Per layer K and V each [num_blocks + 1, Hkv, block_size, D]: the extra block is the dummy.
  const size_t per = static_cast<size_t>(num_blocks + 1) * c.num_kv_heads * block_size *
                     c.head_dim * sizeof(bf16);
  KvAlloc a;
  a.mem = cuda_impl::DeviceBuffer(per * 2 * c.num_layers);
  CEILING_CUDA_CHECK(cudaMemsetAsync(a.mem.get(), 0, a.mem.bytes(), stream_));
  KvCache kv{c.num_layers, num_blocks, block_size, c.num_kv_heads, c.head_dim, DType::kBF16, {},
             {}};
  char* base = static_cast<char*>(a.mem.get());
  for (int l = 0; l < c.num_layers; ++l) {
    for (int which = 0; which < 2; ++which) {
      TensorView t(base + per * (2 * l + which), DType::kBF16,
                   {num_blocks, c.num_kv_heads, block_size, c.head_dim}, Device::kCuda);
      (which ? kv.v : kv.k).push_back(t);
    }
  }
  a.k0 = kv.k[0].data;
  kv_allocs_.push_back(std::move(a));
  CEILING_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return kv;
}

void CudaOps::to_host(const TensorView& src, float* dst) {
  CEILING_ENSURE(mode_ != Mode::kCapture && mode_ != Mode::kReplay,
                 "CudaOps::to_host: not allowed inside a graph step (results exist after lm_head)");
  CEILING_ENSURE(src.device == Device::kCuda && src.is_contiguous(),
                 "CudaOps::to_host: needs a contiguous device view (got {})", src.shape_str());
  const size_t n = static_cast<size_t>(src.numel());
  if (src.dtype == DType::kF32) {
    CEILING_CUDA_CHECK(cudaMemcpyAsync(dst, src.data, n * 4, cudaMemcpyDeviceToHost, stream_));
    CEILING_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return;
  }
  CEILING_ENSURE(src.dtype == DType::kBF16, "CudaOps::to_host: dtype {} not supported",
                 dtype_name(src.dtype));
  std::vector<uint16_t> tmp(n);
  CEILING_CUDA_CHECK(
      cudaMemcpyAsync(tmp.data(), src.data, n * 2, cudaMemcpyDeviceToHost, stream_));
  CEILING_CUDA_CHECK(cudaStreamSynchronize(stream_));
  for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(tmp[i]);
}

void CudaOps::from_host(const float* src, const TensorView& dst) {
  CEILING_ENSURE(mode_ != Mode::kCapture && mode_ != Mode::kReplay,
                 "CudaOps::from_host: not allowed inside a graph step");
  CEILING_ENSURE(dst.device == Device::kCuda && dst.is_contiguous(),
                 "CudaOps::from_host: needs a contiguous device view (got {})", dst.shape_str());
  const size_t n = static_cast<size_t>(dst.numel());
  if (dst.dtype == DType::kF32) {
    CEILING_CUDA_CHECK(cudaMemcpyAsync(dst.data, src, n * 4, cudaMemcpyHostToDevice, stream_));
  } else {
    CEILING_ENSURE(dst.dtype == DType::kBF16, "CudaOps::from_host: dtype {} not supported",
                   dtype_name(dst.dtype));
    std::vector<uint16_t> tmp(n);
    for (size_t i = 0; i < n; ++i) tmp[i] = f32_to_bf16(src[i]);
    CEILING_CUDA_CHECK(
        cudaMemcpyAsync(dst.data, tmp.data(), n * 2, cudaMemcpyHostToDevice, stream_));
  }
  CEILING_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaOps::synchronize() { CEILING_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

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

void CudaOps::linear(const TensorView& x, const TensorView& w, const TensorView* bias, void* out,
                     DType out_dtype, int rows) {
  const int N = static_cast<int>(w.dim(0)), K = static_cast<int>(w.dim(1));
  CEILING_ENSURE(x.ndim == 2 && x.dim(1) == K, "CudaOps: linear input {} does not match weight {}",
                 x.shape_str(), w.shape_str());
  if (rows == 0) return;  // e.g. a prefill chunk that wants no logits
  linear_
      ->run(bf16_ptr(x, "linear input"), static_cast<const bf16*>(w.data),
            bias ? static_cast<const bf16*>(bias->data) : nullptr, out, out_dtype, rows, N, K,
            stream_)
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
  const int rows = begin_op(kNorm, -1, {x.data, residual ? residual->data : nullptr, weight.data,
                                        out.data}, false, x, kTokens);
  if (residual) check_rows(*residual, kTokens, "rms_norm residual");
  check_rows(out, kTokens, "rms_norm output");
  if (!launching()) return;
  cuda::rms_norm(bf16_ptr(x, "rms_norm input"), residual ? bf16_ptr(*residual, "residual") : nullptr,
                 bf16_ptr(weight, "rms_norm weight"), rows, static_cast<int>(x.dim(1)),
                 static_cast<float>(config().rms_norm_eps), bf16_ptr(out, "rms_norm output"),
                 stream_)
      .throw_if_error();
}

void CudaOps::qkv_proj(int l, const TensorView& x, const TensorView& q, const TensorView& k,
                       const TensorView& v) {
  const int rows = begin_op(kQkv, l, {x.data, q.data, k.data, v.data}, false, x, kTokens);
  check_rows(q, kTokens, "q");
  check_rows(k, kTokens, "k");
  check_rows(v, kTokens, "v");
  const cuda_impl::FusedLayerWeights& f = fused(l);
  if (!launching()) return;
  ensure_qkv(rows);
  linear(x, f.qkv, f.qkv_bias.data ? &f.qkv_bias : nullptr, qkv_, DType::kBF16, rows);
  cuda_impl::split_qkv(qkv_, rows, config_.q_dim(), config_.kv_dim(), bf16_ptr(q, "q"),
                       bf16_ptr(k, "k"), bf16_ptr(v, "v"), stream_)
      .throw_if_error();
}

void CudaOps::qk_norm(int l, const TensorView& q, const TensorView& k) {
  const int rows = begin_op(kQkNorm, l, {q.data, k.data}, false, q, kTokens);
  check_rows(k, kTokens, "k");
  const LayerWeights& w = weights().layers.at(l);
  CEILING_ENSURE(w.q_norm.data && w.k_norm.data, "CudaOps::qk_norm: the model has no q/k norm");
  if (!launching()) return;
  const ModelConfig& c = config_;
  const float eps = static_cast<float>(c.rms_norm_eps);
  cuda::rms_norm_heads(bf16_ptr(q, "q"), c.q_dim(), rows, c.num_heads, c.head_dim,
                       static_cast<const bf16*>(w.q_norm.data), eps, stream_)
      .throw_if_error();
  cuda::rms_norm_heads(bf16_ptr(k, "k"), c.kv_dim(), rows, c.num_kv_heads, c.head_dim,
                       static_cast<const bf16*>(w.k_norm.data), eps, stream_)
      .throw_if_error();
}

void CudaOps::rope_kv_write(int l, const TensorView& q, const TensorView& k, const TensorView& v,
                            KvCache& kv) {
  const int rows = begin_op(kRope, l, {q.data, k.data, v.data}, true, q, kTokens);
  check_rows(k, kTokens, "k");
  check_rows(v, kTokens, "v");
  check_step_kv(kv, l);
  if (!launching()) return;
  const ModelConfig& c = config_;
  cuda::RopeKvArgs a;
  a.q = bf16_ptr(q, "q");
  a.k = bf16_ptr(k, "k");
  a.v = bf16_ptr(v, "v");
  a.q_stride = c.q_dim();
  a.k_stride = a.v_stride = c.kv_dim();
  a.positions = dev<int32_t>(meta_.positions);
  a.slot_mapping = dev<int32_t>(meta_.slots);
  a.inv_freq = inv_freq_;
  a.k_cache = static_cast<bf16*>(kv.k[l].data);
  a.v_cache = static_cast<bf16*>(kv.v[l].data);
  a.num_blocks = kv.num_blocks + 1;  // the dummy block is addressable (never written: slot -1)
  a.block_size = kv.block_size;
  a.norm_eps = static_cast<float>(c.rms_norm_eps);
  a.T = rows;
  a.Hq = c.num_heads;
  a.Hkv = c.num_kv_heads;
  a.D = c.head_dim;
  (fallback_rope_ ? cuda_impl::fallback_rope_kv_write(a, stream_) : cuda::rope_kv_write(a, stream_))
      .throw_if_error();
}

void CudaOps::attention(int l, const TensorView& q, const KvCache& kv, const TensorView& out) {
  const int rows = begin_op(kAttn, l, {q.data, out.data}, true, q, kTokens);
  check_rows(out, kTokens, "attention output");
  check_step_kv(kv, l);
  if (!launching()) return;
  const ModelConfig& c = config_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const bf16* qp = bf16_ptr(q, "q");
  bf16* op = bf16_ptr(out, "attention output");
  if (fallback_attention_) {
    cuda_impl::FallbackAttnArgs a;
    a.q = qp;
    a.k_cache = static_cast<const bf16*>(kv.k[l].data);
    a.v_cache = static_cast<const bf16*>(kv.v[l].data);
    a.out = op;
    a.query_start = dev<int32_t>(meta_.query_start);
    a.seq_lens = dev<int32_t>(meta_.seq_lens);
    a.block_tables = dev<int32_t>(meta_.tables);
    a.max_blocks = meta_.mb_cap;
    a.num_blocks = kv.num_blocks + 1;
    a.block_size = kv.block_size;
    a.S = seqs_;
    a.T = rows;
    a.Hq = c.num_heads;
    a.Hkv = c.num_kv_heads;
    a.D = c.head_dim;
    a.scale = scale;
    cuda_impl::fallback_attention(a, stream_).throw_if_error();
    return;
  }
  const cuda::PagedKvDevice pk{kv.k[l].data, kv.v[l].data, kv.num_blocks + 1, kv.block_size,
                               c.num_kv_heads, c.head_dim};
  if (decode_) {
    cuda::run_decode_attention(decode_plan_, qp, pk, dev<int32_t>(meta_.seq_lens),
                               dev<int32_t>(meta_.tables), meta_.mb_cap, scale, op, attn_ws_,
                               stream_)
        .throw_if_error();
  } else {
    const cuda::AttnBatchDevice b{seqs_, rows, dev<int32_t>(meta_.query_start),
                                  dev<int32_t>(meta_.seq_lens), dev<int32_t>(meta_.tables),
                                  meta_.mb_cap};
    cuda::run_prefill_attention(prefill_plan_, qp, pk, b, scale, op, attn_ws_, stream_)
        .throw_if_error();
  }
}

void CudaOps::o_proj(int l, const TensorView& attn, const TensorView& out) {
  const int rows = begin_op(kOProj, l, {attn.data, out.data}, false, attn, kTokens);
  check_rows(out, kTokens, "o_proj output");
  const TensorView& w = weights().layers.at(l).o_proj;
  if (launching()) linear(attn, w, nullptr, bf16_ptr(out, "o_proj output"), DType::kBF16, rows);
}

void CudaOps::gate_up_proj(int l, const TensorView& x, const TensorView& gate_up) {
  const int rows = begin_op(kGateUp, l, {x.data, gate_up.data}, false, x, kTokens);
  check_rows(gate_up, kTokens, "gate_up");
  const TensorView& w = fused(l).gate_up;
  if (launching()) linear(x, w, nullptr, bf16_ptr(gate_up, "gate_up"), DType::kBF16, rows);
}

void CudaOps::silu_mul(const TensorView& gate_up, const TensorView& out) {
  const int rows = begin_op(kSilu, -1, {gate_up.data, out.data}, false, gate_up, kTokens);
  check_rows(out, kTokens, "silu_mul output");
  if (!launching()) return;
  cuda::silu_mul(bf16_ptr(gate_up, "gate_up"), rows, config().intermediate_size,
                 bf16_ptr(out, "silu_mul output"), stream_)
      .throw_if_error();
}

void CudaOps::down_proj(int l, const TensorView& act, const TensorView& out) {
  const int rows = begin_op(kDown, l, {act.data, out.data}, false, act, kTokens);
  check_rows(out, kTokens, "down_proj output");
  const TensorView& w = weights().layers.at(l).down_proj;
  if (launching()) linear(act, w, nullptr, bf16_ptr(out, "down_proj output"), DType::kBF16, rows);
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
  if (launching()) linear(x, weights().lm_head, nullptr, logits.data, DType::kF32, rows);
  finish_step(logits);
}

}  // namespace ceiling::engine
