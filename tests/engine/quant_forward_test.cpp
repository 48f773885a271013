// A tiny random model quantized on load, on CpuOps: its logits equal a dense model holding the
// dequantized weights bit for bit (the oracle computes in fp32 from the dequantized rows), stay
// within the format's expected error of the bf16 model, and greedy decoding generates tokens;
// the fp8 KV cache stores E4M3 values; backends without low precision refuse it in one line.
#include <gtest/gtest.h>

#include <cmath>

#include "core/status.h"
#include "engine/accuracy.h"
#include "engine/cpu_ops.h"
#include "engine/forward.h"
#include "model/quantize.h"
#include "test_models.h"

namespace ceiling::engine {
namespace {

using testing::make_random_model;
using testing::RandomModel;
using testing::small_config;

// Half a step relative to a row's (fp8) or a group's (int4: 15 steps over the range) largest
// value, times √(7·L): the independent errors of the 7 projections of each of L layers add in
// quadrature. The metric: max |Δ logit| / max |logit| over all rows.
double expected_rel_error(WeightFormat f, int layers) {
  const double half_step = f == WeightFormat::kFp8 ? 0x1p-4 : 1.0 / 15.0;
  return half_step * std::sqrt(7.0 * layers);
}

ModelConfig config() {
  ModelConfig c = small_config(Arch::kLlama);
  c.hidden_size = 64;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.intermediate_size = 128;
  c.vocab_size = 97;
  return c;
}

const std::vector<int32_t> kPrompt = {3, 14, 15, 92, 65, 35, 89, 79, 32, 38, 46, 26};

struct Outputs {
  std::vector<float> logits;    // [T, V] of the prompt
  std::vector<int32_t> greedy;  // 8 tokens generated after it
};

Outputs run(const ModelConfig& c, const ModelWeights& w, bool fp8_kv = false,
            const std::vector<int32_t>& prompt = kPrompt) {
  CpuOpsOptions o;
  o.n_threads = 2;
  o.fp8_kv_cache = fp8_kv;
  CpuOps ops(o);
  ops.upload(c, w);
  Forward f(ops, ForwardLimits{32, 32});
  KvCache kv = ops.alloc_kv_cache(4, 8);
  const std::vector<int32_t> blocks = {0, 1, 2, 3};
  StepBatch s;
  s.max_blocks = 4;
  append_sequence(s, prompt, 0, blocks, 8, false);
  for (int t = 0; t < s.num_tokens(); ++t) s.logits_rows.push_back(t);
  TensorView l = f.run(s, kv);
  Outputs r;
  r.logits.resize(static_cast<size_t>(l.numel()));
  ops.to_host(l, r.logits.data());
  const int64_t V = c.vocab_size;
  int32_t next = static_cast<int32_t>(std::max_element(r.logits.end() - V, r.logits.end()) -
                                      (r.logits.end() - V));
  for (int i = 0; i < 8; ++i) {
    r.greedy.push_back(next);
    StepBatch d;
    d.max_blocks = 4;
    append_sequence(d, {next}, static_cast<int>(prompt.size()) + i, blocks, 8, true);
    l = f.run(d, kv);
    std::vector<float> row(static_cast<size_t>(V));
    ops.to_host(l, row.data());
    next = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
  }
  return r;
}

double rel_err(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(got[i])) return INFINITY;
    num = std::max(num, static_cast<double>(std::fabs(got[i] - want[i])));
    den = std::max(den, static_cast<double>(std::fabs(want[i])));
  }
  return num / den;
}

// The same weights with every quantized projection dequantized into a dense f32 tensor.
ModelWeights dequantized(const ModelWeights& q, std::vector<std::vector<float>>& store) {
  ModelWeights d = q;
  for (LayerWeights& l : d.layers)
    for (int p = 0; p < kNumProj; ++p) {
      const QuantLinear& ql = l.quant[p];
      const int64_t N = ql.qweight.dim(0), K = ql.qweight.dim(1);
      store.emplace_back(static_cast<size_t>(N * K));
      for (int64_t n = 0; n < N; ++n) dequantize_row(ql, n, K, store.back().data() + n * K);
      l.dense(static_cast<Proj>(p)) = TensorView(store.back().data(), DType::kF32, {N, K});
      l.quant[p] = QuantLinear{};
    }
  return d;
}

// A model's weights with every projection quantized on load to `f` (int4 in groups of 64); the
// arena holds the codes.
struct Quantized {
  WeightArena arena;
  ModelWeights w;
  Quantized(const ModelWeights& dense, WeightFormat f) : w(dense) {
    quantize_projections(w, f, 64, arena);
  }
};

class QuantForward : public ::testing::TestWithParam<WeightFormat> {};

TEST_P(QuantForward, QuantizedModelGeneratesWithinTheFormatsError) {
  const WeightFormat f = GetParam();
  const ModelConfig c = config();
  const auto model = make_random_model(c, DType::kBF16, 42);
  const Quantized quant(model->weights, f);
  const ModelWeights& q = quant.w;
  EXPECT_EQ(q.quant_format(), f);

  const Outputs ref = run(c, model->weights);
  const Outputs got = run(c, q);
  std::vector<std::vector<float>> store;
  const Outputs oracle = run(c, dequantized(q, store));
  EXPECT_EQ(got.logits, oracle.logits);  // bit for bit: the quantized path is the fp32 oracle
  EXPECT_EQ(got.greedy, oracle.greedy);
  ASSERT_EQ(got.greedy.size(), 8u);
  for (int32_t t : got.greedy) EXPECT_TRUE(t >= 0 && t < c.vocab_size);

  const double err = rel_err(got.logits, ref.logits);
  EXPECT_GT(err, 0.0);  // the weights did change
  EXPECT_LE(err, expected_rel_error(f, c.num_layers)) << weight_format_name(f);
}

