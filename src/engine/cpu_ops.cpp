#include "engine/cpu_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/status.h"
#include "kernels/cpu/ref.h"
#include "kernels/cpu/sampling.h"
#include "model/quantize.h"

namespace ceiling::engine {

namespace {

float* f32(const TensorView& t, const char* what) {
  CEILING_ENSURE(t.dtype == DType::kF32 && t.device == Device::kCpu && t.is_contiguous(),
                 "CpuOps: {} must be a contiguous f32 host view (got {} {})", what,
                 dtype_name(t.dtype), t.shape_str());
  return t.as<float>();
}

// Row r of a weight [N, K] as f32.
void load_row(const TensorView& w, int64_t r, int64_t K, float* dst) {
  const size_t base = static_cast<size_t>(r * K);
  switch (w.dtype) {
    case DType::kF32:
      std::memcpy(dst, w.as<const float>() + base, K * sizeof(float));
      return;
    case DType::kBF16: {
      const uint16_t* src = w.as<const uint16_t>() + base;
      for (int64_t k = 0; k < K; ++k) dst[k] = bf16_to_f32(src[k]);
      return;
    }
    default:
      for (int64_t k = 0; k < K; ++k) dst[k] = load_as_f32(w.data, w.dtype, base + k);
  }
}

// Σ a[k]·b[k] with 8 independent fp32 partial sums (vectorizes without -ffast-math).
float dot(const float* a, const float* b, int64_t K) {
  float acc[8] = {};
  int64_t k = 0;
  for (; k + 8 <= K; k += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[k + j] * b[k + j];
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; k < K; ++k) s += a[k] * b[k];
  return s;
}

}  // namespace

CpuOps::CpuOps(CpuOpsOptions options)
    : pool_(options.n_threads),
      bf16_activations_(options.bf16_activations),
      fp8_kv_cache_(options.fp8_kv_cache) {}
CpuOps::~CpuOps() = default;

TensorView CpuOps::alloc(DType dtype, std::initializer_list<int64_t> shape) {
  TensorView t(nullptr, dtype, shape);
  const int64_t n = t.numel();
  CEILING_ENSURE(n >= 0, "CpuOps::alloc: negative size {}", t.shape_str());
  if (dtype == DType::kF32) {
    f32_buffers_.emplace_back(new float[std::max<int64_t>(n, 1)]);
    std::fill_n(f32_buffers_.back().get(), n, std::numeric_limits<float>::quiet_NaN());
    t.data = f32_buffers_.back().get();
  } else {
    raw_buffers_.emplace_back(new unsigned char[std::max<size_t>(t.nbytes(), 1)]());
    t.data = raw_buffers_.back().get();
  }
  return t;
}

const ModelWeights& CpuOps::upload(const ModelConfig& config, const ModelWeights& host) {
  CEILING_ENSURE(!uploaded_, "CpuOps::upload: weights were already uploaded");
  check_weights(config, host, Device::kCpu);
  config_ = config;
  weights_ = host;
  inv_freq_ = cpu::rope_inv_freq(config);
  uploaded_ = true;
  return weights_;
}

const ModelWeights& CpuOps::weights() const {
  CEILING_ENSURE(uploaded_, "CpuOps: no weights uploaded");
  return weights_;
}

const ModelConfig& CpuOps::config() const {
  CEILING_ENSURE(uploaded_, "CpuOps: no weights uploaded");
  return config_;
}

const LayerWeights& CpuOps::layer(int l) const {
  CEILING_ENSURE(uploaded_ && l >= 0 && l < config_.num_layers, "CpuOps: no layer {}", l);
  return weights_.layers[l];
}

KvCache CpuOps::alloc_kv_cache(int num_blocks, int block_size) {
  const ModelConfig& c = config();
  CEILING_ENSURE(num_blocks > 0 && block_size > 0,
                 "KV cache: num_blocks {} and block_size {} must be positive", num_blocks,
                 block_size);
  KvCache kv{c.num_layers, num_blocks, block_size, c.num_kv_heads, c.head_dim, DType::kF32, {}, {}};
  for (int l = 0; l < c.num_layers; ++l) {
    kv.k.push_back(alloc(DType::kF32, {num_blocks, c.num_kv_heads, block_size, c.head_dim}));
    kv.v.push_back(alloc(DType::kF32, {num_blocks, c.num_kv_heads, block_size, c.head_dim}));
  }
  return kv;
}

void CpuOps::round_bf16(const TensorView& t, int64_t rows) const {
  if (!bf16_activations_) return;
  float* p = t.as<float>();
  const int64_t n = rows < 0 ? t.numel() : rows * (t.numel() / std::max<int64_t>(t.dim(0), 1));
  for (int64_t i = 0; i < n; ++i) p[i] = bf16_to_f32(f32_to_bf16(p[i]));
}

void CpuOps::to_host(const TensorView& src, float* dst) {
  CEILING_ENSURE(src.device == Device::kCpu, "CpuOps::to_host: not a host view");
  for (int64_t i = 0; i < src.numel(); ++i)
    dst[i] = load_as_f32(src.data, src.dtype, static_cast<size_t>(i));
}

void CpuOps::from_host(const float* src, const TensorView& dst) {
  std::copy_n(src, dst.numel(), f32(dst, "from_host destination"));
}

void CpuOps::prepare(const StepBatch& step, const KvCache& kv) {
  step.validate(kv.num_blocks, kv.block_size);
  step_ = step;
}

void CpuOps::embedding(const TensorView& out) {
  cpu::embedding(weights().embed, step_.token_ids.data(), step_.num_tokens(),
                 f32(out, "embedding output"));
  round_bf16(out, step_.num_tokens());
}

void CpuOps::rms_norm(const TensorView& x, const TensorView* residual, const TensorView& weight,
                      const TensorView& out) {
  const int T = static_cast<int>(x.dim(0)), H = static_cast<int>(x.dim(1));
  const float eps = static_cast<float>(config().rms_norm_eps);
  float* xp = f32(x, "rms_norm input");
  float* rp = residual ? f32(*residual, "rms_norm residual") : nullptr;
  float* op = f32(out, "rms_norm output");
  pool_.parallel_for(T, 16, [&](int64_t t0, int64_t t1) {
    const int64_t off = t0 * H;
    cpu::rms_norm(xp + off, rp ? rp + off : nullptr, weight, static_cast<int>(t1 - t0), H, eps,
                  op + off);
  });
  if (residual) round_bf16(*residual, T);
  round_bf16(out, T);
}

template <typename RowFn>
void CpuOps::linear_rows(const float* x, int64_t N, int64_t K, RowFn row_of, const TensorView* bias,
                         int T, float* out, int64_t ldo) {
  // Split the output rows so each thread converts its weight rows once and reuses them for all
  // T tokens; chunks of >= 64K multiply-adds keep the thread hand-off cheap.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(K * T, 1));
  pool_.parallel_for(N, grain, [&](int64_t n0, int64_t n1) {
    std::vector<float> row(K);
    for (int64_t n = n0; n < n1; ++n) {
      row_of(n, row.data());
      const float b = bias ? load_as_f32(bias->data, bias->dtype, static_cast<size_t>(n)) : 0.0f;
      for (int t = 0; t < T; ++t) out[t * ldo + n] = dot(x + t * K, row.data(), K) + b;
    }
  });
}

void CpuOps::linear(const float* x, const TensorView& w, const TensorView* bias, int T, float* out,
                    int64_t ldo) {
  const int64_t K = w.dim(1);
  linear_rows(
      x, w.dim(0), K, [&](int64_t n, float* dst) { load_row(w, n, K, dst); }, bias, T, out, ldo);
}

void CpuOps::linear(const float* x, const QuantLinear& w, const TensorView* bias, int T, float* out,
                    int64_t ldo) {
  const int64_t K = w.qweight.dim(1);
  std::vector<float> xq;
  if (w.format == WeightFormat::kFp8 && T >= kFp8ActRowsMin) {  // W8A8: x through E4M3 per row
    xq.resize(static_cast<size_t>(T) * K);
    std::vector<uint8_t> q(static_cast<size_t>(K));
    for (int t = 0; t < T; ++t) {
      float s = 1.0f;
      quantize_act_row_fp8(x + t * K, K, q.data(), &s);
      for (int64_t k = 0; k < K; ++k) xq[t * K + k] = e4m3_to_f32(q[k]) * s;
    }
    x = xq.data();
  }
  linear_rows(
      x, w.qweight.dim(0), K, [&](int64_t n, float* dst) { dequantize_row(w, n, K, dst); }, bias, T,
      out, ldo);
}

void CpuOps::project(int l, Proj p, const float* x, const TensorView* bias, int T, float* out,
                     int64_t ldo) {
  const LayerWeights& w = layer(l);
  if (w.quant[p].quantized())
    linear(x, w.quant[p], bias, T, out, ldo);
  else
    linear(x, w.dense(p), bias, T, out, ldo);
}

void CpuOps::qkv_proj(int l, const TensorView& x, const TensorView& q, const TensorView& k,
                      const TensorView& v) {
  const LayerWeights& w = layer(l);
  const int T = static_cast<int>(x.dim(0));
  const bool bias = config_.attention_bias;
  const float* xp = f32(x, "qkv input");
  project(l, kQProj, xp, bias ? &w.q_bias : nullptr, T, f32(q, "q"), config_.q_dim());
  project(l, kKProj, xp, bias ? &w.k_bias : nullptr, T, f32(k, "k"), config_.kv_dim());
  project(l, kVProj, xp, bias ? &w.v_bias : nullptr, T, f32(v, "v"), config_.kv_dim());
  for (const TensorView* t : {&q, &k, &v}) round_bf16(*t, T);
}

void CpuOps::qk_norm(int l, const TensorView& q, const TensorView& k) {
  const LayerWeights& w = layer(l);
  const int T = static_cast<int>(q.dim(0)), D = config_.head_dim;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  cpu::rms_norm(f32(q, "q"), nullptr, w.q_norm, T * config_.num_heads, D, eps, q.as<float>());
  cpu::rms_norm(f32(k, "k"), nullptr, w.k_norm, T * config_.num_kv_heads, D, eps, k.as<float>());
  round_bf16(q, T);
  round_bf16(k, T);
}

void CpuOps::rope_kv_write(int l, const TensorView& q, const TensorView& k, const TensorView& v,
                           KvCache& kv) {
  const ModelConfig& c = config();
  const int T = step_.num_tokens();
  cpu::rope(f32(q, "q"), f32(k, "k"), step_.positions.data(), inv_freq_.data(), T, c.num_heads,
            c.num_kv_heads, c.head_dim);
  round_bf16(q, T);  // k is rounded as it is written to the cache (v already is)
  round_bf16(k, T);
  if (fp8_kv_cache_) {  // k and v are scratch after this op: round them as the cache stores them
    const LayerWeights& w = layer(l);
    const int64_t n = int64_t{T} * c.kv_dim();
    float* kp = k.as<float>();
    float* vp = f32(v, "v");
    for (int64_t i = 0; i < n; ++i) {
      kp[i] = e4m3_round(kp[i], w.k_scale);
      vp[i] = e4m3_round(vp[i], w.v_scale);
    }
  }
  cpu::PagedKv cache{f32(kv.k[l], "K cache"), f32(kv.v[l], "V cache"), kv.num_blocks,
                     kv.block_size,           kv.num_kv_heads,         kv.head_dim};
  cpu::kv_write(k.as<float>(), f32(v, "v"), step_.slot_mapping.data(), T, cache);
}

void CpuOps::attention(int l, const TensorView& q, const KvCache& kv, const TensorView& out) {
  const ModelConfig& c = config();
  const cpu::PagedKv cache{f32(kv.k[l], "K cache"), f32(kv.v[l], "V cache"), kv.num_blocks,
                           kv.block_size,           kv.num_kv_heads,         kv.head_dim};
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const float* qp = f32(q, "q");
  float* op = f32(out, "attention output");
  // One sequence per task: the reference indexes q/out rows by absolute query_start, so a
  // single-sequence view of the batch is just shifted metadata pointers.
  pool_.parallel_for(step_.num_seqs(), 1, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s) {
      const cpu::AttnBatch one{1, step_.query_start.data() + s, step_.seq_lens.data() + s,
                               step_.block_tables.data() + s * step_.max_blocks, step_.max_blocks};
      cpu::attention(qp, cache, one, c.num_heads, scale, op);
    }
  });
  round_bf16(out, step_.num_tokens());
}

