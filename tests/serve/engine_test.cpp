// The Engine on real tiny models (the bundled stories260K with its tokenizer, and random
// in-memory models of each architecture), on CpuOps, which computes each row the same way
// whatever the batch: greedy outputs must not depend on batching, chunking, preemption or
// prefix-cache hits, byte for byte.
#include "serve/engine.h"

#include <gtest/gtest.h>

#include <random>

#include "engine/cpu_ops.h"
#include "engine/test_models.h"
#include "model/weights.h"

namespace ceiling::serve {
namespace {

const std::filesystem::path kStories =
    std::filesystem::path(CEILING_SOURCE_DIR) / "models/stories260K";

std::vector<std::vector<int32_t>> mixed_prompts(int n, int vocab, uint64_t seed, int max_len) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> p(1 + rng() % static_cast<uint64_t>(max_len));
    p[0] = 1;  // BOS
    for (size_t j = 1; j < p.size(); ++j) p[j] = static_cast<int32_t>(rng() % vocab);
    out.push_back(std::move(p));
  }
  // Some prompts share long prefixes with earlier ones (prefix-cache hits inside one batch).
  for (int i = 4; i < n; i += 5) {
    auto p = out[static_cast<size_t>(i - 4)];
    p.push_back(static_cast<int32_t>(rng() % vocab));
    out[static_cast<size_t>(i)] = p;
  }
  return out;
}

RequestParams greedy(int max_tokens) {
  RequestParams p;
  p.sampling.temperature = 0;
  p.max_tokens = max_tokens;
  return p;
}

// Runs every prompt through `engine` at once; outputs in prompt order. Checks the block
// manager's invariants after every step.
std::vector<std::vector<int32_t>> run_all(Engine& engine,
                                          const std::vector<std::vector<int32_t>>& prompts,
                                          const RequestParams& p) {
  std::map<int64_t, size_t> index;
  for (size_t i = 0; i < prompts.size(); ++i) index[engine.add_request(prompts[i], p)] = i;
  std::vector<std::vector<int32_t>> out(prompts.size());
  while (engine.has_unfinished()) {
    for (const RequestOutput& o : engine.step()) {
      auto& v = out[index.at(o.id)];
      v.insert(v.end(), o.new_tokens.begin(), o.new_tokens.end());
    }
    engine.kv().check_invariants(engine.scheduler().live());
  }
  return out;
}

struct StoriesEngine : ::testing::Test {
  Model model = load_model(kStories);
  Tokenizer tok = Tokenizer::from_dir(kStories);
  engine::CpuOps ops{engine::CpuOpsOptions{2}};
  void SetUp() override { ops.upload(model.config, model.weights); }
  EngineConfig config(int seqs, int budget, int blocks, bool prefix) {
    EngineConfig c;
    c.max_model_len = 128;
    c.max_num_seqs = seqs;
    c.max_num_batched_tokens = budget;
    c.num_kv_blocks = blocks;
    c.block_size = 4;
    c.enable_prefix_caching = prefix;
    c.eos_token_ids = {2};
    return c;
  }
  // Each prompt alone: one sequence, whole-prompt steps, no prefix cache.
  std::vector<std::vector<int32_t>> alone(const std::vector<std::vector<int32_t>>& prompts,
                                          const RequestParams& p) {
    Engine e(ops, config(1, 128, 32, false));
    std::vector<std::vector<int32_t>> out;
    for (const auto& q : prompts) out.push_back(run_all(e, {q}, p)[0]);
    return out;
  }
};

