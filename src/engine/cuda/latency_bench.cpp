#include "engine/cuda/latency_bench.h"

#include <cuda_profiler_api.h>
#include <fmt/format.h>

#include <memory>
#include <random>

#include "core/check.h"
#include "engine/block_allocator.h"
#include "engine/forward.h"

namespace ceiling::engine {
namespace {

int next_pow2(int n) {
  int p = 1;
  while (p < n) p <<= 1;
  return p;
}

std::string fnv1a64(const std::vector<float>& v) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* b = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t i = 0; i < v.size() * sizeof(float); ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  return fmt::format("fnv1a64:{:016x}", h);
}

class EventTimer {
 public:
  explicit EventTimer(cudaStream_t s) : s_(s) {
    CEILING_CUDA_CHECK(cudaEventCreate(&a_));
    CEILING_CUDA_CHECK(cudaEventCreate(&b_));
  }
  ~EventTimer() {
    cudaEventDestroy(a_);
    cudaEventDestroy(b_);
  }
  void start() { CEILING_CUDA_CHECK(cudaEventRecord(a_, s_)); }
  double stop_ms() {
    CEILING_CUDA_CHECK(cudaEventRecord(b_, s_));
    CEILING_CUDA_CHECK(cudaEventSynchronize(b_));
    float ms = 0;
    CEILING_CUDA_CHECK(cudaEventElapsedTime(&ms, a_, b_));
    return ms;
  }

 private:
  cudaStream_t s_;
  cudaEvent_t a_ = nullptr, b_ = nullptr;
};

// One pass: prefill every prompt, then `steps` decode steps; fills `r` when `timed`.
void run_pass(CudaOps& ops, Forward& fwd, KvCache& kv, BlockAllocator& blocks,
              const std::vector<std::vector<int32_t>>& prompts, const LatencyOptions& o, bool timed,
              LatencyResult& r) {
  const int B = o.batch, N = o.input_len, bs = o.block_size;
  std::vector<std::unique_ptr<SequenceBlocks>> seqs;
  for (int b = 0; b < B; ++b) {
    seqs.push_back(std::make_unique<SequenceBlocks>(blocks, bs));
    seqs.back()->reserve(N + o.output_len);
  }
  const cpu::SamplingParams greedy{.temperature = 0.0f};
  std::vector<SampleRequest> reqs(B, SampleRequest{greedy, 0.0f, {}, {}});
  std::vector<int32_t> last(B);
  EventTimer timer(ops.stream());

  // Prefill: whole prompts, as many per step as the forward takes.
  timer.start();
  for (int b0 = 0; b0 < B;) {
    StepBatch step;
    step.max_blocks = blocks.num_blocks();
    int b1 = b0;
    while (b1 < B && (b1 - b0 + 1) * N <= fwd.limits().max_tokens) {
      append_sequence(step, prompts[b1], 0, seqs[b1]->table(), bs, true);
      ++b1;
    }
    const TensorView logits = fwd.run(step, kv);
    ops.sample(logits, std::span<const SampleRequest>(reqs.data(), b1 - b0), last.data() + b0);
    b0 = b1;
  }
  const double ttft = timer.stop_ms();
  if (timed) {
    r.ttft_ms = ttft;
    r.tokens = {last[0]};
  }

  auto decode_step = [&](int i) {
    StepBatch step;
    step.max_blocks = blocks.num_blocks();
    for (int b = 0; b < B; ++b) append_sequence(step, {last[b]}, N + i, seqs[b]->table(), bs, true);
    const TensorView logits = fwd.run(step, kv);
    if (timed && i == 0) {
      std::vector<float> host(static_cast<size_t>(logits.numel()));
      ops.to_host(logits, host.data());
      r.logits_hash = fnv1a64(host);
    }
    ops.sample(logits, reqs, last.data());
    if (timed) r.tokens.push_back(last[0]);
  };
  decode_step(0);  // untimed: it hashes the logits (a host copy)
  timer.start();
  for (int i = 1; i < o.output_len; ++i) {
    const bool profile = timed && i == o.profile_step;
    if (profile) CEILING_CUDA_CHECK(cudaProfilerStart());
    decode_step(i);
    if (profile) CEILING_CUDA_CHECK(cudaProfilerStop());
  }
  const double ms = timer.stop_ms();
  if (timed) {
    r.timed_steps = o.output_len - 1;
    r.decode_ms = ms;
    if (ops.cuda_graphs()) r.graph_replay_ms = ops.time_graph_replays(50);
  }
}

}  // namespace

double decode_weight_bytes(const ModelConfig& c, int batch) {
  const double H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const double Q = c.q_dim(), KV = c.kv_dim(), D = c.head_dim;
  double layer = (Q + 2 * KV) * H + H * Q + 2 * I * H + H * I + 2 * H;
  if (c.attention_bias) layer += Q + 2 * KV;
  if (c.qk_norm) layer += 2 * D;
  // Layers, final norm, lm_head (the whole [V, H], tied or not), B embedding rows; bf16.
  return 2.0 * (c.num_layers * layer + H + V * H + batch * H);
}

double decode_kv_bytes(const ModelConfig& c, int batch, double context) {
  const double per_token = 2.0 * c.num_layers * c.kv_dim() * 2.0;  // K and V, bf16, all layers
  return batch * per_token * (context + 2.0);  // read context + 1 tokens (new one too), write 1
}

LatencyResult run_latency(CudaOps& ops, const LatencyOptions& o) {
  const ModelConfig& c = ops.config();
  CEILING_ENSURE(o.batch >= 1 && o.input_len >= 1 && o.output_len >= 2 && o.block_size >= 1,
                 "bench latency: need batch >= 1, input_len >= 1, output_len >= 2, block_size >= "
                 "1 (got {}, {}, {}, {})",
                 o.batch, o.input_len, o.output_len, o.block_size);
  const int B = o.batch, N = o.input_len;
  const int per_seq = (N + o.output_len + o.block_size - 1) / o.block_size;
  ForwardLimits lim;
  lim.max_tokens = std::max({N, std::min(B * N, 8192), next_pow2(B)});
  lim.max_logits_rows = std::max(next_pow2(B), B);
  Forward fwd(ops, lim);
  KvCache kv = ops.alloc_kv_cache(B * per_seq, o.block_size);
  BlockAllocator blocks(B * per_seq);

  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<int32_t> tok(0, c.vocab_size - 1);
  std::vector<std::vector<int32_t>> prompts(B, std::vector<int32_t>(N));
  for (auto& p : prompts)
    for (auto& t : p) t = tok(rng);

  LatencyResult r;
  run_pass(ops, fwd, kv, blocks, prompts, o, /*timed=*/false, r);
  run_pass(ops, fwd, kv, blocks, prompts, o, /*timed=*/true, r);
  r.ms_per_token = r.decode_ms / r.timed_steps;
  r.tokens_per_s = B * 1000.0 / r.ms_per_token;
  // Timed steps i = 1 .. M-1 read a context of N + i cached tokens: mean N + M/2.
  r.weight_bytes_per_step = decode_weight_bytes(c, B);
  r.kv_bytes_per_step = decode_kv_bytes(c, B, N + o.output_len / 2.0);
  r.bytes_per_step = r.weight_bytes_per_step + r.kv_bytes_per_step;
  return r;
}

}  // namespace ceiling::engine