void CpuOps::o_proj(int l, const TensorView& attn, const TensorView& out) {
  project(l, kOProj, f32(attn, "attention output"), nullptr, static_cast<int>(attn.dim(0)),
          f32(out, "o_proj output"), config_.hidden_size);
  round_bf16(out, attn.dim(0));
}

void CpuOps::gate_up_proj(int l, const TensorView& x, const TensorView& gate_up) {
  const int T = static_cast<int>(x.dim(0));
  const int64_t I = config().intermediate_size;
  float* gu = f32(gate_up, "gate_up");
  project(l, kGateProj, f32(x, "mlp input"), nullptr, T, gu, 2 * I);
  project(l, kUpProj, x.as<float>(), nullptr, T, gu + I, 2 * I);
  round_bf16(gate_up, T);
}

void CpuOps::silu_mul(const TensorView& gate_up, const TensorView& out) {
  const int T = static_cast<int>(gate_up.dim(0)), I = config().intermediate_size;
  const float* gu = f32(gate_up, "gate_up");
  float* op = f32(out, "silu_mul output");
  pool_.parallel_for(T, 4, [&](int64_t t0, int64_t t1) {
    cpu::silu_mul(gu + t0 * 2 * I, static_cast<int>(t1 - t0), I, op + t0 * I);
  });
  round_bf16(out, T);
}