TEST_F(StoriesEngine, BatchOf32MixedPromptsEqualsEachPromptAlone) {
  const auto prompts = mixed_prompts(32, model.config.vocab_size, 11, 60);
  const RequestParams p = greedy(40);
  const auto want = alone(prompts, p);
  {  // continuous batching with chunked prefill mixed into decode steps
    Engine e(ops, config(32, 48, 2048, false));
    EXPECT_EQ(run_all(e, prompts, p), want);
    EXPECT_GT(e.stats().batch_size_sum, e.stats().steps);  // really batched
  }
  {  // a KV pool so small that sequences are preempted and recomputed
    Engine e(ops, config(32, 64, 40, false));
    EXPECT_EQ(run_all(e, prompts, p), want);
    EXPECT_GT(e.scheduler().num_preemptions(), 0);
    EXPECT_EQ(e.kv().num_free(), 40);
  }
  {  // prefix caching: hits inside the batch, then the whole batch again from the cache
    Engine e(ops, config(32, 64, 2048, true));
    EXPECT_EQ(run_all(e, prompts, p), want);
    const int64_t hits = e.kv().prefix_hits();
    EXPECT_GT(hits, 0);
    EXPECT_EQ(run_all(e, prompts, p), want);
    EXPECT_GT(e.kv().prefix_hits(), hits + 200);
  }
  {  // preemption and prefix caching together (a preempted sequence may hit its own blocks)
    Engine e(ops, config(32, 64, 40, true));
    EXPECT_EQ(run_all(e, prompts, p), want);
    EXPECT_GT(e.scheduler().num_preemptions(), 0);
    EXPECT_EQ(e.kv().num_free(), 40);
  }
}

TEST_F(StoriesEngine, SampledOutputsDoNotDependOnBatchingEither) {
  const auto prompts = mixed_prompts(12, model.config.vocab_size, 5, 30);
  RequestParams p = greedy(30);
  p.sampling = {
      .temperature = 0.9f, .top_k = 40, .top_p = 0.95f, .presence_penalty = 0.3f, .seed = 123};
  EXPECT_EQ(run_all(*std::make_unique<Engine>(ops, config(12, 32, 60, true)), prompts, p),
            alone(prompts, p));
}

TEST_F(StoriesEngine, AbortsReturnEveryBlock) {
  for (bool prefix : {false, true}) {
    Engine e(ops, config(16, 64, 256, prefix));
    const int free0 = e.kv().num_free();
    const auto prompts = mixed_prompts(100, model.config.vocab_size, 3, 40);
    std::vector<int64_t> ids;
    RequestParams p = greedy(30);
    p.ignore_eos = true;
    for (const auto& q : prompts) ids.push_back(e.add_request(q, p));
    int steps = 0, finished = 0, aborted = 0;
    while (e.has_unfinished()) {
      if (++steps % 7 == 0 && steps / 7 <= 10) {
        EXPECT_TRUE(e.abort(ids[static_cast<size_t>(steps / 7 * 9)]));
      }
      for (const RequestOutput& o : e.step()) {
        if (!o.finished) continue;
        ++finished;
        aborted += o.finish == FinishReason::kAbort;
      }
      e.kv().check_invariants(e.scheduler().live());
    }
    e.step();
    EXPECT_EQ(aborted, 10);
    EXPECT_EQ(finished, 100);
    EXPECT_EQ(e.kv().num_free(), free0) << "prefix caching " << prefix;
    EXPECT_FALSE(e.abort(ids[0]));
  }
}

TEST_F(StoriesEngine, RejectsRequestsThatCanNeverRunAndDisturbsNothing) {
  Engine e(ops, config(4, 64, 40, true));
  const int64_t ok = e.add_request({1, 5, 6}, greedy(5));
  auto expect_error = [&](std::vector<int32_t> prompt, RequestParams p, const char* what) {
    try {
      e.add_request(std::move(prompt), p);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(what), std::string::npos) << err.what();
    }
  };
  expect_error({}, greedy(5), "empty");
  expect_error({1, 512}, greedy(5), "outside the vocabulary");
  expect_error({1, -1}, greedy(5), "outside the vocabulary");
  expect_error(std::vector<int32_t>(100, 3), greedy(29), "exceeds max_model_len 128");
  expect_error({1}, greedy(0), "max_tokens");
  RequestParams bad = greedy(5);
  bad.sampling.top_p = 0;
  expect_error({1}, bad, "top_p");
  expect_error({1}, greedy(128), "exceeds max_model_len 128");  // 1 + 128 > 128
  // (A request that fits max_model_len always fits the cache: the engine refuses a cache that
  // cannot hold one sequence of max_model_len, ConfigErrorsNameTheFlag.)
  EXPECT_EQ(e.num_waiting(), 1);
  std::vector<int32_t> out;
  while (e.has_unfinished())
    for (const RequestOutput& o : e.step()) {
      EXPECT_EQ(o.id, ok);
      out.insert(out.end(), o.new_tokens.begin(), o.new_tokens.end());
    }
  EXPECT_EQ(out.size(), 5u);
}

