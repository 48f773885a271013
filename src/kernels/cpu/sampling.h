// Token sampling: the exact semantics every backend implements (the CUDA sampler is tested
// against this file). One sequence's logits row [V] (fp32) becomes one token id in these steps:
//
//  1. Validate: a NaN or +Inf logit is an error (ceiling::Error naming the token); -Inf is a
//     masked token. At least one logit must be finite.
//  2. Logit biases, then penalties, on a copy of the row (each skipped at its neutral value):
//     - bias: a sparse list of (id, b) added to the row, l_id <- l_id + b (OpenAI logit_bias with
//       b in [-100, 100]; b = -Inf masks the token, as min_tokens does for EOS and stop ids).
//       Ids outside [0, V) are an error; an id may appear more than once (the biases add up).
//     - repetition_penalty r (HF style) over the *set* of tokens in prompt + generated:
//       l <- l > 0 ? l / r : l * r.
//     - presence_penalty a and frequency_penalty f (OpenAI style) over the *generated* tokens,
//       with c = how often the token was generated: l <- l - a·[c > 0] - f·c.
//     Tokens outside [0, V) in the histories are an error.
//  3. temperature == 0: greedy — the argmax of the penalized row, ties to the lowest id. Stop.
//  4. Softmax of l / T (T = temperature) as unnormalized fp32 weights relative to the maximum
//     l_max: w_i = exp((l_i - l_max) / T), and w_i = 1 exactly where l_i == l_max (w_i = 0 for
//     -Inf). Probabilities are w_i / Σw; later steps compare weights, so none divides.
//  5. Order candidates by descending w, ties to the lower id ("rank order").
//  6. top_k > 0: keep the first top_k in rank order.
//  7. top_p < 1: keep the shortest rank-order prefix of the kept set whose mass is ≥ top_p of the
//     kept set's mass (i.e. relative to the renormalized top-k distribution); at least one token.
//  8. min_p > 0: keep tokens with w_i ≥ min_p (the top token's weight is 1, so this is
//     p_i ≥ min_p · p_max); the top token always stays.
//  9. Pick with one uniform u in [0, 1): total = Σ w over the kept set; walk the kept tokens in
//     ascending id order accumulating w, and return the first token whose running sum is
//     > u · total. If rounding leaves no such token, return the kept token with the largest id.
//
// Accumulations are fp32 on the CPU (a GPU may reduce in another order: picks then agree except
// when u·total falls within rounding of a boundary).
//
// The per-step uniform u: sampling_uniform(seed, step) — a counter-based hash, so it is the same
// on every backend and needs no generator state: z = mix64(seed ^ mix64(step)), where mix64 is the
// SplitMix64 finalizer (z += 0x9E3779B97F4A7C15; z = (z ^ z>>30)·0xBF58476D1CE4E5B9;
// z = (z ^ z>>27)·0x94D049BB133111EB; z ^= z>>31), and u = (z >> 40) · 2^-24 (24 random bits, so
// u is exact in fp32 and u < 1). `step` counts the sequence's generated tokens from 0.
#pragma once

#include <cstdint>
#include <span>
#include <utility>

namespace ceiling::cpu {

struct SamplingParams {
  float temperature = 1.0f;         // 0 = greedy; must be ≥ 0 and finite
  int top_k = 0;                    // 0 = off; must be ≥ 0
  float top_p = 1.0f;               // 1 = off; must be in (0, 1]
  float min_p = 0.0f;               // 0 = off; must be in [0, 1]
  float repetition_penalty = 1.0f;  // 1 = off; must be > 0
  float presence_penalty = 0.0f;    // 0 = off; any finite value
  float frequency_penalty = 0.0f;   // 0 = off; any finite value
  uint64_t seed = 0;                // feeds sampling_uniform

  bool greedy() const { return temperature == 0.0f; }
};

// Throws ceiling::Error naming the field and the rule when a parameter is out of range.
void validate(const SamplingParams& p);

// The uniform u in [0, 1) for generated token number `step` of a sequence seeded with `seed`.
float sampling_uniform(uint64_t seed, uint64_t step);

// SplitMix64 finalizer (see the file comment).
uint64_t mix64(uint64_t z);

// A sparse logit bias: (token id, value added to its logit).
using LogitBias = std::pair<int32_t, float>;

// Step 2's biases in place on logits [V] (ids checked against V).
void apply_logit_bias(float* logits, int V, std::span<const LogitBias> bias);

// Step 2's penalties in place on logits [V]. `prompt` and `generated` are the sequence's token ids
// so far.
void apply_penalties(float* logits, int V, const SamplingParams& p, std::span<const int32_t> prompt,
                     std::span<const int32_t> generated);

// Steps 1 and 3–9 on an already penalized row logits [V] (not modified). `u` in [0, 1).
int32_t sample_from_logits(const float* logits, int V, const SamplingParams& p, float u);

// All steps: biases and penalties on a copy of logits [V], then sample_from_logits.
int32_t sample_token(const float* logits, int V, const SamplingParams& p,
                     std::span<const int32_t> prompt, std::span<const int32_t> generated, float u,
                     std::span<const LogitBias> bias = {});

}  // namespace ceiling::cpu