void CpuOps::down_proj(int l, const TensorView& act, const TensorView& out) {
  project(l, kDownProj, f32(act, "mlp activation"), nullptr, static_cast<int>(act.dim(0)),
          f32(out, "down_proj output"), config_.hidden_size);
  round_bf16(out, act.dim(0));
}

void CpuOps::norm_qkv_rope(int l, const TensorView& residual, const TensorView& h,
                           const TensorView& q, const TensorView& k, const TensorView& v,
                           KvCache& kv) {
  rms_norm(residual, nullptr, layer(l).input_norm, h);
  qkv_proj(l, h, q, k, v);
  if (config_.qk_norm) qk_norm(l, q, k);
  rope_kv_write(l, q, k, v, kv);
}

void CpuOps::add_into(const TensorView& x, const TensorView& residual) {
  CEILING_ENSURE(x.numel() == residual.numel(), "CpuOps: residual add of {} into {}", x.shape_str(),
                 residual.shape_str());
  const float* xp = f32(x, "residual addend");
  float* rp = f32(residual, "residual");
  for (int64_t i = 0, n = x.numel(); i < n; ++i) rp[i] += xp[i];
  round_bf16(residual);
}

void CpuOps::o_proj_residual(int l, const TensorView& attn, const TensorView& scratch,
                             const TensorView& residual, ResidualUpdate update) {
  if (update == ResidualUpdate::kStore) return o_proj(l, attn, residual);
  o_proj(l, attn, scratch);
  add_into(scratch, residual);
}

