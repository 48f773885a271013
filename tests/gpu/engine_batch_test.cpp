// The batch-first engine on CudaOps: each prompt of a batch of mixed-length prompts, run with
// continuous batching, chunked prefill, a small KV pool (preemption) and prefix caching, against
// the same prompt run alone on the same GPU. Batching moves rows between the GEMV, cuBLASLt and
// the graph buckets, so logits differ by the bf16 rounding noise: greedy tokens must agree up to
// a near tie of the alone run (check_greedy, kNearTieOfRms · RMS of the row).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "engine/cuda/cuda_ops.h"
#include "engine_test_util.h"
#include "serve/engine.h"
#include "test_models.h"

namespace ceiling::engine::gpu_test {
namespace {

serve::EngineConfig config(int seqs, int budget, int blocks, bool prefix) {
  serve::EngineConfig c;
  c.max_model_len = 128;
  c.max_num_seqs = seqs;
  c.max_num_batched_tokens = budget;
  c.num_kv_blocks = blocks;
  c.block_size = 16;
  c.enable_prefix_caching = prefix;
  return c;
}

serve::RequestParams greedy(int n) {
  serve::RequestParams p;
  p.sampling.temperature = 0;
  p.max_tokens = n;
  p.ignore_eos = true;
  return p;
}

// A 256-wide two-layer Llama with 4 query and 2 KV heads of 128.
ModelConfig llama_d128() {
  ModelConfig c = testing::small_config(Arch::kLlama);
  c.name = "llama-d128";
  c.hidden_size = 256;
  c.intermediate_size = 344;
  c.vocab_size = 1000;
  c.head_dim = 128;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  return c;
}

// One request alone in its own engine: its tokens and the logits row of every pick (for the
// near-tie rule).
struct Alone {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
};
Alone run_alone(CudaOps& ops, const serve::EngineConfig& cfg, const std::vector<int32_t>& prompt,
                const serve::RequestParams& p) {
  serve::Engine e(ops, cfg);
  e.add_request(prompt, p);
  Alone a;
  while (e.has_unfinished())
    for (const auto& o : e.step()) {
      if (o.new_tokens.empty()) continue;
      a.tokens.insert(a.tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
      const TensorView& l = e.runner().last_logits();
      a.logits.emplace_back(static_cast<size_t>(l.numel()));
      ops.to_host(l, a.logits.back().data());
    }
  return a;
}

// All `prompts` in engine `e` at once (request i with params(i)), run to the end; each prompt's
// tokens checked against its alone run up to near ties. Returns how many are identical.
template <typename Params>
int expect_batched_matches_alone(serve::Engine& e, const std::vector<std::vector<int32_t>>& prompts,
                                 const std::vector<Alone>& want, Params params,
                                 const std::string& label) {
  std::map<int64_t, size_t> index;
  for (size_t i = 0; i < prompts.size(); ++i) index[e.add_request(prompts[i], params(i))] = i;
  std::vector<std::vector<int32_t>> got(prompts.size());
  while (e.has_unfinished())
    for (const auto& o : e.step()) {
      std::vector<int32_t>& g = got[index.at(o.id)];
      g.insert(g.end(), o.new_tokens.begin(), o.new_tokens.end());
    }
  int exact = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    bool ok = false;
    const std::string what = check_greedy(got[i], want[i].tokens, want[i].logits, &ok);
    EXPECT_TRUE(ok) << label << "prompt " << i << ": " << what;
    exact += got[i] == want[i].tokens;
  }
  return exact;
}

TEST(EngineBatch, BatchedEqualsAloneUpToNearTies) {
  ENGINE_REQUIRE_GPU();
  const uint64_t seed = fresh_seed();
  const ModelConfig c = llama_d128();
  const auto m = testing::make_random_model(c, DType::kBF16, seed);
  CudaOps ops;
  ops.upload(c, m->weights);

  std::mt19937_64 rng(seed + 1);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 24; ++i) {
    std::vector<int32_t> p(1 + rng() % 70);
    for (auto& t : p) t = static_cast<int32_t>(rng() % c.vocab_size);
    prompts.push_back(std::move(p));
  }
  for (int i = 3; i < 24; i += 4)
    prompts[static_cast<size_t>(i)] = prompts[static_cast<size_t>(i - 3)];
  const serve::RequestParams p = greedy(24);

