// Forward on CpuOps against the naive per-token oracle (test_models.h), and the paging,
// batching and chunking invariants: paged ≡ contiguous KV, prefill of N ≡ N decode steps,
// several sequences in one step ≡ each alone, any block size and block placement.
#include "engine/forward.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "core/status.h"
#include "engine/cpu_ops.h"
#include "serve/generate.h"
#include "kernels/cpu/ref.h"
#include "test_models.h"

namespace ceiling::engine {
namespace {

using testing::make_random_model;
using testing::naive_logits;
using testing::RandomModel;
using testing::small_config;

// fp32 forward vs the double-precision oracle: max |Δ| over max |ref| of the row.
constexpr double kFp32VsDouble = 2e-5;
// Two fp32 computations of the same math that differ only in blocking/order.
constexpr double kFp32Reorder = 1e-5;

double rel_err(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(got[i])) return INFINITY;
    num = std::max(num, static_cast<double>(std::fabs(got[i] - want[i])));
    den = std::max(den, static_cast<double>(std::fabs(want[i])));
  }
  return num / std::max(den, 1e-30);
}

std::vector<int32_t> random_ids(int n, int V, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::vector<int32_t> ids(n);
  for (auto& x : ids) x = static_cast<int32_t>(rng() % V);
  return ids;
}

// Physical blocks handed out in a shuffled order, so tables are not contiguous.
std::vector<int32_t> shuffled_blocks(int num_blocks, uint64_t seed) {
  std::vector<int32_t> b(num_blocks);
  for (int i = 0; i < num_blocks; ++i) b[i] = i;
  std::shuffle(b.begin(), b.end(), std::mt19937(static_cast<uint32_t>(seed)));
  return b;
}

struct Harness {
  std::unique_ptr<RandomModel> model;
  CpuOps ops;
  std::unique_ptr<Forward> fwd;
  KvCache kv;
  Harness(const ModelConfig& c, DType dt, int block_size, int num_blocks, int max_tokens,
          int max_rows, int threads = 2, bool bf16_activations = false)
      : model(make_random_model(c, dt, 1234)), ops(CpuOpsOptions{threads, bf16_activations}) {
    ops.upload(model->config, model->weights);
    fwd = std::make_unique<Forward>(ops, ForwardLimits{max_tokens, max_rows});
    kv = ops.alloc_kv_cache(num_blocks, block_size);
  }
  // Logits rows of a step, as host vectors of V floats.
  std::vector<std::vector<float>> run(const StepBatch& step) {
    const TensorView l = fwd->run(step, kv);
    std::vector<float> all(static_cast<size_t>(l.numel()));
    ops.to_host(l, all.data());
    std::vector<std::vector<float>> out;
    const int64_t V = l.dim(1);
    for (int64_t r = 0; r < l.dim(0); ++r)
      out.emplace_back(all.begin() + r * V, all.begin() + (r + 1) * V);
    return out;
  }
};

// One sequence prefilled in one step with logits at every position.
StepBatch prefill_all_rows(const std::vector<int32_t>& ids, const std::vector<int32_t>& blocks,
                           int block_size, int max_blocks) {
  StepBatch s;
  s.max_blocks = max_blocks;
  append_sequence(s, ids, 0, blocks, block_size, false);
  for (int t = 0; t < s.num_tokens(); ++t) s.logits_rows.push_back(t);
  return s;
}

struct ArchCase {
  const char* name;
  ModelConfig config;
  DType dtype;
};