void CpuOps::mlp_residual(int l, const TensorView& residual, const TensorView& h,
                          const TensorView& gate_up, const TensorView& act,
                          const TensorView& scratch, ResidualUpdate update) {
  rms_norm(residual, nullptr, layer(l).post_attn_norm, h);
  gate_up_proj(l, h, gate_up);
  silu_mul(gate_up, act);
  if (update == ResidualUpdate::kStore) return down_proj(l, act, residual);
  down_proj(l, act, scratch);
  add_into(scratch, residual);
}

void CpuOps::gather_rows(const TensorView& x, const TensorView& out) {
  const int64_t H = x.dim(1);
  const float* xp = f32(x, "gather input");
  float* op = f32(out, "gather output");
  for (int r = 0; r < step_.num_logits_rows(); ++r)
    std::copy_n(xp + step_.logits_rows[r] * H, H, op + r * H);
}

void CpuOps::lm_head(const TensorView& x, const TensorView& logits) {
  linear(f32(x, "lm_head input"), weights().lm_head, nullptr, static_cast<int>(x.dim(0)),
         f32(logits, "logits"), config_.vocab_size);
}

void CpuOps::sample(const TensorView& logits, std::span<const SampleRequest> reqs, int32_t* ids) {
  const int64_t R = logits.dim(0), V = logits.dim(1);
  CEILING_ENSURE(static_cast<int64_t>(reqs.size()) == R,
                 "CpuOps::sample: {} requests for {} logits rows", reqs.size(), R);
  const float* lp = f32(logits, "logits");
  for (int64_t r = 0; r < R; ++r) {
    const SampleRequest& q = reqs[r];
    ids[r] = cpu::sample_token(lp + r * V, static_cast<int>(V), q.params, q.prompt, q.generated,
                               q.u, q.bias);
  }
}

}  // namespace ceiling::engine