TEST_F(StoriesEngine, ConfigErrorsNameTheFlag) {
  EngineConfig c = config(4, 64, 20, true);
  c.max_model_len = 100000;
  EXPECT_THROW(
      {
        try {
          Engine e(ops, c);
        } catch (const Error& err) {
          EXPECT_NE(std::string(err.what()).find("max_position_embeddings 512"), std::string::npos);
          throw;
        }
      },
      Error);
  c = config(4, 64, 20, true);
  c.block_size = 0;
  EXPECT_THROW(Engine(ops, c), Error);
  c = config(8, 4, 20, true);  // budget below the sequence cap
  EXPECT_THROW(Engine(ops, c), Error);
  c = config(4, 64, 2, true);  // 2 blocks of 4 cannot hold max_model_len 128
  EXPECT_THROW(Engine(ops, c), Error);
}

TEST_F(StoriesEngine, TextStopStringsAndFinishReasons) {
  Engine e(ops, config(4, 64, 256, true), &tok);
  const std::vector<int32_t> prompt = tok.encode("Once upon a time", true);
  RequestParams p = greedy(60);
  std::string full;
  std::vector<int32_t> ids;
  RequestOutput last;
  e.add_request(prompt, p);
  while (e.has_unfinished())
    for (RequestOutput& o : e.step()) {
      full += o.new_text;
      ids.insert(ids.end(), o.new_tokens.begin(), o.new_tokens.end());
      if (o.finished) last = o;
    }
  ASSERT_FALSE(full.empty());
  std::vector<int32_t> text_ids = ids;
  if (last.finish == FinishReason::kStop) text_ids.pop_back();  // the EOS
  const std::string prompt_text = tok.decode(prompt, true);
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), text_ids.begin(), text_ids.end());
  EXPECT_EQ(full, tok.decode(all, true).substr(prompt_text.size()));

  // A stop string from the middle of that text: output ends right before it, reason "stop".
  const std::string stop = full.substr(full.size() / 2, 5);
  p.stop = {stop};
  std::string cut;
  e.add_request(prompt, p);
  while (e.has_unfinished())
    for (RequestOutput& o : e.step()) {
      cut += o.new_text;
      if (o.finished) last = o;
    }
  EXPECT_EQ(cut, full.substr(0, full.find(stop)));
  EXPECT_EQ(last.finish, FinishReason::kStop);
  EXPECT_EQ(last.stop_reason, stop);

  p.stop.clear();
  p.max_tokens = 3;
  p.ignore_eos = true;
  e.add_request(prompt, p);
  while (e.has_unfinished())
    for (RequestOutput& o : e.step())
      if (o.finished) last = o;
  EXPECT_EQ(last.finish, FinishReason::kLength);
  EXPECT_EQ(last.completion_tokens, 3);
}

TEST_F(StoriesEngine, LogprobsAreTheLogSoftmaxOfTheLogits) {
  Engine e(ops, config(4, 64, 256, false));
  RequestParams p = greedy(4);
  p.logprobs = 5;
  const std::vector<int32_t> prompt = {1, 403, 407};
  e.add_request(prompt, p);
  std::vector<TokenLogprob> lps;
  std::vector<float> first_logits;
  while (e.has_unfinished()) {
    const auto outs = e.step();
    if (first_logits.empty()) {
      const TensorView& l = e.runner().last_logits();
      first_logits.resize(static_cast<size_t>(l.numel()));
      ops.to_host(l, first_logits.data());
    }
    for (const auto& o : outs) lps.insert(lps.end(), o.new_logprobs.begin(), o.new_logprobs.end());
  }
  ASSERT_EQ(lps.size(), 4u);
  double mx = -1e30, sum = 0;
  for (float v : first_logits) mx = std::max(mx, double(v));
  for (float v : first_logits) sum += std::exp(double(v) - mx);
  const double lse = mx + std::log(sum);
  const TokenLogprob& t = lps[0];
  EXPECT_NEAR(t.logprob, first_logits[static_cast<size_t>(t.id)] - lse, 1e-5);
  ASSERT_EQ(t.top.size(), 5u);
  EXPECT_EQ(t.top[0].first, t.id);  // greedy: the sampled token is the most likely
  for (size_t k = 1; k < t.top.size(); ++k) EXPECT_GE(t.top[k - 1].second, t.top[k].second);
  for (const auto& [id, lp] : t.top)
    EXPECT_NEAR(lp, first_logits[static_cast<size_t>(id)] - lse, 1e-5);
}

