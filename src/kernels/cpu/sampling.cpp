#include "kernels/cpu/sampling.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/status.h"

namespace ceiling::cpu {

void validate(const SamplingParams& p) {
  CEILING_ENSURE(std::isfinite(p.temperature) && p.temperature >= 0.0f,
                 "sampling: temperature must be finite and >= 0 (got {})", p.temperature);
  CEILING_ENSURE(p.top_k >= 0, "sampling: top_k must be >= 0 (got {})", p.top_k);
  CEILING_ENSURE(p.top_p > 0.0f && p.top_p <= 1.0f, "sampling: top_p must be in (0, 1] (got {})",
                 p.top_p);
  CEILING_ENSURE(p.min_p >= 0.0f && p.min_p <= 1.0f, "sampling: min_p must be in [0, 1] (got {})",
                 p.min_p);
  CEILING_ENSURE(std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0.0f,
                 "sampling: repetition_penalty must be finite and > 0 (got {})",
                 p.repetition_penalty);
  CEILING_ENSURE(std::isfinite(p.presence_penalty),
                 "sampling: presence_penalty must be finite (got {})", p.presence_penalty);
  CEILING_ENSURE(std::isfinite(p.frequency_penalty),
                 "sampling: frequency_penalty must be finite (got {})", p.frequency_penalty);
}

uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

float sampling_uniform(uint64_t seed, uint64_t step) {
  const uint64_t z = mix64(seed ^ mix64(step));
  return static_cast<float>(z >> 40) * 0x1.0p-24f;
}

namespace {

void check_ids(std::span<const int32_t> ids, int V, const char* what) {
  for (int32_t id : ids)
    CEILING_ENSURE(id >= 0 && id < V, "sampling: {} token id {} outside the vocabulary [0, {})",
                   what, id, V);
}

void check_row(const float* logits, int V) {
  CEILING_ENSURE(V > 0, "sampling: empty logits row");
  bool any_finite = false;
  for (int i = 0; i < V; ++i) {
    CEILING_ENSURE(!std::isnan(logits[i]), "sampling: logit of token {} is NaN", i);
    CEILING_ENSURE(logits[i] != INFINITY, "sampling: logit of token {} is +Inf", i);
    any_finite = any_finite || std::isfinite(logits[i]);
  }
  CEILING_ENSURE(any_finite, "sampling: every logit is -Inf (nothing can be sampled)");
}

int32_t argmax_row(const float* logits, int V) {
  int32_t best = 0;
  for (int i = 1; i < V; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

}  // namespace

void apply_logit_bias(float* logits, int V, std::span<const LogitBias> bias) {
  for (const auto& [id, b] : bias) {
    CEILING_ENSURE(id >= 0 && id < V,
                   "sampling: logit_bias token id {} outside the vocabulary [0, {})", id, V);
    logits[id] += b;
  }
}

void apply_penalties(float* logits, int V, const SamplingParams& p, std::span<const int32_t> prompt,
                     std::span<const int32_t> generated) {
  check_ids(prompt, V, "prompt");
  check_ids(generated, V, "generated");
  if (p.repetition_penalty != 1.0f) {
    std::unordered_set<int32_t> seen(prompt.begin(), prompt.end());
    seen.insert(generated.begin(), generated.end());
    for (int32_t id : seen) {
      float& l = logits[id];
      l = l > 0.0f ? l / p.repetition_penalty : l * p.repetition_penalty;
    }
  }
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    std::unordered_map<int32_t, int> count;
    for (int32_t id : generated) ++count[id];
    for (const auto& [id, c] : count)
      logits[id] -= p.presence_penalty + p.frequency_penalty * static_cast<float>(c);
  }
}

int32_t sample_from_logits(const float* logits, int V, const SamplingParams& p, float u) {
  check_row(logits, V);
  CEILING_ENSURE(u >= 0.0f && u < 1.0f, "sampling: u must be in [0, 1) (got {})", u);
  if (p.greedy()) return argmax_row(logits, V);

  // Softmax weights relative to the maximum: the top token's weight is exactly 1.
  const float lmax = logits[argmax_row(logits, V)];
  std::vector<float> w(V);
  std::vector<int32_t> kept;
  for (int i = 0; i < V; ++i) {
    w[i] = logits[i] == lmax ? 1.0f : std::exp((logits[i] - lmax) / p.temperature);
    if (w[i] > 0.0f) kept.push_back(i);
  }
  const auto rank_before = [&](int32_t a, int32_t b) {
    return w[a] > w[b] || (w[a] == w[b] && a < b);
  };

  const bool use_k = p.top_k > 0 && static_cast<size_t>(p.top_k) < kept.size();
  const bool use_p = p.top_p < 1.0f;
  if (use_k) {
    std::partial_sort(kept.begin(), kept.begin() + p.top_k, kept.end(), rank_before);
    kept.resize(p.top_k);
  } else if (use_p) {
    std::sort(kept.begin(), kept.end(), rank_before);
  }
  if (use_p) {
    float mass = 0.0f;
    for (int32_t id : kept) mass += w[id];
    const float target = p.top_p * mass;
    float cum = 0.0f;
    size_t n = 0;
    while (n < kept.size()) {
      cum += w[kept[n++]];
      if (cum >= target) break;
    }
    kept.resize(std::max<size_t>(n, 1));
  }
  if (p.min_p > 0.0f) {
    // w_max == 1, so p_i >= min_p * p_max is w_i >= min_p. The top token (w == 1) always stays.
    std::erase_if(kept, [&](int32_t id) { return w[id] < p.min_p; });
  }

  std::sort(kept.begin(), kept.end());
  float total = 0.0f;
  for (int32_t id : kept) total += w[id];
  const float threshold = u * total;
  float cum = 0.0f;
  for (int32_t id : kept) {
    cum += w[id];
    if (cum > threshold) return id;
  }
  return kept.back();
}

int32_t sample_token(const float* logits, int V, const SamplingParams& p,
                     std::span<const int32_t> prompt, std::span<const int32_t> generated, float u,
                     std::span<const LogitBias> bias) {
  check_row(logits, V);
  std::vector<float> row(logits, logits + V);
  apply_logit_bias(row.data(), V, bias);
  apply_penalties(row.data(), V, p, prompt, generated);
  return sample_from_logits(row.data(), V, p, u);
}

}  // namespace ceiling::cpu
