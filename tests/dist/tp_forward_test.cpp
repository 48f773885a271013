// Tensor parallel on CpuOps: TP = 2 and 4 against TP = 1. The forward's logits of a prefill
// (every row) and of greedy decode steps agree within fp32 reordering noise (the row-parallel
// partial sums and the all-reduce change the order of the additions, nothing else), and the
// greedy tokens are the same, on random models of each architecture and on stories260K; through
// the Engine (batching, chunked prefill, prefix caching) the greedy outputs are identical.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>

#include "dist/shard.h"
#include "dist/tp_group.h"
#include "engine/cpu_ops.h"
#include "model/quantize.h"
#include "model/weights.h"
#include "serve/engine.h"
#include "test_models.h"

namespace ceiling::dist {
namespace {

using engine::CpuOps;
using engine::CpuOpsOptions;
using engine::StepBatch;

// max |Δ| / max |ref| over a logits row: fp32 sums of the same terms in another order, through a
// few layers (CpuOps's own blocking differences stay under 1e-5; see forward_test.cpp).
constexpr double kTpReorder = 3e-5;

const std::filesystem::path kStories =
    std::filesystem::path(CEILING_SOURCE_DIR) / "models/stories260K";

double rel_err(const float* got, const float* want, int n) {
  double num = 0, den = 0;
  for (int i = 0; i < n; ++i) {
    if (std::isnan(got[i])) return INFINITY;
    num = std::max(num, static_cast<double>(std::fabs(got[i] - want[i])));
    den = std::max(den, static_cast<double>(std::fabs(want[i])));
  }
  return num / std::max(den, 1e-30);
}

int argmax(const float* l, int n) {
  return static_cast<int>(std::max_element(l, l + n) - l);
}

TpOptions cpu_tp(int world, CpuOpsOptions ops = CpuOpsOptions{1}) {
  TpOptions o;
  o.world = world;
  o.timeout = std::chrono::seconds(30);
  o.make_ops = [ops](int) { return std::make_unique<CpuOps>(ops); };
  return o;
}

// TP = 1 and TP = world side by side on one sequence: a prefill with logits at every row, then
// greedy decode steps; logits and tokens compared at every step.
void compare_sequence(const ModelConfig& c, const ModelWeights& w, int world, uint64_t seed,
                      CpuOpsOptions ops = CpuOpsOptions{1}) {
  const int bs = 4, nb = 24, steps = 6, P = 11, V = c.vocab_size;
  const engine::ForwardLimits limits{32, 32};
  CpuOps ref_ops(ops);
  ref_ops.upload(c, w);
  engine::Forward ref(ref_ops, limits);
  engine::KvCache kv = ref_ops.alloc_kv_cache(nb, bs);
  TpGroup tp(c, w, cpu_tp(world, ops));
  tp.init(limits, nb, bs);

  std::vector<int32_t> blocks(nb);
  for (int i = 0; i < nb; ++i) blocks[static_cast<size_t>(i)] = nb - 1 - i;
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::vector<int32_t> ids(P);
  for (auto& x : ids) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(V));

