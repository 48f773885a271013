#include "serve/model_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/status.h"
#include "dist/tp_group.h"
#include "kernels/cpu/sampling.h"

namespace ceiling::serve {

namespace {

double seconds_since(std::chrono::steady_clock::time_point& t) {
  const auto now = std::chrono::steady_clock::now();
  const double s = std::chrono::duration<double>(now - t).count();
  t = now;
  return s;
}

constexpr int64_t kCpuKvCap = int64_t{4} << 30;  // bytes (vLLM's default CPU KV space)

engine::ForwardLimits forward_limits(const RunnerConfig& c) {
  return {c.max_num_batched_tokens, c.max_num_seqs};
}

}  // namespace

int64_t kv_block_bytes(const ModelConfig& c, int block_size, DType kv_dtype) {
  return 2 * static_cast<int64_t>(dtype_bytes(kv_dtype, static_cast<size_t>(c.num_layers) *
                                                            c.num_kv_heads * block_size *
                                                            static_cast<size_t>(c.head_dim)));
}

ModelRunner::ModelRunner(engine::Ops& ops, const RunnerConfig& config)
    : ops_(&ops), model_(ops.config()), config_(config) {
  const int blocks = size_cache(ops.config(), ops.kv_dtype(),
                                [&ops](size_t* f, size_t* t) { return ops.device_memory(f, t); });
  forward_ = std::make_unique<engine::Forward>(ops, forward_limits(config_));
  kv_ = ops.alloc_kv_cache(blocks, config_.block_size);
  kv_bytes_ = kv_block_bytes(ops.config(), config_.block_size, ops.kv_dtype()) * blocks;
}

ModelRunner::ModelRunner(dist::TpGroup& tp, const RunnerConfig& config)
    : tp_(&tp), model_(tp.config()), config_(config) {
  const int blocks = size_cache(tp.rank_config(), tp.kv_dtype(),
                                [&tp](size_t* f, size_t* t) { return tp.device_memory(f, t); });
  tp.init(forward_limits(config_), blocks, config_.block_size);
  kv_.num_blocks = blocks;
  kv_bytes_ =
      kv_block_bytes(tp.rank_config(), config_.block_size, tp.kv_dtype()) * blocks * tp.world();
}

ModelRunner::~ModelRunner() = default;

engine::Ops& ModelRunner::ops() {
  CEILING_ENSURE(ops_ != nullptr, "the model runner is tensor parallel: no single Ops");
  return *ops_;
}

int ModelRunner::tensor_parallel_size() const {
  return tp_ ? tp_->world() : 1;
}

int ModelRunner::size_cache(const ModelConfig& device_model, DType kv_dtype,
                            const std::function<bool(size_t*, size_t*)>& device_memory) {
  const RunnerConfig& c = config_;
  CEILING_ENSURE(c.block_size >= 1 && c.block_size <= 1024,
                 "--block-size must be in [1, 1024] (got {})", c.block_size);
  CEILING_ENSURE(c.max_model_len >= 1, "--max-model-len must be >= 1 (got {})", c.max_model_len);
  CEILING_ENSURE(c.num_kv_blocks >= 0, "--num-kv-blocks must be >= 0 (got {})", c.num_kv_blocks);
  CEILING_ENSURE(c.gpu_memory_utilization > 0 && c.gpu_memory_utilization <= 1,
                 "--gpu-memory-utilization must be in (0, 1] (got {})", c.gpu_memory_utilization);
  max_blocks_ = (c.max_model_len + c.block_size - 1) / c.block_size;
  int blocks = c.num_kv_blocks;
  if (blocks > 0) {
    sizing_note_ = "--num-kv-blocks";
  } else {
    blocks = kv_blocks_from_memory(device_model, kv_dtype, device_memory);
  }
  CEILING_ENSURE(blocks >= max_blocks_,
                 "KV cache: {} blocks of {} tokens cannot hold one sequence of --max-model-len {} "
                 "({} blocks); lower --max-model-len or give the cache more memory ({})",
                 blocks, c.block_size, c.max_model_len, max_blocks_, sizing_note_);
  return blocks;
}

int ModelRunner::kv_blocks_from_memory(const ModelConfig& mc, DType kv_dtype,
                                       const std::function<bool(size_t*, size_t*)>& device_memory) {
  const int64_t block = kv_block_bytes(mc, config_.block_size, kv_dtype);
  size_t free_b = 0, total_b = 0;
  if (!device_memory(&free_b, &total_b)) {
    const int64_t want = int64_t{config_.max_num_seqs} * max_blocks_;
    const int64_t cap = std::max<int64_t>(kCpuKvCap / block, max_blocks_);
    sizing_note_ = fmt::format("host memory: {} sequences of max_model_len, at most 4 GiB",
                               config_.max_num_seqs);
    return static_cast<int>(std::min({want, cap, int64_t{1} << 30}));
  }
  // Reserve for what is allocated after start-up: the sampler's per-row token counts and
  // buffers (R × V int32 + f32), attention split-KV and cuBLASLt workspaces, graph memory.
  const double reserve = 2.0 * config_.max_num_seqs * model_.vocab_size * 4.0 + double(512 << 20);
  const double used = static_cast<double>(total_b - free_b);
  const double budget =
      config_.gpu_memory_utilization * static_cast<double>(total_b) - used - reserve;
  sizing_note_ = fmt::format(
      "{:.2f} of {:.1f} GiB, {:.2f} GiB in use after weights and workspace, {:.2f} GiB reserved",
      config_.gpu_memory_utilization, total_b / 1073741824.0, used / 1073741824.0,
      reserve / 1073741824.0);
  CEILING_ENSURE(budget >= static_cast<double>(block),
                 "KV cache: no device memory left for it ({}); raise --gpu-memory-utilization or "
                 "lower --max-num-batched-tokens / --max-num-seqs",
                 sizing_note_);
  return static_cast<int>(std::min(budget / static_cast<double>(block), double(1 << 30)));
}

std::vector<int32_t> ModelRunner::run(const SchedulerOutput& out,
                                      std::vector<TokenLogprob>* logprobs) {
  auto t = std::chrono::steady_clock::now();
  timing_ = {};
  engine::StepBatch step;
  step.max_blocks = max_blocks_;
  std::vector<int> row_of(out.seqs.size(), -1);  // logits row of each entry
  std::vector<int32_t> ids;
  int rows = 0;
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    const ScheduledSeq& s = out.seqs[i];
    const Sequence& q = *s.seq;
    ids.resize(static_cast<size_t>(s.num_new));
    for (int j = 0; j < s.num_new; ++j) ids[static_cast<size_t>(j)] = q.token(q.num_computed + j);
    engine::append_sequence(step, ids, q.num_computed, q.block_table, config_.block_size,
                            s.want_logits);
    if (s.want_logits) row_of[i] = rows++;
  }
  timing_.build_s = seconds_since(t);
  if (tp_) {
    logits_ = tp_->run_gathered(step);  // [rows, V] in rank 0's memory
  } else {
    logits_ = forward_->run(step, kv_);
  }
  timing_.forward_s = seconds_since(t);