// Random in-memory models of each architecture (biases, qk-norm, GQA): batched equals alone.
TEST_F(StoriesEngine, MinTokensMasksEosAndLogitBiasSteersTheSampler) {
  const std::vector<int32_t> prompt = tok.encode("Once upon a time", true);
  Engine plain_engine(ops, config(4, 64, 256, true), &tok);
  // Greedy's first three tokens; then an engine whose EOS is the first of them.
  Engine* cur = &plain_engine;
  auto run = [&](const RequestParams& p) {
    RequestOutput last;
    std::vector<int32_t> ids;
    cur->add_request(prompt, p);
    while (cur->has_unfinished())
      for (RequestOutput& o : cur->step()) {
        ids.insert(ids.end(), o.new_tokens.begin(), o.new_tokens.end());
        if (o.finished) last = o;
      }
    return std::make_pair(ids, last.finish);
  };
  const std::vector<int32_t> plain = run(greedy(3)).first;
  ASSERT_EQ(plain.size(), 3u);
  EngineConfig c = config(4, 64, 256, true);
  c.eos_token_ids = {plain[0]};
  Engine e(ops, c, &tok);
  cur = &e;
  EXPECT_EQ(run(greedy(8)), std::make_pair(std::vector<int32_t>{plain[0]}, FinishReason::kStop));
  // min_tokens = 3 masks that EOS for the first three tokens: none of them is plain[0].
  RequestParams p = greedy(8);
  p.min_tokens = 3;
  const std::vector<int32_t> held = run(p).first;
  ASSERT_GE(held.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_NE(held[static_cast<size_t>(i)], plain[0]) << i;
  // The same for a stop token id (with EOS ignored).
  p = greedy(8);
  p.ignore_eos = true;
  p.stop_token_ids = {plain[0]};
  EXPECT_EQ(run(p).first, std::vector<int32_t>{plain[0]});
  p.min_tokens = 2;
  const std::vector<int32_t> held2 = run(p).first;
  ASSERT_GE(held2.size(), 2u);
  EXPECT_NE(held2[0], plain[0]);
  EXPECT_NE(held2[1], plain[0]);

  // logit_bias: -100 on the greedy first token changes it; +100 on a token makes it every pick.
  cur = &plain_engine;
  p = greedy(5);
  p.logit_bias = {{plain[0], -100.0f}};
  EXPECT_NE(run(p).first[0], plain[0]);
  p.logit_bias = {{77, 100.0f}};
  p.sampling.temperature = 0.8f;
  p.ignore_eos = true;
  EXPECT_EQ(run(p).first, std::vector<int32_t>(5, 77));
  p.logit_bias = {{512, 1.0f}};  // outside the vocabulary
  EXPECT_THROW(e.add_request(prompt, p), Error);
  p.logit_bias = {{7, 101.0f}};
  EXPECT_THROW(e.add_request(prompt, p), Error);
}

TEST(EngineRandomModels, BatchInvarianceAcrossArchitectures) {
  for (Arch arch : {Arch::kLlama, Arch::kQwen2, Arch::kQwen3}) {
    const ModelConfig c = engine::testing::small_config(arch);
    auto m = engine::testing::make_random_model(c, DType::kF32, 77);
    engine::CpuOps ops{engine::CpuOpsOptions{2}};
    ops.upload(m->config, m->weights);
    const auto prompts = mixed_prompts(10, c.vocab_size, 9, 20);
    const RequestParams p = greedy(12);
    EngineConfig one;
    one.max_model_len = 64;
    one.max_num_seqs = 1;
    one.num_kv_blocks = 16;
    one.block_size = 4;
    one.enable_prefix_caching = false;
    Engine alone(ops, one);
    std::vector<std::vector<int32_t>> want;
    for (const auto& q : prompts) want.push_back(run_all(alone, {q}, p)[0]);
    EngineConfig many = one;
    many.max_num_seqs = 10;
    many.max_num_batched_tokens = 24;
    many.num_kv_blocks = 30;
    many.enable_prefix_caching = true;
    Engine batched(ops, many);
    EXPECT_EQ(run_all(batched, prompts, p), want) << arch_name(arch);
  }
}

}  // namespace
}  // namespace ceiling::serve