  StepBatch step;
  step.max_blocks = nb;
  engine::append_sequence(step, ids, 0, blocks, bs, false);
  for (int t = 0; t < P; ++t) step.logits_rows.push_back(t);
  for (int s = 0; s <= steps; ++s) {
    SCOPED_TRACE(testing::Message() << "step " << s);
    const TensorView rl = ref.run(step, kv);
    std::vector<float> want(static_cast<size_t>(rl.numel()));
    ref_ops.to_host(rl, want.data());
    const std::span<const float> got = tp.run(step);
    ASSERT_EQ(got.size(), want.size());
    const int R = step.num_logits_rows();
    for (int r = 0; r < R; ++r) {
      const float* g = got.data() + int64_t{r} * V;
      const float* x = want.data() + int64_t{r} * V;
      EXPECT_LT(rel_err(g, x, V), kTpReorder) << "row " << r;
      EXPECT_EQ(argmax(g, V), argmax(x, V)) << "row " << r;
    }
    const int32_t next = argmax(want.data() + int64_t{R - 1} * V, V);
    const int pos = static_cast<int>(ids.size());
    ids.push_back(next);
    step = StepBatch{};
    step.max_blocks = nb;
    engine::append_sequence(step, {next}, pos, blocks, bs, true);
  }
}

struct Case {
  const char* name;
  ModelConfig config;
  DType dtype;
  std::vector<int> worlds;
};

std::vector<Case> cases() {
  using engine::testing::small_config;
  std::vector<Case> out;
  out.push_back({"llama_f32", small_config(Arch::kLlama), DType::kF32, {2}});
  ModelConfig qwen2 = small_config(Arch::kQwen2);  // QKV bias, tied embeddings
  qwen2.tie_word_embeddings = true;
  out.push_back({"qwen2_bias_tied_bf16", qwen2, DType::kBF16, {2}});
  ModelConfig qwen3 = small_config(Arch::kQwen3);  // q/k norm
  qwen3.head_dim = 16;
  out.push_back({"qwen3_qknorm", qwen3, DType::kF32, {2}});
  ModelConfig gqa = small_config(Arch::kLlama);  // 8 heads, 2 KV heads: replicated at TP = 4
  gqa.num_heads = 8;
  gqa.num_kv_heads = 2;
  out.push_back({"llama_gqa_8_2", gqa, DType::kF32, {2, 4}});
  ModelConfig mqa = small_config(Arch::kMistral);  // one KV head for every rank
  mqa.num_heads = 8;
  mqa.num_kv_heads = 1;
  mqa.head_dim = 16;
  out.push_back({"mistral_mqa", mqa, DType::kBF16, {2, 4}});
  return out;
}

TEST(TensorParallel, RandomModelsMatchTp1) {
  for (const Case& k : cases()) {
    const auto m = engine::testing::make_random_model(k.config, k.dtype, 77);
    for (int world : k.worlds) {
      SCOPED_TRACE(testing::Message() << k.name << " TP=" << world);
      compare_sequence(m->config, m->weights, world, 5);
    }
  }
}

// Quantized projections (fp8 rows with their scales; int4 with groups of 8, so o_proj's 24 and
// down_proj's 40 inputs a rank are whole groups) shard as their dense form: every rank holds
// exactly the quantized values TP = 1 reads, so the logits differ by fp32 reordering only. An fp8
// KV cache too: each rank rounds its heads through E4M3 as TP = 1 does. (Deterministic: fixed
// seeds, one thread a rank; a reordering that moved a cached value across an E4M3 rounding
// boundary would show as a 6 % step in it.)
TEST(TensorParallel, QuantizedWeightsAndFp8KvMatchTp1) {
  const ModelConfig c = engine::testing::small_config(Arch::kLlama);  // 6 heads, 2 KV heads
  const auto m = engine::testing::make_random_model(c, DType::kBF16, 91);
  for (WeightFormat fmt : {WeightFormat::kFp8, WeightFormat::kInt4}) {
    ModelWeights q = m->weights;
    WeightArena arena;
    quantize_projections(q, fmt, 8, arena);
    for (bool fp8_kv : {false, true}) {
      SCOPED_TRACE(testing::Message() << weight_format_name(fmt) << (fp8_kv ? " fp8 KV" : ""));
      CpuOpsOptions o{1};
      o.fp8_kv_cache = fp8_kv;
      compare_sequence(m->config, q, 2, 13, o);
    }
  }
}

TEST(TensorParallel, Int4GroupsStraddlingRanksAreOneLineErrors) {
  ModelConfig c = engine::testing::small_config(Arch::kLlama);  // o_proj 48 → 24 inputs a rank
  const auto m = engine::testing::make_random_model(c, DType::kBF16, 92);
  ModelWeights q = m->weights;
  WeightArena arena;
  quantize_projections(q, WeightFormat::kInt4, 16, arena);
  try {
    shard_weights(m->config, q, 0, 2);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "tensor parallel: layers.0.self_attn.o_proj has int4 groups of 16 inputs, which "
                 "do not divide the 24 inputs of each rank (--tensor-parallel-size 2)");
  }
}

TEST(TensorParallel, Stories260kMatchesTp1) {
  const Model m = load_model(kStories);
  for (int world : {2, 4}) {
    SCOPED_TRACE(testing::Message() << "TP=" << world);
    compare_sequence(m.config, m.weights, world, 9);
  }
}