std::vector<ArchCase> arch_cases() {
  std::vector<ArchCase> cases;
  cases.push_back({"llama_f32", small_config(Arch::kLlama), DType::kF32});
  cases.push_back({"llama_bf16", small_config(Arch::kLlama), DType::kBF16});
  ModelConfig qwen2 = small_config(Arch::kQwen2);  // QKV bias
  qwen2.tie_word_embeddings = true;
  cases.push_back({"qwen2_bias_tied", qwen2, DType::kBF16});
  ModelConfig qwen3 = small_config(Arch::kQwen3);  // q/k norm, head_dim·heads != hidden
  qwen3.head_dim = 16;
  qwen3.rms_norm_eps = 1e-6;
  cases.push_back({"qwen3_qknorm", qwen3, DType::kF32});
  ModelConfig l3 = small_config(Arch::kLlama);  // llama3 rope scaling; MHA-free GQA 8:1
  l3.num_heads = 8;
  l3.num_kv_heads = 1;
  l3.head_dim = 32;
  l3.rope_theta = 500000.0;
  l3.rope_scaling = {RopeScaling::Type::kLlama3, 8.0, 1.0, 4.0, 64};
  cases.push_back({"llama3_rope_scaling", l3, DType::kBF16});
  ModelConfig lin = small_config(Arch::kMistral);
  lin.rope_scaling = {RopeScaling::Type::kLinear, 4.0, 1.0, 4.0, 8192};
  lin.num_kv_heads = 6;  // no GQA
  cases.push_back({"mistral_linear_rope_mha", lin, DType::kF32});
  return cases;
}

TEST(Forward, PrefillMatchesNaivePerTokenOracle) {
  for (const auto& ac : arch_cases()) {
    SCOPED_TRACE(ac.name);
    const int n = 37, bs = 4;
    Harness h(ac.config, ac.dtype, bs, 16, 64, 64);
    const auto ids = random_ids(n, ac.config.vocab_size, 5);
    const auto got = h.run(prefill_all_rows(ids, shuffled_blocks(16, 9), bs, 16));
    const auto want = naive_logits(*h.model, ids);
    ASSERT_EQ(got.size(), want.size());
    for (int t = 0; t < n; ++t)
      EXPECT_LT(rel_err(got[t], want[t]), kFp32VsDouble) << "position " << t;
  }
}

TEST(Forward, PrefillEqualsDecodeSteps) {
  for (const auto& ac : arch_cases()) {
    SCOPED_TRACE(ac.name);
    const int n = 21, bs = 8;
    Harness a(ac.config, ac.dtype, bs, 4, 32, 32), b(ac.config, ac.dtype, bs, 4, 1, 1);
    const auto ids = random_ids(n, ac.config.vocab_size, 6);
    const std::vector<int32_t> blocks = {2, 0, 3};
    const auto pre = a.run(prefill_all_rows(ids, blocks, bs, 4));
    for (int t = 0; t < n; ++t) {
      StepBatch s;
      s.max_blocks = 4;
      append_sequence(s, {ids[t]}, t, blocks, bs, true);
      ASSERT_TRUE(s.is_decode());
      const auto dec = b.run(s);
      EXPECT_LT(rel_err(dec[0], pre[t]), kFp32Reorder) << "position " << t;
    }
  }
}

TEST(Forward, PagedEqualsContiguousForAnyBlockSize) {
  const ModelConfig c = small_config(Arch::kQwen2);
  const int n = 40;
  const auto ids = random_ids(n, c.vocab_size, 7);
  // Contiguous: one block holds the whole sequence.
  Harness ref(c, DType::kBF16, 64, 1, 64, 64);
  const auto want = ref.run(prefill_all_rows(ids, {0}, 64, 1));
  for (int bs : {1, 3, 16, 39, 40, 41}) {
    SCOPED_TRACE(bs);
    const int nb = (n + bs - 1) / bs + 3;
    Harness h(c, DType::kBF16, bs, nb, 64, 64);
    auto blocks = shuffled_blocks(nb, bs);
    blocks.resize((n + bs - 1) / bs);
    const auto got = h.run(prefill_all_rows(ids, blocks, bs, nb));
    for (int t = 0; t < n; ++t)
      EXPECT_LT(rel_err(got[t], want[t]), kFp32Reorder) << "position " << t;
  }
}

