// CudaOps::sample: one token per logits row on the GPU; only the ids come back to the host.
//  * Greedy rows without penalties: the argmax. After a graph step the graph already computed it
//    (and copied it to pinned memory), so sample() only waits for the step.
//  * Anything else: the GPU sampler (kernels/cuda/sampling.h) with the requests' parameters and
//    uniforms; with penalties, each row's token counts are rebuilt from its prompt and generated
//    ids (an Ops does not know which sequence a row belongs to between steps); with logit biases
//    (logit_bias, min_tokens masks), a copy of the logits gets them added first.
#include <algorithm>

#include "core/check.h"
#include "engine/cuda/cuda_ops.h"
#include "engine/cuda/sampler_state.h"
#include "kernels/cuda/sampling.h"

namespace ceiling::engine {

namespace {

size_t align16(size_t n) {
  return (n + 15) / 16 * 16;
}

bool has_penalties(const cpu::SamplingParams& p) {
  return p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
}

}  // namespace

void CudaOps::sample(const TensorView& logits, std::span<const SampleRequest> reqs, int32_t* ids) {
  CEILING_ENSURE(mode_ != Mode::kCapture && mode_ != Mode::kReplay,
                 "CudaOps::sample: call it after the step's lm_head");
  CEILING_ENSURE(logits.dtype == DType::kF32 && logits.device == Device::kCuda &&
                     logits.ndim == 2 && logits.is_contiguous(),
                 "CudaOps::sample: logits must be a contiguous f32 device view [R, V] (got {})",
                 logits.shape_str());
  const int R = static_cast<int>(logits.dim(0)), V = static_cast<int>(logits.dim(1));
  CEILING_ENSURE(static_cast<int>(reqs.size()) == R, "CudaOps::sample: {} requests for {} rows",
                 reqs.size(), R);
  if (R == 0) return;
  bool plain_greedy = true, penalties = false;
  size_t bias_n = 0;
  for (const SampleRequest& q : reqs) {
    cpu::validate(q.params);
    penalties = penalties || has_penalties(q.params);
    plain_greedy = plain_greedy && q.params.greedy() && !has_penalties(q.params) && q.bias.empty();
    bias_n += q.bias.size();
  }
  if (plain_greedy && graph_logits_ == logits.data && R <= step_logits_) {
    CEILING_CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::copy_n(ids_host_.as<int32_t>(), R, ids);
    return;
  }

  if (!sampler_) sampler_ = std::make_unique<SamplerState>();
  SamplerState& s = *sampler_;
  if (R > s.rows_cap) {
    s.rows_cap = std::max(R, 2 * s.rows_cap);
    s.out_dev = static_cast<int32_t*>(arena_.allocate(s.rows_cap * sizeof(int32_t)));
    s.out_host = cuda_impl::PinnedBuffer(s.rows_cap * sizeof(int32_t));
    s.counts = nullptr;  // regrown below when needed
    s.biased = nullptr;
  }
  if (plain_greedy) {
    cuda::argmax(logits.as<float>(), R, V, s.out_dev, stream_).throw_if_error();
  } else {
    // Upload layout: params [R], u [R], then per row: prompt ids, generated ids, and the row
    // index repeated once per generated id (counts_add_generated's `rows`).
    const size_t params_at = 0, u_at = align16(R * sizeof(cuda::GpuSamplingParams));
    const size_t hist_at = align16(u_at + R * sizeof(float));
    size_t hist_n = 0;
    if (penalties)
      for (const SampleRequest& q : reqs) hist_n += q.prompt.size() + 2 * q.generated.size();
    // Then the biases: rows [bias_n], ids [bias_n], values [bias_n].
    const size_t bias_at = align16(hist_at + hist_n * sizeof(int32_t));
    const size_t bytes = bias_at + 3 * bias_n * sizeof(int32_t);
    if (bytes > s.upload_cap) {
      s.upload_cap = std::max(bytes, 2 * s.upload_cap);
      s.upload_dev = static_cast<char*>(arena_.allocate(s.upload_cap));
      s.upload_host = cuda_impl::PinnedBuffer(s.upload_cap);
    }
    char* h = s.upload_host.as<char>();
    auto* params = reinterpret_cast<cuda::GpuSamplingParams*>(h + params_at);
    auto* u = reinterpret_cast<float*>(h + u_at);
    for (int r = 0; r < R; ++r) {
      const cpu::SamplingParams& p = reqs[r].params;
      params[r] = cuda::GpuSamplingParams{
          p.temperature,       p.top_p, p.min_p, p.repetition_penalty, p.presence_penalty,
          p.frequency_penalty, p.top_k, 0};
      u[r] = reqs[r].u;
    }
    int32_t* hist = reinterpret_cast<int32_t*>(h + hist_at);
    size_t at = 0;
    if (penalties) {
      for (int r = 0; r < R; ++r) {
        for (auto span : {reqs[r].prompt, reqs[r].generated})
          for (int32_t id : span)
            CEILING_ENSURE(id >= 0 && id < V, "sampling: row {} has token id {} outside [0, {})", r,
                           id, V);
        at = std::copy(reqs[r].prompt.begin(), reqs[r].prompt.end(), hist + at) - hist;
        at = std::copy(reqs[r].generated.begin(), reqs[r].generated.end(), hist + at) - hist;
        at = std::fill_n(hist + at, reqs[r].generated.size(), r) - hist;
      }
      if (!s.counts)
        s.counts = static_cast<int32_t*>(arena_.allocate(sizeof(int32_t) * V * s.rows_cap));
    }
    if (bias_n > 0) {
      auto* b_rows = reinterpret_cast<int32_t*>(h + bias_at);
      int32_t* b_ids = b_rows + bias_n;
      auto* b_val = reinterpret_cast<float*>(b_ids + bias_n);
      size_t k = 0;
      for (int r = 0; r < R; ++r)
        for (const auto& [id, b] : reqs[r].bias) {
          CEILING_ENSURE(id >= 0 && id < V,
                         "sampling: logit_bias token id {} outside the vocabulary [0, {})", id, V);
          b_rows[k] = r;
          b_ids[k] = id;
          b_val[k++] = b;
        }
      if (!s.biased)
        s.biased = static_cast<float*>(arena_.allocate(sizeof(float) * V * s.rows_cap));
    }
    CEILING_CUDA_CHECK(cudaMemcpyAsync(s.upload_dev, h, bytes, cudaMemcpyHostToDevice, stream_));
    const float* sample_logits = logits.as<const float>();
    if (bias_n > 0) {
      CEILING_CUDA_CHECK(cudaMemcpyAsync(s.biased, sample_logits,
                                         sizeof(float) * V * static_cast<size_t>(R),
                                         cudaMemcpyDeviceToDevice, stream_));
      const auto* b_rows = reinterpret_cast<const int32_t*>(s.upload_dev + bias_at);
      cuda::add_logit_bias(s.biased, V, b_rows, b_rows + bias_n,
                           reinterpret_cast<const float*>(b_rows + 2 * bias_n),
                           static_cast<int>(bias_n), stream_)
          .throw_if_error();
      sample_logits = s.biased;
    }
    if (penalties) {
      CEILING_CUDA_CHECK(
          cudaMemsetAsync(s.counts, 0, sizeof(int32_t) * V * static_cast<size_t>(R), stream_));
      const int32_t* dh = reinterpret_cast<const int32_t*>(s.upload_dev + hist_at);
      size_t off = 0;
      for (int r = 0; r < R; ++r) {
        const int np = static_cast<int>(reqs[r].prompt.size());
        const int ng = static_cast<int>(reqs[r].generated.size());
        cuda::counts_add_prompt(s.counts, V, r, dh + off, np, stream_).throw_if_error();
        cuda::counts_add_generated(s.counts, V, dh + off + np + ng, dh + off + np, ng, stream_)
            .throw_if_error();
        off += np + 2 * static_cast<size_t>(ng);
      }
    }
    cuda::SampleArgs a;
    a.logits = sample_logits;
    a.params = reinterpret_cast<const cuda::GpuSamplingParams*>(s.upload_dev + params_at);
    a.counts = penalties ? s.counts : nullptr;
    a.u = reinterpret_cast<const float*>(s.upload_dev + u_at);
    a.out = s.out_dev;
    a.S = R;
    a.V = V;
    cuda::sample(a, stream_).throw_if_error();
  }
  CEILING_CUDA_CHECK(cudaMemcpyAsync(s.out_host.as<int32_t>(), s.out_dev, R * sizeof(int32_t),
                                     cudaMemcpyDeviceToHost, stream_));
  CEILING_CUDA_CHECK(cudaStreamSynchronize(stream_));
  stats_.arena_bytes = arena_.bytes_reserved();
  const int32_t* out = s.out_host.as<int32_t>();
  for (int r = 0; r < R; ++r) {
    CEILING_ENSURE(out[r] >= 0, "sampling: logits row {} has a NaN or +Inf logit, or none finite",
                   r);
    ids[r] = out[r];
  }
}

}  // namespace ceiling::engine