TEST(TensorParallel, BadSizeIsOneLineError) {
  const Model m = load_model(kStories);  // 8 heads, 4 KV heads, intermediate 172
  try {
    TpGroup tp(m.config, m.weights, cpu_tp(3));
    FAIL() << "TP = 3 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("num_attention_heads 8"), std::string::npos) << e.what();
  }
}

TEST(TensorParallel, RankFailureFailsTheGroupWithoutHanging) {
  const Model m = load_model(kStories);
  TpOptions o = cpu_tp(2);
  o.make_ops = [](int rank) -> std::unique_ptr<engine::Ops> {
    if (rank == 1) fail("rank 1 has no device");
    return std::make_unique<CpuOps>(CpuOpsOptions{1});
  };
  try {
    TpGroup tp(m.config, m.weights, o);
    FAIL() << "the group started";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 has no device"), std::string::npos) << e.what();
  }
}

TEST(TensorParallel, WatchdogNamesAStuckRank) {
  const Model m = load_model(kStories);
  TpOptions o = cpu_tp(2);
  o.timeout = std::chrono::milliseconds(100);
  o.make_ops = [](int rank) -> std::unique_ptr<engine::Ops> {
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return std::make_unique<CpuOps>(CpuOpsOptions{1});
  };
  try {
    TpGroup tp(m.config, m.weights, o);
    FAIL() << "the group started";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("watchdog"), std::string::npos) << e.what();
  }
}

// ---- through the Engine -------------------------------------------------------------------

std::vector<std::vector<int32_t>> prompts(int n, int V, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> p(2 + rng() % 20);
    p[0] = 1;
    for (size_t j = 1; j < p.size(); ++j) p[j] = static_cast<int32_t>(rng() % V);
    out.push_back(p);
  }
  out.push_back(out[0]);  // a prefix-cache hit
  out.back().push_back(3);
  return out;
}

std::vector<std::vector<int32_t>> run_all(serve::Engine& e,
                                          const std::vector<std::vector<int32_t>>& ps) {
  serve::RequestParams p;
  p.sampling.temperature = 0;
  p.max_tokens = 12;
  p.ignore_eos = true;
  std::map<int64_t, size_t> index;
  for (size_t i = 0; i < ps.size(); ++i) index[e.add_request(ps[i], p)] = i;
  std::vector<std::vector<int32_t>> out(ps.size());
  while (e.has_unfinished())
    for (const serve::RequestOutput& o : e.step()) {
      auto& v = out[index.at(o.id)];
      v.insert(v.end(), o.new_tokens.begin(), o.new_tokens.end());
    }
  return out;
}

serve::EngineConfig engine_config() {
  serve::EngineConfig c;
  c.max_model_len = 64;
  c.max_num_seqs = 4;
  c.max_num_batched_tokens = 24;  // chunked prefill beside decodes
  c.block_size = 4;
  c.num_kv_blocks = 48;  // tight: preemption happens
  return c;
}

TEST(TensorParallel, EngineGreedyOutputsMatchTp1) {
  const Model m = load_model(kStories);
  const auto ps = prompts(7, m.config.vocab_size, 21);
  CpuOps ops(CpuOpsOptions{1});
  ops.upload(m.config, m.weights);
  serve::Engine e1(ops, engine_config());
  const auto want = run_all(e1, ps);
  for (int world : {2, 4}) {
    SCOPED_TRACE(testing::Message() << "TP=" << world);
    TpGroup tp(m.config, m.weights, cpu_tp(world));
    serve::Engine e(tp, engine_config());
    EXPECT_EQ(e.runner().tensor_parallel_size(), world);
    EXPECT_EQ(run_all(e, ps), want);
    // A bad request is rejected before it reaches the ranks; the group stays usable.
    EXPECT_THROW(e.add_request({1, m.config.vocab_size}, serve::RequestParams{}), Error);
    EXPECT_EQ(run_all(e, {ps[1]}), std::vector<std::vector<int32_t>>{want[1]});
  }
}

}  // namespace
}  // namespace ceiling::dist