TEST(Forward, VarlenBatchEqualsSequencesAlone) {
  const ModelConfig c = small_config(Arch::kQwen3);
  const int bs = 4, nb = 32, mb = 8;
  // Three sequences: a 9-token prefill, a 1-token prompt, and a 5-token chunk continuing a
  // 6-token context (so its chunk starts mid-block).
  const auto a = random_ids(9, c.vocab_size, 1), b = random_ids(1, c.vocab_size, 2);
  const auto d = random_ids(11, c.vocab_size, 3);
  const std::vector<int32_t> ta = {5, 1, 7}, tb = {0}, td = {9, 2, 30};

  Harness batched(c, DType::kF32, bs, nb, 32, 3);
  {  // the first 6 tokens of d, alone
    StepBatch s;
    s.max_blocks = mb;
    append_sequence(s, std::vector<int32_t>(d.begin(), d.begin() + 6), 0, td, bs, true);
    batched.run(s);
  }
  StepBatch s;
  s.max_blocks = mb;
  append_sequence(s, a, 0, ta, bs, true);
  append_sequence(s, b, 0, tb, bs, true);
  append_sequence(s, std::vector<int32_t>(d.begin() + 6, d.end()), 6, td, bs, true);
  EXPECT_FALSE(s.is_decode());
  const auto got = batched.run(s);
  ASSERT_EQ(got.size(), 3u);

  Harness alone(c, DType::kF32, bs, nb, 32, 32);
  const auto wa = naive_logits(*alone.model, a), wb = naive_logits(*alone.model, b);
  const auto wd = naive_logits(*alone.model, d);
  EXPECT_LT(rel_err(got[0], wa.back()), kFp32VsDouble);
  EXPECT_LT(rel_err(got[1], wb.back()), kFp32VsDouble);
  EXPECT_LT(rel_err(got[2], wd.back()), kFp32VsDouble);
}

TEST(Forward, BatchedDecodeOfManySequences) {
  const ModelConfig c = small_config(Arch::kLlama);
  const int bs = 2, S = 5;
  Harness h(c, DType::kBF16, bs, 64, 64, S);
  std::vector<std::vector<int32_t>> seqs, tables;
  for (int s = 0; s < S; ++s) {
    seqs.push_back(random_ids(3 + 2 * s, c.vocab_size, 40 + s));
    tables.push_back({});
    for (int b = 0; b < 8; ++b) tables.back().push_back(s * 8 + (b * 5) % 8);
  }
  StepBatch pre;  // all prompts but their last token in one step
  pre.max_blocks = 8;
  for (int s = 0; s < S; ++s)
    append_sequence(pre, std::vector<int32_t>(seqs[s].begin(), seqs[s].end() - 1), 0, tables[s], bs,
                    false);
  h.run(pre);
  StepBatch dec;  // then one decode step for all of them
  dec.max_blocks = 8;
  for (int s = 0; s < S; ++s)
    append_sequence(dec, {seqs[s].back()}, static_cast<int>(seqs[s].size()) - 1, tables[s], bs,
                    true);
  EXPECT_TRUE(dec.is_decode());
  const auto got = h.run(dec);
  for (int s = 0; s < S; ++s)
    EXPECT_LT(rel_err(got[s], naive_logits(*h.model, seqs[s]).back()), kFp32VsDouble)
        << "seq " << s;
}

TEST(Forward, RejectsStepsOutsideItsLimits) {
  Harness h(small_config(), DType::kF32, 4, 4, 8, 1);
  StepBatch s;
  s.max_blocks = 4;
  append_sequence(s, random_ids(9, 101, 1), 0, {0, 1, 2}, 4, true);
  EXPECT_THROW(h.fwd->run(s, h.kv), Error);  // 9 tokens > max_tokens 8
  StepBatch bad;
  bad.max_blocks = 4;
  append_sequence(bad, {1, 2}, 0, {7}, 4, true);  // block 7 of a 4-block cache
  EXPECT_THROW(h.fwd->run(bad, h.kv), Error);
  StepBatch oov;
  oov.max_blocks = 4;
  append_sequence(oov, {1, 101}, 0, {0}, 4, true);  // token id == vocab size
  EXPECT_THROW(h.fwd->run(oov, h.kv), Error);
}

