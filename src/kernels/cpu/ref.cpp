#include "kernels/cpu/ref.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/status.h"

namespace ceiling::cpu {

namespace {

// Row `r` of a 2-D weight view as fp32 into `dst` (length = the view's last dim).
void load_row(const TensorView& w, int64_t r, float* dst) {
  const int64_t K = w.dim(-1);
  const int64_t base = r * w.strides[0];
  switch (w.dtype) {
    case DType::kF32: std::copy_n(w.as<const float>() + base, K, dst); return;
    default:
      for (int64_t k = 0; k < K; ++k) dst[k] = load_as_f32(w.data, w.dtype, static_cast<size_t>(base + k));
  }
}

}  // namespace

void embedding(const TensorView& table, const int32_t* ids, int T, float* out) {
  const int64_t V = table.dim(0), H = table.dim(1);
  for (int t = 0; t < T; ++t) {
    CEILING_ENSURE(ids[t] >= 0 && ids[t] < V, "embedding: token id {} outside vocab [0, {})", ids[t], V);
    load_row(table, ids[t], out + t * H);
  }
}

void rms_norm(const float* x, float* residual, const TensorView& w, int T, int H, float eps,
              float* out) {
  std::vector<float> wf(H), r(H);
  load_row(w.ndim == 1 ? TensorView(w.data, w.dtype, {1, w.dim(0)}) : w, 0, wf.data());
  for (int t = 0; t < T; ++t) {
    const float* xt = x + static_cast<int64_t>(t) * H;
    double ss = 0;
    for (int i = 0; i < H; ++i) {
      r[i] = residual ? xt[i] + residual[static_cast<int64_t>(t) * H + i] : xt[i];
      ss += static_cast<double>(r[i]) * r[i];
    }
    if (residual) std::copy_n(r.data(), H, residual + static_cast<int64_t>(t) * H);
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / H + eps));
    for (int i = 0; i < H; ++i) out[static_cast<int64_t>(t) * H + i] = r[i] * inv * wf[i];
  }
}

void linear(const float* x, const TensorView& w, const TensorView* bias, int T, float* out) {
  const int64_t N = w.dim(0), K = w.dim(1);
  std::vector<float> b(N, 0.0f);
  if (bias) load_row(TensorView(bias->data, bias->dtype, {1, N}), 0, b.data());
  // Weight-row outer loop: each row is converted once and used for every token.
  std::vector<float> row(K);
  for (int64_t n = 0; n < N; ++n) {
    load_row(w, n, row.data());
    for (int t = 0; t < T; ++t) {
      const float* xt = x + t * K;
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k) acc += xt[k] * row[k];
      out[t * N + n] = acc + b[n];
    }
  }
}

std::vector<float> rope_inv_freq(const ModelConfig& c) {
  const int half = c.head_dim / 2;
  std::vector<float> inv(half);
  for (int i = 0; i < half; ++i) {
    double f = 1.0 / std::pow(c.rope_theta, (2.0 * i) / c.head_dim);
    const auto& s = c.rope_scaling;
    if (s.type == RopeScaling::Type::kLinear) {
      f /= s.factor;
    } else if (s.type == RopeScaling::Type::kLlama3) {
      const double low_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
      const double high_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
      const double wavelen = 2.0 * std::numbers::pi / f;
      if (wavelen > low_wavelen) {
        f = f / s.factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) /
                              (s.high_freq_factor - s.low_freq_factor);
        f = (1.0 - smooth) * f / s.factor + smooth * f;
      }
    }
    inv[i] = static_cast<float>(f);
  }
  return inv;
}

void rope(float* q, float* k, const int32_t* positions, const float* inv_freq, int T, int Hq,
          int Hkv, int D) {
  const int half = D / 2;
  std::vector<float> cs(half), sn(half);
  for (int t = 0; t < T; ++t) {
    for (int i = 0; i < half; ++i) {
      const float angle = static_cast<float>(positions[t]) * inv_freq[i];
      cs[i] = std::cos(angle);
      sn[i] = std::sin(angle);
    }
    auto rotate = [&](float* x) {
      for (int i = 0; i < half; ++i) {
        const float a = x[i], b = x[i + half];
        x[i] = a * cs[i] - b * sn[i];
        x[i + half] = b * cs[i] + a * sn[i];
      }
    };
    for (int h = 0; h < Hq; ++h) rotate(q + (static_cast<int64_t>(t) * Hq + h) * D);
    for (int h = 0; h < Hkv; ++h) rotate(k + (static_cast<int64_t>(t) * Hkv + h) * D);
  }
}

