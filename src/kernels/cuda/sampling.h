// Sampling on the GPU: argmax and the full sampler with the semantics of
// src/kernels/cpu/sampling.h (penalties → temperature → top-k → top-p → min-p → pick with a
// uniform u walking the kept tokens in ascending id order). Logits are fp32 rows [S, V] (the
// lm_head writes f32 through Linear). Every launcher is graph-capturable: per-sequence parameters,
// uniforms and token histories live in device memory.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/status.h"

namespace ceiling::cuda {

// out[s] = index of the largest logit of row s of logits [S, V]; ties go to the lowest index
// (meaning: cpu::argmax). NaN logits are never picked.
Status argmax(const float* logits, int S, int V, int32_t* out, cudaStream_t stream);

// Device copy of cpu::SamplingParams for one sequence (same fields, same meaning and ranges;
// the host validates with cpu::validate before uploading).
struct GpuSamplingParams {
  float temperature = 1.0f;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t top_k = 0;
  int32_t pad_ = 0;
};

// Token histories as one int32 per (sequence, token) in a table counts [num_rows, V]: bits 0..29
// count how often the token was generated, bit 30 (kPromptBit) says it occurs in the prompt.
// Clear a row with cudaMemsetAsync(0) when a sequence takes it.
inline constexpr int32_t kPromptBit = 1 << 30;
inline constexpr int32_t kGeneratedMask = kPromptBit - 1;

// Sets kPromptBit on counts[row, ids[i]] for the n prompt ids of one sequence (ids outside
// [0, V) are ignored; the host validates them).
Status counts_add_prompt(int32_t* counts, int V, int row, const int32_t* ids, int n,
                         cudaStream_t stream);
// After a step: counts[rows[s], tokens[s]] += 1 for s < S (rows null = identity; negative tokens,
// i.e. failed rows, are skipped).
Status counts_add_generated(int32_t* counts, int V, const int32_t* rows, const int32_t* tokens,
                            int S, cudaStream_t stream);

// logits[rows[i], ids[i]] += bias[i] for i < n (cpu::apply_logit_bias over a batch; ids outside
// [0, V) are ignored, the host validates them; repeated ids add up; -Inf masks).
Status add_logit_bias(float* logits, int V, const int32_t* rows, const int32_t* ids,
                      const float* bias, int n, cudaStream_t stream);

// u[s] = cpu::sampling_uniform(seeds[s], steps[s]) for s < S.
Status sampling_uniforms(const uint64_t* seeds, const int64_t* steps, int S, float* u,
                         cudaStream_t stream);

struct SampleArgs {
  const float* logits = nullptr;              // [S, V], not modified
  const GpuSamplingParams* params = nullptr;  // [S]
  const int32_t* counts = nullptr;            // [num_rows, V] or null (no penalties applied)
  const int32_t* count_rows = nullptr;        // [S]: row of counts for each s; null = identity
  const float* u = nullptr;                   // [S], in [0, 1)
  int32_t* out = nullptr;                     // [S]; -1 where the row is invalid (a NaN or +Inf
                                              // logit, or every logit -Inf): cpu throws there
  int S = 0, V = 0;
};

// The largest vocabulary sample() takes (a row lives in the shared memory of one cluster).
int sampler_max_vocab();

// One cluster of 1–8 CTAs per sequence (8 for up to 16 rows of ≥ 16384 logits, else the smallest
// whose slices fit in shared memory), no workspace. Picks agree with
// cpu::sample_token given the same u except where u·total (or the top-p target) falls within
// fp32 rounding of a boundary: sums run in another order.
Status sample(const SampleArgs& a, cudaStream_t stream);

}  // namespace ceiling::cuda
