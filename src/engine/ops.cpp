#include "engine/ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ceiling::engine {

void Ops::join_logits(const TensorView& local, std::span<const VocabPart> parts,
                      const TensorView& gathered, const TensorView& full) {
  const int64_t R = local.dim(0), Vp = local.dim(1), N = static_cast<int64_t>(parts.size());
  CEILING_ENSURE(comm_ != nullptr && comm_->world() == N,
                 "{}: join_logits of {} parts without a communicator of as many ranks", name(), N);
  CEILING_ENSURE(local.device == Device::kCpu && gathered.device == Device::kCpu &&
                     (!full.data || full.device == Device::kCpu),
                 "{}: join_logits of device memory needs the backend's override", name());
  CEILING_ENSURE(gathered.numel() >= N * R * Vp, "{}: join_logits gather buffer of {} for {}x{}x{}",
                 name(), gathered.numel(), N, R, Vp);
  if (R == 0) return;
  float* g = gathered.as<float>();
  comm_->all_gather(TensorView(local.data, DType::kF32, {R * Vp}, local.device),
                    TensorView(g, DType::kF32, {N * R * Vp}, local.device), nullptr);
  if (!full.data) return;
  for (int64_t q = 0; q < N; ++q) {
    const VocabPart& p = parts[static_cast<size_t>(q)];
    CEILING_ENSURE(p.begin >= 0 && p.valid <= Vp && p.begin + p.valid <= full.dim(1),
                   "{}: join_logits part {} ({} columns at {}) does not fit", name(), q, p.valid,
                   p.begin);
    for (int64_t r = 0; r < R; ++r)
      std::copy_n(g + (q * R + r) * Vp, p.valid, full.as<float>() + r * full.dim(1) + p.begin);
  }
}

TensorView rows(const TensorView& t, int64_t n) {
  CEILING_ENSURE(t.ndim >= 1 && t.is_contiguous(), "rows: needs a contiguous view (got {})",
                 t.shape_str());
  CEILING_ENSURE(n >= 0 && n <= t.shape[0], "rows: {} rows of a view of {}", n, t.shape_str());
  TensorView r = t;
  r.shape[0] = n;
  return r;
}

namespace {

void check_tensor(const TensorView& t, const std::string& name, std::initializer_list<int64_t> want,
                  Device device) {
  CEILING_ENSURE(t.data != nullptr, "weights: tensor '{}' is missing", name);
  CEILING_ENSURE(t.dtype == DType::kF32 || t.dtype == DType::kBF16 || t.dtype == DType::kF16,
                 "weights: tensor '{}' has dtype {} (supported: f32, bf16, f16)", name,
                 dtype_name(t.dtype));
  CEILING_ENSURE(t.device == device, "weights: tensor '{}' is on the wrong device", name);
  bool same = t.ndim == static_cast<int>(want.size());
  int i = 0;
  for (int64_t d : want) same = same && t.shape[i++] == d;
  std::string ws = "[";
  i = 0;
  for (int64_t d : want) ws += (i++ ? ", " : "") + std::to_string(d);
  CEILING_ENSURE(same, "weights: tensor '{}' has shape {} but the config implies {}]", name,
                 t.shape_str(), ws);
  CEILING_ENSURE(t.is_contiguous(), "weights: tensor '{}' is not contiguous", name);
}

// Quantized projection `name` of W [N, K] (model/weights.h QuantLinear).
void check_quant(const QuantLinear& q, const std::string& name, int64_t N, int64_t K) {
  auto is = [](const TensorView& t, DType d, std::initializer_list<int64_t> shape) {
    if (t.data == nullptr || t.dtype != d || t.ndim != static_cast<int>(shape.size()) ||
        !t.is_contiguous())
      return false;
    int i = 0;
    for (int64_t v : shape)
      if (t.shape[i++] != v) return false;
    return true;
  };
  const bool fp8 = q.format == WeightFormat::kFp8;
  const int64_t G = q.group_size;
  const bool ok = fp8 ? is(q.qweight, DType::kF8E4M3, {N, K}) && is(q.scale, DType::kF32, {N})
                      : G > 0 && K % G == 0 && is(q.qweight, DType::kU8, {N, K}) &&
                            is(q.scale, DType::kF32, {N, K / G}) &&
                            is(q.zero, DType::kU8, {N, K / G});
  CEILING_ENSURE(ok, "weights: tensor '{}' ({}, group {}) does not have the layout of W [{}, {}]",
                 name, weight_format_name(q.format), G, N, K);
}

}  // namespace

void check_weights(const ModelConfig& c, const ModelWeights& w, Device device) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size, D = c.head_dim;
  const int64_t Q = c.q_dim(), KV = c.kv_dim();
  check_tensor(w.embed, "embed_tokens", {V, H}, device);
  check_tensor(w.final_norm, "norm", {H}, device);
  check_tensor(w.lm_head, "lm_head", {V, H}, device);
  CEILING_ENSURE(static_cast<int>(w.layers.size()) == c.num_layers,
                 "weights: {} layers but the config has num_hidden_layers {}", w.layers.size(),
                 c.num_layers);
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& lw = w.layers[l];
    auto n = [l](const char* what) { return fmt::format("layers.{}.{}", l, what); };
    check_tensor(lw.input_norm, n("input_layernorm"), {H}, device);
    check_tensor(lw.post_attn_norm, n("post_attention_layernorm"), {H}, device);
    // W [N, K] of each projection, by Proj: dense, or in its low-precision layout.
    const int64_t shapes[kNumProj][2] = {{Q, H}, {KV, H}, {KV, H}, {H, Q}, {I, H}, {I, H}, {H, I}};
    for (int p = 0; p < kNumProj; ++p) {
      const Proj pj = static_cast<Proj>(p);
      const auto [N, K] = shapes[p];
      if (lw.quant[pj].quantized())
        check_quant(lw.quant[pj], n(proj_name(pj)), N, K);
      else
        check_tensor(lw.dense(pj), n(proj_name(pj)), {N, K}, device);
    }
    if (c.attention_bias) {
      check_tensor(lw.q_bias, n("q_proj.bias"), {Q}, device);
      check_tensor(lw.k_bias, n("k_proj.bias"), {KV}, device);
      check_tensor(lw.v_bias, n("v_proj.bias"), {KV}, device);
    }
    if (c.qk_norm) {
      check_tensor(lw.q_norm, n("q_norm"), {D}, device);
      check_tensor(lw.k_norm, n("k_norm"), {D}, device);
    }
    CEILING_ENSURE(
        std::isfinite(lw.k_scale) && lw.k_scale > 0 && std::isfinite(lw.v_scale) && lw.v_scale > 0,
        "weights: {} {} / {} {}: a KV cache scale must be positive and finite",
        n("self_attn.k_scale"), lw.k_scale, n("self_attn.v_scale"), lw.v_scale);
  }
}

}  // namespace ceiling::engine
