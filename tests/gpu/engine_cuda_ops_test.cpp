// CudaOps pieces: the upload (f32 / f16 checkpoints converted on the GPU give the bf16 upload's
// logits; progress reaches the total), NaN-poisoned workspace, graph replay vs eager steps, the
// GPU sampler vs cpu::sample_token (penalties included), error paths, and the latency loop.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "core/status.h"
#include "engine/cpu_ops.h"
#include "engine/cuda/cuda_ops.h"
#include "engine_test_util.h"
#include "kernels/cpu/sampling.h"
#include "serve/latency_bench.h"
#include "test_models.h"

namespace ceiling::engine::gpu_test {
namespace {

ModelConfig mid_config(int head_dim) {
  return mid_llama(head_dim, 344, fmt::format("llama-d{}", head_dim));
}

// Host copies of bf16 weights in `dtype` (f32: exact; f16: exact for normal f16 values).
struct Converted {
  ModelWeights views;
  std::vector<std::vector<float>> f32;
  std::vector<std::vector<uint16_t>> f16;
};
std::unique_ptr<Converted> convert(const ModelWeights& w, DType dtype) {
  auto out = std::make_unique<Converted>();
  auto conv = [&](const TensorView& t) {
    if (!t.data) return t;
    TensorView r = t;
    r.dtype = dtype;
    const size_t n = static_cast<size_t>(t.numel());
    if (dtype == DType::kF32) {
      out->f32.emplace_back(n);
      for (size_t i = 0; i < n; ++i) out->f32.back()[i] = load_as_f32(t.data, t.dtype, i);
      r.data = out->f32.back().data();
    } else {
      out->f16.emplace_back(n);
      for (size_t i = 0; i < n; ++i)
        out->f16.back()[i] = f32_to_f16(load_as_f32(t.data, t.dtype, i));
      r.data = out->f16.back().data();
    }
    return r;
  };
  out->views.embed = conv(w.embed);
  out->views.final_norm = conv(w.final_norm);
  out->views.lm_head = w.lm_head.data == w.embed.data ? out->views.embed : conv(w.lm_head);
  for (const LayerWeights& l : w.layers) {
    LayerWeights o = l;
    for (TensorView* t : {&o.input_norm, &o.q_proj, &o.k_proj, &o.v_proj, &o.q_bias, &o.k_bias,
                          &o.v_bias, &o.q_norm, &o.k_norm, &o.o_proj, &o.post_attn_norm,
                          &o.gate_proj, &o.up_proj, &o.down_proj})
      *t = conv(*t);
    out->views.layers.push_back(o);
  }
  return out;
}

std::vector<float> prompt_logits(const ModelConfig& c, const ModelWeights& w,
                                 const std::vector<int32_t>& prompt, uint64_t* progress_done,
                                 uint64_t* progress_total) {
  CudaOpsOptions o;
  o.upload_progress = [&](uint64_t d, uint64_t t) {
    *progress_done = d;
    *progress_total = t;
  };
  CudaOps gpu(o);
  gpu.upload(c, w);
  StepDriver d(gpu, 64, 1, 8, 16);
  return d.prefill({prompt}, 64)[0];
}

TEST(EngineCudaOps, UploadConvertsF32AndF16OnTheGpu) {
  ENGINE_REQUIRE_GPU();
  ModelConfig c = mid_config(64);
  c.attention_bias = true;
  const auto m = testing::make_random_model(c, DType::kBF16, fresh_seed());
  const std::vector<int32_t> prompt = {5, 17, 999, 0, 42, 42, 7};
  uint64_t done = 0, total = 0;
  const auto ref = prompt_logits(c, m->weights, prompt, &done, &total);
  EXPECT_EQ(done, total);
  EXPECT_GT(total, 0u);
  const auto f32 = convert(m->weights, DType::kF32);
  const auto got32 = prompt_logits(c, f32->views, prompt, &done, &total);
  EXPECT_EQ(done, 2 * (total / 2));
  EXPECT_EQ(rel_err(got32, ref), 0.0) << "bf16 values given as f32 must upload bit-exactly";
  const auto f16 = convert(m->weights, DType::kF16);
  const double e16 = rel_err(prompt_logits(c, f16->views, prompt, &done, &total), ref);
  std::printf("  f16 upload vs bf16 upload: logits rel err %.3g\n", e16);
  EXPECT_LT(e16, 1e-3);
}

TEST(EngineCudaOps, AllocPoisonsWithNaN) {
  ENGINE_REQUIRE_GPU();
  CudaOps gpu;
  for (DType t : {DType::kBF16, DType::kF32}) {
    const TensorView v = gpu.alloc(t, {3, 5});
    std::vector<float> h(15, 0.0f);
    gpu.to_host(v, h.data());
    for (float x : h) EXPECT_TRUE(std::isnan(x));
  }
}

TEST(EngineCudaOps, GraphReplayMatchesEagerSteps) {
  ENGINE_REQUIRE_GPU();
  const uint64_t seed = fresh_seed();
  for (int d : {64, 128}) {
    const ModelConfig c = mid_config(d);
    const auto m = testing::make_random_model(c, DType::kBF16, seed + d);
    CudaOpsOptions on, off;
    off.cuda_graphs = false;
    CudaOps g(on), e(off);
    CpuOps cpu, emu(CpuOpsOptions{.bf16_activations = true});
    g.upload(c, m->weights);
    e.upload(c, m->weights);
    cpu.upload(c, m->weights);
    emu.upload(c, m->weights);
    StepDriver dg(g, 64, 8, 64, 16), de(e, 64, 8, 64, 16), dc(cpu, 64, 8, 64, 16),
        dn(emu, 64, 8, 64, 16);
    const std::vector<std::vector<int32_t>> prompts = {
        {1, 2, 3}, {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1}, {500}, {77, 66}, {3, 1, 4, 1, 5}};
    dg.prefill(prompts, 64);
    de.prefill(prompts, 64);
    dc.prefill(prompts, 64);
    dn.prefill(prompts, 64);
    std::vector<int32_t> next = {11, 22, 33, 44, 55};
    double worst = 0;
    NoiseCheck graph_check, eager_check;
    for (int i = 0; i < 8; ++i) {
      // The graph runs the bucket's 8 rows, eager the 5 real ones, so the dispatch may differ
      // (fused GEMV vs norm kernel + cuBLASLt at the crossover): both against the CPU reference.
      const auto lg = dg.decode(next), le = de.decode(next), lc = dc.decode(next),
                 ln = dn.decode(next);
      worst = std::max(worst, rel_err(lg, le));
      graph_check.expect(lg, lc, ln, fmt::format("graph, head_dim {} step {}", d, i));
      eager_check.expect(le, lc, ln, fmt::format("eager, head_dim {} step {}", d, i));
      for (int s = 0; s < 5; ++s)
        next[s] = argmax(le.data() + int64_t{s} * c.vocab_size, c.vocab_size);
    }
    std::printf(
        "  head_dim %d, batch 5 (bucket 8): graph vs eager worst rel err %.3g; graphs "
        "%d captured, %d replays; eager %d steps\n  vs cpu: graph %s; eager %s\n",
        d, worst, g.stats().graph_captures, g.stats().graph_replays, e.stats().eager_steps,
        graph_check.summary().c_str(), eager_check.summary().c_str());
    EXPECT_EQ(g.stats().graph_captures, 1);
    EXPECT_EQ(g.stats().graph_replays, 6);  // step 1 warms, step 2 captures, 3..8 replay
    EXPECT_EQ(e.stats().graph_replays, 0);
  }
}

// At a batch equal to its bucket (1 and 8: no padding rows) the graph replays exactly the kernels
// the eager step launches, so the logits must agree bit for bit.
TEST(EngineCudaOps, GraphReplayIsBitExactAtBucketSize) {
  ENGINE_REQUIRE_GPU();
  const uint64_t seed = fresh_seed();
  const ModelConfig c = mid_config(128);
  const auto m = testing::make_random_model(c, DType::kBF16, seed);
  for (int batch : {1, 8}) {
    SCOPED_TRACE("batch " + std::to_string(batch) + " seed " + std::to_string(seed));
    CudaOpsOptions on, off;
    off.cuda_graphs = false;
    CudaOps g(on), e(off);
    g.upload(c, m->weights);
    e.upload(c, m->weights);
    StepDriver dg(g, 64, 8, 64, 16), de(e, 64, 8, 64, 16);
    std::vector<std::vector<int32_t>> prompts;
    std::vector<int32_t> next;
    for (int b = 0; b < batch; ++b) {
      prompts.push_back({3 + b, 100 + 7 * b, 5});
      next.push_back(11 * b + 1);
    }
    dg.prefill(prompts, 64);
    de.prefill(prompts, 64);
    for (int i = 0; i < 6; ++i) {
      const auto lg = dg.decode(next), le = de.decode(next);
      ASSERT_EQ(lg.size(), le.size());
      int64_t differ = 0;
      for (size_t j = 0; j < lg.size(); ++j) differ += lg[j] != le[j];
      EXPECT_EQ(differ, 0) << "step " << i << ": logits differing between graph and eager";
      for (int b = 0; b < batch; ++b)
        next[b] = argmax(le.data() + int64_t{b} * c.vocab_size, c.vocab_size);
    }
    EXPECT_GT(g.stats().graph_replays, 0);
    EXPECT_EQ(e.stats().graph_replays, 0);
  }
}

TEST(EngineCudaOps, SamplerMatchesCpuSampling) {
  ENGINE_REQUIRE_GPU();
  CudaOps gpu;
  gpu.upload(mid_config(64), testing::make_random_model(mid_config(64), DType::kBF16, 1)->weights);
  std::mt19937_64 rng(fresh_seed());
  std::normal_distribution<float> nd(0.0f, 3.0f);
  const int R = 5, V = 1000;
  const TensorView logits = gpu.alloc(DType::kF32, {R, V});
  std::vector<int32_t> prompt = {1, 2, 3, 500, 999}, generated = {7, 7, 8, 999};
  int agree = 0, total = 0;
  for (int round = 0; round < 20; ++round) {
    std::vector<float> host(R * V);
    for (auto& x : host) x = nd(rng);
    gpu.from_host(host.data(), logits);
    std::vector<SampleRequest> reqs(R);
    reqs[0].params.temperature = 0;  // greedy with penalties
    reqs[0].params.repetition_penalty = 1.3f;
    reqs[1].params.temperature = 0.8f;
    reqs[1].params.top_k = 50;
    reqs[2].params.temperature = 1.0f;
    reqs[2].params.top_p = 0.9f;
    reqs[2].params.presence_penalty = 0.5f;
    reqs[2].params.frequency_penalty = 0.25f;
    reqs[3].params.temperature = 1.5f;
    reqs[3].params.min_p = 0.05f;
    reqs[4].params.temperature = 0.7f;
    // Logit biases (logit_bias, min_tokens masks): on the greedy row, its argmax masked and
    // another token pushed; on row 3 a repeated id; row 4 with none.
    const int32_t top0 =
        static_cast<int32_t>(std::max_element(host.begin(), host.begin() + V) - host.begin());
    const std::vector<cpu::LogitBias> bias0 = {{top0, -INFINITY}, {(top0 + 17) % V, 4.0f}};
    const std::vector<cpu::LogitBias> bias3 = {{11, 3.0f}, {11, 3.0f}, {12, -100.0f}};
    reqs[0].bias = bias0;
    reqs[3].bias = bias3;
    for (int r = 0; r < R; ++r) {
      reqs[r].u = cpu::sampling_uniform(rng(), r);
      reqs[r].prompt = prompt;
      reqs[r].generated = generated;
    }
    std::vector<int32_t> ids(R, -7);
    gpu.sample(logits, reqs, ids.data());
    EXPECT_NE(ids[0], top0);
    for (int r = 0; r < R; ++r) {
      const int32_t want = cpu::sample_token(host.data() + r * V, V, reqs[r].params, prompt,
                                             generated, reqs[r].u, reqs[r].bias);
      agree += ids[r] == want;
      ++total;
    }
  }
  std::printf("  GPU sampler agrees with cpu::sample_token on %d of %d picks\n", agree, total);
  EXPECT_EQ(agree, total);

  // Plain greedy (argmax path) on logits that no graph produced.
  std::vector<float> host(R * V);
  for (auto& x : host) x = nd(rng);
  gpu.from_host(host.data(), logits);
  std::vector<SampleRequest> greedy(R);
  for (auto& q : greedy) q.params.temperature = 0;
  std::vector<int32_t> ids(R);
  gpu.sample(logits, greedy, ids.data());
  for (int r = 0; r < R; ++r) EXPECT_EQ(ids[r], argmax(host.data() + r * V, V));

  // A NaN logit makes a sampled row fail, as on the CPU.
  host[3] = NAN;
  gpu.from_host(host.data(), logits);
  std::vector<SampleRequest> hot(R);
  EXPECT_THROW(gpu.sample(logits, hot, ids.data()), Error);
}

TEST(EngineCudaOps, RejectsForeignCacheAndStepsWithoutPrepare) {
  ENGINE_REQUIRE_GPU();
  const ModelConfig c = mid_config(64);
  const auto m = testing::make_random_model(c, DType::kBF16, 3);
  CudaOps a, b;
  a.upload(c, m->weights);
  b.upload(c, m->weights);
  KvCache foreign = b.alloc_kv_cache(4, 16);
  StepBatch step;
  step.max_blocks = 4;
  append_sequence(step, {1, 2, 3}, 0, {0}, 16, true);
  EXPECT_THROW(a.prepare(step, foreign), Error);
  const TensorView out = a.alloc(DType::kBF16, {3, c.hidden_size});
  EXPECT_THROW(a.embedding(out), Error);  // no prepared step
  KvCache own = a.alloc_kv_cache(4, 16);
  StepBatch bad = step;
  bad.slot_mapping[1] = 63;  // disagrees with the block table
  EXPECT_THROW(a.prepare(bad, own), Error);
}

// The fused QKV output stays inside CudaOps until a view is read: the q/k/v views must still
// hold x·Wᵀ after qkv_proj, and q its rotation after rope_kv_write (op by op, vs CPU).
TEST(EngineCudaOps, QkvViewsHoldTheirValuesWhenRead) {
  ENGINE_REQUIRE_GPU();
  ModelConfig c = mid_config(64);
  c.attention_bias = true;
  const auto m = testing::make_random_model(c, DType::kBF16, fresh_seed());
  CpuOps cpu;
  CudaOps gpu;
  cpu.upload(c, m->weights);
  gpu.upload(c, m->weights);
  for (int T : {1, 3}) {
    StepBatch step;
    step.max_blocks = 2;
    std::vector<int32_t> ids;
    for (int t = 0; t < T; ++t) ids.push_back(17 * t + 5);
    append_sequence(step, ids, 0, {1}, 16, true);
    std::vector<std::vector<float>> got, want;
    for (Ops* ops : {static_cast<Ops*>(&gpu), static_cast<Ops*>(&cpu)}) {
      const DType a = ops->act_dtype();
      KvCache kv = ops->alloc_kv_cache(2, 16);
      const TensorView x = ops->alloc(a, {T, c.hidden_size}), q = ops->alloc(a, {T, c.q_dim()});
      const TensorView k = ops->alloc(a, {T, c.kv_dim()}), v = ops->alloc(a, {T, c.kv_dim()});
      ops->prepare(step, kv);
      ops->embedding(x);
      ops->qkv_proj(0, x, q, k, v);
      auto& out = ops == &gpu ? got : want;
      for (const TensorView& t : {q, k, v}) {
        out.emplace_back(t.numel());
        ops->to_host(t, out.back().data());
      }
      ops->qkv_proj(0, x, q, k, v);  // again: pending, then rope reads it in place
      ops->rope_kv_write(0, q, k, v, kv);
      out.emplace_back(q.numel());  // (k after rope: CpuOps rotates it in place, CudaOps not)
      ops->to_host(q, out.back().data());
    }
    const char* names[] = {"q", "k", "v", "rotated q"};
    for (int i = 0; i < 4; ++i) {
      const double e = rel_err(got[i], want[i]);
      std::printf("  T=%d %-12s rel err %.3g\n", T, names[i], e);
      EXPECT_LT(e, 1e-2) << names[i] << " T=" << T;
    }
  }
}

TEST(EngineCudaOps, LatencyLoopRunsWithAndWithoutGraphs) {
  ENGINE_REQUIRE_GPU();
  const ModelConfig c = mid_config(128);
  const auto m = testing::make_random_model(c, DType::kBF16, fresh_seed());
  for (bool graphs : {true, false}) {
    CudaOpsOptions o;
    o.cuda_graphs = graphs;
    CudaOps gpu(o);
    gpu.upload(c, m->weights);
    LatencyOptions lo;
    lo.batch = 3;
    lo.input_len = 20;
    lo.output_len = 9;
    const LatencyResult r = run_latency(gpu, lo);
    std::printf("  graphs %d: ttft %.3f ms, %.3f ms/step, %.0f tok/s, %s; replays %d\n", graphs,
                r.ttft_ms, r.ms_per_token, r.tokens_per_s, r.logits_hash.c_str(),
                gpu.stats().graph_replays);
    EXPECT_GT(r.tokens_per_s, 0);
    EXPECT_EQ(r.timed_steps, 7);  // 9 tokens: 1 from the prefill, 8 decode steps, the first untimed
    EXPECT_EQ(r.tokens.size(), 9u);
    EXPECT_EQ(r.logits_hash.size(), std::string("fnv1a64:").size() + 16);
    EXPECT_EQ(gpu.stats().graph_replays > 0, graphs);
    EXPECT_EQ(r.graph_replay_ms > 0, graphs);
  }
}

}  // namespace
}  // namespace ceiling::engine::gpu_test