// W8A8 (model/weights.h kFp8ActRowsMin): a prompt of 16 tokens keeps the projections' inputs as
// they are (bit for bit the dense model of the dequantized weights); one of 17 rounds them through
// E4M3 per token, so it leaves that oracle — by no more than a second fp8 rounding adds to the
// weights' own error against the bf16 model (the two add in quadrature).
TEST(W8A8, CpuOpsRoundsTheInputsFrom17Rows) {
  const ModelConfig c = config();
  const auto model = make_random_model(c, DType::kBF16, 43);
  const Quantized quant(model->weights, WeightFormat::kFp8);
  const ModelWeights& q = quant.w;
  std::vector<std::vector<float>> store;
  const ModelWeights oracle_w = dequantized(q, store);
  for (int n : {kFp8ActRowsMin - 1, kFp8ActRowsMin}) {
    std::vector<int32_t> prompt(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) prompt[i] = (7 * i + 3) % c.vocab_size;
    const Outputs got = run(c, q, false, prompt), oracle = run(c, oracle_w, false, prompt);
    const Outputs ref = run(c, model->weights, false, prompt);
    if (n < kFp8ActRowsMin) {
      EXPECT_EQ(got.logits, oracle.logits) << n << " rows: inputs must stay bf16";
    } else {
      EXPECT_NE(got.logits, oracle.logits) << n << " rows: inputs must go through E4M3";
      EXPECT_LE(rel_err(got.logits, ref.logits),
                std::sqrt(2.0) * expected_rel_error(WeightFormat::kFp8, c.num_layers));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantForward,
                         ::testing::Values(WeightFormat::kFp8, WeightFormat::kInt4),
                         [](const auto& i) { return std::string(weight_format_name(i.param)); });

TEST(Fp8KvCache, StoresE4m3ValuesTimesTheScale) {
  const ModelConfig c = config();
  auto model = make_random_model(c, DType::kBF16, 43);
  for (LayerWeights& l : model->weights.layers) {
    l.k_scale = 0.25f;
    l.v_scale = 0.125f;
  }
  CpuOps ops(CpuOpsOptions{1, false, true});
  ops.upload(c, model->weights);
  Forward f(ops, ForwardLimits{32, 1});
  KvCache kv = ops.alloc_kv_cache(2, 8);
  StepBatch s;
  s.max_blocks = 2;
  append_sequence(s, kPrompt, 0, {0, 1}, 8, true);
  f.run(s, kv);
  for (int l = 0; l < c.num_layers; ++l)
    for (int slot = 0; slot < static_cast<int>(kPrompt.size()); ++slot)
      for (int h = 0; h < c.num_kv_heads; ++h)
        for (int d = 0; d < c.head_dim; ++d) {
          const int64_t i =
              ((int64_t{slot / 8} * c.num_kv_heads + h) * 8 + slot % 8) * c.head_dim + d;
          const float k = kv.k[l].as<float>()[i], v = kv.v[l].as<float>()[i];
          ASSERT_EQ(e4m3_round(k, 0.25f), k);
          ASSERT_EQ(e4m3_round(v, 0.125f), v);
        }
  // The rounding changes the logits, within fp8's half ulp per K and V through L layers.
  const Outputs plain = run(c, model->weights);
  const Outputs fp8 = run(c, model->weights, true);
  const double err = rel_err(fp8.logits, plain.logits);
  EXPECT_GT(err, 0.0);
  EXPECT_LE(err, 0x1p-4 * std::sqrt(2.0 * c.num_layers));
}

TEST(Accuracy, ReferenceAgainstItselfAndAgainstFp8) {
  const ModelConfig c = config();
  const auto model = make_random_model(c, DType::kBF16, 44);
  const Quantized quant(model->weights, WeightFormat::kFp8);
  const ModelWeights& q = quant.w;
  CpuOps a(CpuOpsOptions{1}), b(CpuOpsOptions{1}), d(CpuOpsOptions{1});
  a.upload(c, model->weights);
  b.upload(c, model->weights);
  d.upload(c, q);
  std::vector<int32_t> ids;
  for (int i = 0; i < 40; ++i) ids.push_back((i * 37 + 11) % c.vocab_size);
  AccuracyOptions o;
  o.window = 16;
  o.chunk = 5;  // chunks that do not divide the window
  const AccuracyVariant vs[] = {{"ref", &a}, {"same", &b}, {"fp8", &d}};
  const auto st = measure_accuracy(vs, ids, o);
  ASSERT_EQ(st.size(), 3u);
  EXPECT_EQ(st[0].positions, 2 * 15);  // two windows of 16, 15 predictions each
  EXPECT_EQ(st[1].sum_nll, st[0].sum_nll);
  EXPECT_EQ(st[1].sum_kl, 0.0);
  EXPECT_EQ(st[1].top1(), 1.0);
  EXPECT_GT(st[2].mean_kl(), 0.0);
  EXPECT_LT(st[2].mean_kl(), 0.05);
  EXPECT_GT(st[0].perplexity(), 1.0);
}

}  // namespace
}  // namespace ceiling::engine