  // Alone: one sequence at a time; the logits row of every pick kept for the near-tie rule.
  std::vector<Alone> want;
  for (const auto& q : prompts) want.push_back(run_alone(ops, config(1, 128, 16, false), q, p));
  struct Case {
    const char* name;
    serve::EngineConfig cfg;
  };
  for (const Case& k : {Case{"batched, chunked prefill", config(24, 64, 400, false)},
                        Case{"small pool (preemption)", config(24, 96, 24, false)},
                        Case{"prefix caching", config(24, 96, 400, true)}}) {
    serve::Engine e(ops, k.cfg);
    const int exact = expect_batched_matches_alone(
        e, prompts, want, [&](size_t) { return p; }, std::string(k.name) + ", ");
    std::printf("  %-26s %d/%zu prompts identical, preemptions %lld, prefix hits %lld tokens\n",
                k.name, exact, prompts.size(),
                static_cast<long long>(e.scheduler().num_preemptions()),
                static_cast<long long>(e.kv().prefix_hits()));
    EXPECT_EQ(e.kv().num_free(), e.kv().num_blocks());
    if (k.cfg.num_kv_blocks == 24) {
      EXPECT_GT(e.scheduler().num_preemptions(), 0);
    }
    if (k.cfg.enable_prefix_caching) {
      EXPECT_GT(e.kv().prefix_hits(), 0);
    }
  }
}

// Contexts long enough that the decode kernel splits them (its merge counters live in a workspace
// laid out by the plan), through the three shapes of step that use it: mixed steps (one or two
// decodes beside prefill chunks: the decodes go to the decode kernel), and graph buckets 4, 2
// and 1 in turn as requests finish, each with its own workspace. Each prompt against itself run
// alone (bucket 1, pure prefill steps), greedy up to near ties. (The fp8 cache's split path is
// checked against its reference in gpu_attention_prefill: greedy picks through an E4M3 cache
// differ between batchings by more than bf16's near-tie rule allows.)
TEST(EngineBatch, LongContextsAcrossMixedStepsAndBuckets) {
  ENGINE_REQUIRE_GPU();
  const uint64_t seed = fresh_seed();
  ModelConfig c = llama_d128();
  c.max_position_embeddings = 4096;
  const auto m = testing::make_random_model(c, DType::kBF16, seed);
  std::mt19937_64 rng(seed + 1);
  const std::vector<int> lens = {1400, 700, 1100}, outs = {30, 8, 18};
  std::vector<std::vector<int32_t>> prompts;
  for (int n : lens) {
    std::vector<int32_t> p(static_cast<size_t>(n));
    for (auto& t : p) t = static_cast<int32_t>(rng() % c.vocab_size);
    prompts.push_back(std::move(p));
  }
  auto cfg = [](int seqs) {
    serve::EngineConfig e = config(seqs, 512, 400, false);
    e.max_model_len = 2048;
    return e;
  };
  CudaOps ops;
  ops.upload(c, m->weights);
  std::vector<Alone> want;
  for (size_t i = 0; i < prompts.size(); ++i)
    want.push_back(run_alone(ops, cfg(1), prompts[i], greedy(outs[i])));
  const int replays0 = ops.stats().graph_replays;
  serve::Engine e(ops, cfg(4));
  const int exact = expect_batched_matches_alone(
      e, prompts, want, [&](size_t i) { return greedy(outs[i]); }, "");
  std::printf("  %d/%zu prompts identical; graph replays %d\n", exact, prompts.size(),
              ops.stats().graph_replays - replays0);
  EXPECT_GT(ops.stats().graph_replays, replays0);
}

}  // namespace
}  // namespace ceiling::engine::gpu_test
