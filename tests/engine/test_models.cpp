#include "test_models.h"

#include <cmath>
#include <numbers>
#include <random>

namespace ceiling::engine::testing {

ModelConfig small_config(Arch arch) {
  ModelConfig c;
  c.name = "test";
  c.arch = arch;
  c.vocab_size = 101;
  c.hidden_size = 48;
  c.intermediate_size = 80;
  c.num_layers = 2;
  c.num_heads = 6;
  c.num_kv_heads = 2;
  c.head_dim = 8;  // q_dim 48 == hidden here; tests vary it
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000.0;
  c.max_position_embeddings = 512;
  c.attention_bias = arch == Arch::kQwen2;
  c.qk_norm = arch == Arch::kQwen3;
  return c;
}

std::unique_ptr<RandomModel> make_random_model(const ModelConfig& c, DType dtype, uint64_t seed) {
  auto m = std::make_unique<RandomModel>();
  m->config = c;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto tensor = [&](std::initializer_list<int64_t> shape, float scale, float offset) {
    TensorView t(nullptr, dtype, shape);
    const int64_t n = t.numel();
    if (dtype == DType::kBF16) {
      m->bf16.emplace_back(n);
      for (auto& x : m->bf16.back()) x = f32_to_bf16(offset + scale * nd(rng));
      t.data = m->bf16.back().data();
    } else {
      m->f32.emplace_back(n);
      for (auto& x : m->f32.back()) x = offset + scale * nd(rng);
      t.data = m->f32.back().data();
    }
    return t;
  };
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t Q = c.q_dim(), KV = c.kv_dim(), D = c.head_dim;
  const float s = 0.1f;
  m->weights.embed = tensor({V, H}, 1.0f, 0.0f);
  for (int l = 0; l < c.num_layers; ++l) {
    LayerWeights lw;
    lw.input_norm = tensor({H}, 0.1f, 1.0f);
    lw.q_proj = tensor({Q, H}, s, 0);
    lw.k_proj = tensor({KV, H}, s, 0);
    lw.v_proj = tensor({KV, H}, s, 0);
    if (c.attention_bias) {
      lw.q_bias = tensor({Q}, 0.5f, 0);
      lw.k_bias = tensor({KV}, 0.5f, 0);
      lw.v_bias = tensor({KV}, 0.5f, 0);
    }
    if (c.qk_norm) {
      lw.q_norm = tensor({D}, 0.1f, 1.0f);
      lw.k_norm = tensor({D}, 0.1f, 1.0f);
    }
    lw.o_proj = tensor({H, Q}, s, 0);
    lw.post_attn_norm = tensor({H}, 0.1f, 1.0f);
    lw.gate_proj = tensor({I, H}, s, 0);
    lw.up_proj = tensor({I, H}, s, 0);
    lw.down_proj = tensor({H, I}, s, 0);
    m->weights.layers.push_back(lw);
  }
  m->weights.final_norm = tensor({H}, 0.1f, 1.0f);
  m->weights.lm_head = c.tie_word_embeddings ? m->weights.embed : tensor({V, H}, s, 0);
  return m;
}

namespace {

using Vec = std::vector<double>;

double at(const TensorView& t, int64_t i) {
  return load_as_f32(t.data, t.dtype, i);
}

Vec matvec(const TensorView& w, const Vec& x, const TensorView* bias) {
  const int64_t N = w.dim(0), K = w.dim(1);
  Vec y(N);
  for (int64_t n = 0; n < N; ++n) {
    double acc = bias && bias->data ? at(*bias, n) : 0.0;
    for (int64_t k = 0; k < K; ++k) acc += at(w, n * K + k) * x[k];
    y[n] = acc;
  }
  return y;
}

// RMSNorm of x[off, off+n) with weight w[n], in place.
void rmsnorm(Vec& x, int64_t off, int64_t n, const TensorView& w, double eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += x[off + i] * x[off + i];
  const double inv = 1.0 / std::sqrt(ss / n + eps);
  for (int64_t i = 0; i < n; ++i) x[off + i] = x[off + i] * inv * at(w, i);
}

// HF's _compute_llama3_parameters / linear scaling / default, written independently of ref.cpp.
std::vector<double> inv_freq(const ModelConfig& c) {
  std::vector<double> f(c.head_dim / 2);
  for (size_t i = 0; i < f.size(); ++i) {
    double v = 1.0 / std::pow(c.rope_theta, 2.0 * i / c.head_dim);
    const RopeScaling& s = c.rope_scaling;
    if (s.type == RopeScaling::Type::kLinear) v /= s.factor;
    if (s.type == RopeScaling::Type::kLlama3) {
      const double wavelen = 2 * std::numbers::pi / v;
      const double old = s.original_max_position_embeddings;
      if (wavelen > old / s.low_freq_factor) {
        v /= s.factor;
      } else if (wavelen >= old / s.high_freq_factor) {
        const double smooth =
            (old / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        v = (1 - smooth) * v / s.factor + smooth * v;
      }
    }
    f[i] = v;
  }
  return f;
}

void rope(Vec& x, int heads, int D, int pos, const std::vector<double>& f) {
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < D / 2; ++i) {
      const double a = pos * f[i], c = std::cos(a), s = std::sin(a);
      double& x0 = x[h * D + i];
      double& x1 = x[h * D + i + D / 2];
      const double r0 = x0 * c - x1 * s, r1 = x1 * c + x0 * s;
      x0 = r0;
      x1 = r1;
    }
}

}  // namespace

std::vector<std::vector<float>> naive_logits(const RandomModel& m,
                                             const std::vector<int32_t>& ids) {
  const ModelConfig& c = m.config;
  const ModelWeights& w = m.weights;
  const int H = c.hidden_size, D = c.head_dim, Hq = c.num_heads, Hkv = c.num_kv_heads;
  const auto freqs = inv_freq(c);
  std::vector<std::vector<Vec>> kh(c.num_layers), vh(c.num_layers);  // [L][t] -> [Hkv*D]
  std::vector<std::vector<float>> out;
  for (size_t t = 0; t < ids.size(); ++t) {
    Vec x(H);
    for (int i = 0; i < H; ++i) x[i] = at(w.embed, int64_t{ids[t]} * H + i);
    for (int l = 0; l < c.num_layers; ++l) {
      const LayerWeights& lw = w.layers[l];
      Vec h = x;
      rmsnorm(h, 0, H, lw.input_norm, c.rms_norm_eps);
      const bool b = c.attention_bias;
      Vec q = matvec(lw.q_proj, h, b ? &lw.q_bias : nullptr);
      Vec k = matvec(lw.k_proj, h, b ? &lw.k_bias : nullptr);
      Vec v = matvec(lw.v_proj, h, b ? &lw.v_bias : nullptr);
      if (c.qk_norm) {
        for (int hh = 0; hh < Hq; ++hh) rmsnorm(q, hh * D, D, lw.q_norm, c.rms_norm_eps);
        for (int hh = 0; hh < Hkv; ++hh) rmsnorm(k, hh * D, D, lw.k_norm, c.rms_norm_eps);
      }
      rope(q, Hq, D, static_cast<int>(t), freqs);
      rope(k, Hkv, D, static_cast<int>(t), freqs);
      kh[l].push_back(k);
      vh[l].push_back(v);
      Vec attn(int64_t{Hq} * D, 0.0);
      for (int hh = 0; hh < Hq; ++hh) {
        const int g = hh / (Hq / Hkv);
        std::vector<double> sc(t + 1);
        double mx = -INFINITY;
        for (size_t p = 0; p <= t; ++p) {
          double d = 0;
          for (int i = 0; i < D; ++i) d += q[hh * D + i] * kh[l][p][g * D + i];
          sc[p] = d / std::sqrt(static_cast<double>(D));
          mx = std::max(mx, sc[p]);
        }
        double den = 0;
        for (auto& s : sc) den += s = std::exp(s - mx);
        for (size_t p = 0; p <= t; ++p)
          for (int i = 0; i < D; ++i) attn[hh * D + i] += sc[p] / den * vh[l][p][g * D + i];
      }
      Vec o = matvec(lw.o_proj, attn, nullptr);
      for (int i = 0; i < H; ++i) x[i] += o[i];
      h = x;
      rmsnorm(h, 0, H, lw.post_attn_norm, c.rms_norm_eps);
      Vec gate = matvec(lw.gate_proj, h, nullptr), up = matvec(lw.up_proj, h, nullptr);
      for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
      Vec down = matvec(lw.down_proj, gate, nullptr);
      for (int i = 0; i < H; ++i) x[i] += down[i];
    }
    rmsnorm(x, 0, H, w.final_norm, c.rms_norm_eps);
    Vec logits = matvec(w.lm_head, x, nullptr);
    out.emplace_back(logits.begin(), logits.end());
  }
  return out;
}

}  // namespace ceiling::engine::testing