void kv_write(const float* k, const float* v, const int32_t* slot_mapping, int T, PagedKv& cache) {
  const int Hkv = cache.num_kv_heads, D = cache.head_dim;
  const int64_t capacity = static_cast<int64_t>(cache.num_blocks) * cache.block_size;
  for (int t = 0; t < T; ++t) {
    const int64_t slot = slot_mapping[t];
    if (slot < 0) continue;
    CEILING_ENSURE(slot < capacity, "kv_write: slot {} outside the cache ({} slots)", slot, capacity);
    for (int h = 0; h < Hkv; ++h) {
      std::copy_n(k + (static_cast<int64_t>(t) * Hkv + h) * D, D, cache.k + cache.offset(slot, h));
      std::copy_n(v + (static_cast<int64_t>(t) * Hkv + h) * D, D, cache.v + cache.offset(slot, h));
    }
  }
}

void attention(const float* q, const PagedKv& cache, const AttnBatch& b, int Hq, float scale,
               float* out) {
  const int Hkv = cache.num_kv_heads, D = cache.head_dim, group = Hq / Hkv;
  std::vector<float> scores;
  std::vector<double> acc(D);
  for (int s = 0; s < b.num_seqs; ++s) {
    const int q0 = b.query_start[s], q_len = b.query_start[s + 1] - q0, ctx = b.seq_lens[s];
    CEILING_ENSURE(q_len >= 0 && q_len <= ctx, "attention: sequence {} has {} new tokens but context {}",
                   s, q_len, ctx);
    const int32_t* table = b.block_tables + static_cast<int64_t>(s) * b.max_blocks;
    for (int j = 0; j < q_len; ++j) {
      const int pos = ctx - q_len + j;  // attends to kv positions [0, pos]
      for (int h = 0; h < Hq; ++h) {
        const float* qh = q + (static_cast<int64_t>(q0 + j) * Hq + h) * D;
        const int kvh = h / group;
        scores.assign(pos + 1, 0.0f);
        float mx = -INFINITY;
        for (int p = 0; p <= pos; ++p) {
          const int64_t slot = static_cast<int64_t>(table[p / cache.block_size]) * cache.block_size +
                               p % cache.block_size;
          const float* kp = cache.k + cache.offset(slot, kvh);
          float dot = 0.0f;
          for (int d = 0; d < D; ++d) dot += qh[d] * kp[d];
          scores[p] = dot * scale;
          mx = std::max(mx, scores[p]);
        }
        double denom = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int p = 0; p <= pos; ++p) {
          const double e = std::exp(static_cast<double>(scores[p] - mx));
          denom += e;
          const int64_t slot = static_cast<int64_t>(table[p / cache.block_size]) * cache.block_size +
                               p % cache.block_size;
          const float* vp = cache.v + cache.offset(slot, kvh);
          for (int d = 0; d < D; ++d) acc[d] += e * vp[d];
        }
        float* oh = out + (static_cast<int64_t>(q0 + j) * Hq + h) * D;
        for (int d = 0; d < D; ++d) oh[d] = static_cast<float>(acc[d] / denom);
      }
    }
  }
}

void silu_mul(const float* gate_up, int T, int I, float* out) {
  for (int t = 0; t < T; ++t) {
    const float* g = gate_up + static_cast<int64_t>(t) * 2 * I;
    for (int i = 0; i < I; ++i) {
      const float x = g[i];
      out[static_cast<int64_t>(t) * I + i] = x / (1.0f + std::exp(-x)) * g[I + i];
    }
  }
}

void argmax(const float* logits, int T, int V, int32_t* out) {
  for (int t = 0; t < T; ++t) {
    const float* row = logits + static_cast<int64_t>(t) * V;
    int best = 0;
    for (int i = 1; i < V; ++i)
      if (row[i] > row[best]) best = i;
    out[t] = best;
  }
}

}  // namespace ceiling::cpu