// bf16_activations (the GPU tests' rounding-noise reference): what reaches the KV cache is
// bf16-representable, and the logits move off the fp32 ones by rounding noise — not zero, not far.
TEST(CpuOps, Bf16ActivationsRoundWhatTheyStore) {
  for (const auto& ac : arch_cases()) {
    SCOPED_TRACE(ac.name);
    const int n = 23, bs = 4;
    Harness ref(ac.config, ac.dtype, bs, 8, 32, 32),
        emu(ac.config, ac.dtype, bs, 8, 32, 32, 2, true);
    const auto ids = random_ids(n, ac.config.vocab_size, 11);
    const auto want = ref.run(prefill_all_rows(ids, shuffled_blocks(8, 3), bs, 8));
    const auto got = emu.run(prefill_all_rows(ids, shuffled_blocks(8, 3), bs, 8));
    ASSERT_EQ(got.size(), want.size());
    double worst = 0;
    for (int t = 0; t < n; ++t) worst = std::max(worst, rel_err(got[t], want[t]));
    EXPECT_GT(worst, 1e-4);
    EXPECT_LT(worst, 0.1);
    int64_t written = 0;
    for (const TensorView* c : {&emu.kv.k[0], &emu.kv.v[1]})
      for (int64_t i = 0; i < c->numel(); ++i) {
        const float x = c->as<float>()[i];
        if (std::isnan(x)) continue;  // a slot no token wrote (alloc poisons with NaN)
        ++written;
        ASSERT_EQ(x, bf16_to_f32(f32_to_bf16(x))) << "cache element " << i;
      }
    EXPECT_EQ(written, int64_t{n} * ac.config.num_kv_heads * ac.config.head_dim * 2);
  }
}

TEST(CpuOps, ThreadedLinearMatchesReference) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  for (int threads : {1, 2, 3}) {
    CpuOps ops(CpuOpsOptions{threads});
    for (auto [T, N, K] : {std::tuple{1, 1, 1}, {1, 257, 63}, {7, 1031, 129}, {33, 64, 5}}) {
      for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
        std::vector<float> x(T * K), wf(N * K), bias(N);
        for (auto* v : {&x, &wf, &bias})
          for (auto& e : *v) e = nd(rng);
        std::vector<uint16_t> w16(N * K);
        TensorView w(wf.data(), DType::kF32, {N, K});
        if (dt != DType::kF32) {
          for (int i = 0; i < N * K; ++i)
            w16[i] = dt == DType::kBF16 ? f32_to_bf16(wf[i]) : f32_to_f16(wf[i]);
          w = TensorView(w16.data(), dt, {N, K});
        }
        TensorView b(bias.data(), DType::kF32, {N});
        std::vector<float> got(T * N, NAN), want(T * N, NAN);
        ops.linear(x.data(), w, &b, T, got.data(), N);
        cpu::linear(x.data(), w, &b, T, want.data());
        EXPECT_LT(rel_err(got, want), kFp32Reorder) << T << "x" << N << "x" << K;
      }
    }
  }
}

TEST(CpuOps, Llama3RopeFrequenciesMatchTheHfFormula) {
  ModelConfig c = small_config();
  c.head_dim = 128;
  c.rope_theta = 500000.0;
  c.rope_scaling = {RopeScaling::Type::kLlama3, 32.0, 1.0, 4.0, 8192};
  const auto f = cpu::rope_inv_freq(c);
  // Values of transformers' _compute_llama3_parameters for Llama-3.2 (theta 5e5, factor 32):
  // high frequencies are kept, low ones divided by the factor, the middle band smoothed.
  EXPECT_FLOAT_EQ(f[0], 1.0f);
  EXPECT_FLOAT_EQ(f[10], static_cast<float>(1.0 / std::pow(500000.0, 20.0 / 128)));
  EXPECT_FLOAT_EQ(f[63], static_cast<float>(1.0 / std::pow(500000.0, 126.0 / 128) / 32.0));
  int smoothed = 0;
  for (int i = 0; i < 64; ++i) {
    const double base = 1.0 / std::pow(500000.0, 2.0 * i / 128);
    if (f[i] < base * 0.999 && f[i] > base / 32 * 1.001) ++smoothed;
  }
  EXPECT_GT(smoothed, 0);
}

TEST(CpuOps, UploadChecksWeights) {
  const ModelConfig c = small_config(Arch::kQwen2);
  auto m = make_random_model(c, DType::kF32, 1);
  {
    CpuOps ops;
    auto w = m->weights;
    w.layers[1].k_bias = TensorView();
    EXPECT_THROW(ops.upload(c, w), Error);
  }
  {
    CpuOps ops;
    auto w = m->weights;
    w.layers[0].o_proj.shape[1] -= 1;
    try {
      ops.upload(c, w);
      FAIL();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("layers.0.o_proj"), std::string::npos) << e.what();
    }
  }
  CpuOps ops;
  EXPECT_NO_THROW(ops.upload(c, m->weights));
  EXPECT_THROW(ops.upload(c, m->weights), Error);
}