  std::vector<int32_t> result(out.seqs.size(), -1);
  if (rows == 0) return result;
  std::vector<engine::SampleRequest> reqs;
  reqs.reserve(static_cast<size_t>(rows));
  // Per row: the request's logit_bias, plus -Inf on its min_tokens mask while it applies.
  std::vector<std::vector<cpu::LogitBias>> bias(static_cast<size_t>(rows));
  bool want_lp = false;
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    if (row_of[i] < 0) continue;
    const Sequence& q = *out.seqs[i].seq;
    std::vector<cpu::LogitBias>& b = bias[reqs.size()];
    b = q.params.logit_bias;
    if (static_cast<int>(q.output.size()) < q.params.min_tokens)
      for (int32_t id : q.min_tokens_mask) b.emplace_back(id, -INFINITY);
    reqs.push_back({q.params.sampling,
                    cpu::sampling_uniform(q.params.sampling.seed, q.output.size()), q.prompt,
                    q.output, b});
    want_lp = want_lp || q.params.logprobs >= 0;
  }
  std::vector<int32_t> sampled(static_cast<size_t>(rows));
  if (tp_) {
    tp_->sample(logits_, reqs, sampled.data());  // rank 0's sampler
  } else {
    ops_->sample(logits_, reqs, sampled.data());
  }
  timing_.sample_s = seconds_since(t);
  for (size_t i = 0; i < out.seqs.size(); ++i)
    if (row_of[i] >= 0) result[i] = sampled[static_cast<size_t>(row_of[i])];

  if (want_lp && logprobs) {
    // Log-softmax of the model's raw logits (before penalties and temperature, as vLLM's
    // default), computed on the host from one copy of the step's logits rows.
    const int V = model_.vocab_size;
    host_logits_ = last_logits_host();
    logprobs->assign(out.seqs.size(), TokenLogprob{});
    for (size_t i = 0; i < out.seqs.size(); ++i) {
      const Sequence& q = *out.seqs[i].seq;
      if (row_of[i] < 0 || q.params.logprobs < 0) continue;
      const float* l = host_logits_.data() + static_cast<size_t>(row_of[i]) * V;
      double mx = -INFINITY;
      for (int v = 0; v < V; ++v) mx = std::max(mx, double(l[v]));
      double sum = 0;
      for (int v = 0; v < V; ++v) sum += std::exp(double(l[v]) - mx);
      const double lse = mx + std::log(sum);
      TokenLogprob& lp = (*logprobs)[i];
      lp.id = result[i];
      lp.logprob = static_cast<float>(l[result[i]] - lse);
      const int k = std::min(q.params.logprobs, V);
      if (k > 0) {
        std::vector<int32_t> idx(static_cast<size_t>(V));
        for (int v = 0; v < V; ++v) idx[static_cast<size_t>(v)] = v;
        std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
          return l[a] > l[b] || (l[a] == l[b] && a < b);
        });
        for (int j = 0; j < k; ++j)
          lp.top.emplace_back(idx[static_cast<size_t>(j)],
                              static_cast<float>(l[idx[static_cast<size_t>(j)]] - lse));
      }
    }
  }
  return result;
}

std::vector<float> ModelRunner::last_logits_host() {
  std::vector<float> host(static_cast<size_t>(logits_.numel()));
  if (host.empty()) return host;
  if (tp_) {
    tp_->to_host(logits_, host.data());
  } else {
    ops_->to_host(logits_, host.data());
  }
  return host;
}

}  // namespace ceiling::serve