// ---- Generator ----------------------------------------------------------------------------

TEST(Generator, GreedyFollowsTheOracleArgmax) {
  const ModelConfig c = small_config(Arch::kQwen3);
  auto m = make_random_model(c, DType::kBF16, 77);
  CpuOps ops;
  ops.upload(c, m->weights);
  Generator gen(ops, GeneratorLimits{64, 4, 5});  // prompt of 9 is prefilled in 2 chunks
  const auto prompt = random_ids(9, c.vocab_size, 8);
  GenerateOptions o;
  o.sampling.temperature = 0;
  o.max_new_tokens = 12;
  std::vector<int32_t> streamed;
  const auto r = gen.generate(prompt, o, [&](int32_t id) {
    streamed.push_back(id);
    return true;
  });
  EXPECT_EQ(r.finish, FinishReason::kMaxTokens);
  ASSERT_EQ(r.tokens.size(), 12u);
  EXPECT_EQ(streamed, r.tokens);
  EXPECT_EQ(r.stats.prompt_tokens, 9);
  EXPECT_EQ(r.stats.generated_tokens, 12);
  auto seq = prompt;
  for (int32_t tok : r.tokens) {
    const auto l = naive_logits(*m, seq).back();
    const int32_t want = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    EXPECT_EQ(tok, want) << "after " << seq.size() << " tokens";
    seq.push_back(want);
  }
}

TEST(Generator, StopsOnStopTokenCallbackAndModelLength) {
  const ModelConfig c = small_config();
  auto m = make_random_model(c, DType::kF32, 3);
  CpuOps ops;
  ops.upload(c, m->weights);
  Generator gen(ops, GeneratorLimits{20, 4, 8});
  const auto prompt = random_ids(6, c.vocab_size, 1);
  GenerateOptions o;
  o.sampling.temperature = 0;
  o.max_new_tokens = 100;
  const auto full = gen.generate(prompt, o);
  EXPECT_EQ(full.finish, FinishReason::kMaxModelLen);
  EXPECT_EQ(full.tokens.size(), 14u);  // 6 + 14 = max_model_len 20

  o.stop_token_ids = {full.tokens[3]};
  const auto stopped = gen.generate(prompt, o);
  EXPECT_EQ(stopped.finish, FinishReason::kStopToken);
  const auto first = std::find(full.tokens.begin(), full.tokens.end(), full.tokens[3]);
  EXPECT_EQ(stopped.tokens, std::vector<int32_t>(full.tokens.begin(), first));

  o.stop_token_ids = {};
  int calls = 0;
  const auto cb = gen.generate(prompt, o, [&](int32_t) { return ++calls < 5; });
  EXPECT_EQ(cb.finish, FinishReason::kStopString);
  EXPECT_EQ(cb.tokens.size(), 5u);

  EXPECT_THROW(gen.generate({}, o), Error);
  EXPECT_THROW(gen.generate(random_ids(20, c.vocab_size, 2), o), Error);
}

TEST(Generator, SeededSamplingIsReproducible) {
  const ModelConfig c = small_config();
  auto m = make_random_model(c, DType::kF32, 4);
  CpuOps ops;
  ops.upload(c, m->weights);
  Generator gen(ops, GeneratorLimits{64, 16, 16});
  GenerateOptions o;
  o.sampling.temperature = 1.0f;
  o.sampling.top_p = 0.9f;
  o.max_new_tokens = 20;
  o.sampling.seed = 42;
  const auto a = gen.generate({1, 2, 3}, o), b = gen.generate({1, 2, 3}, o);
  EXPECT_EQ(a.tokens, b.tokens);
  o.sampling.seed = 43;
  EXPECT_NE(gen.generate({1, 2, 3}, o).tokens, a.tokens);
}

}  // namespace
}  // namespace ceiling::engine
