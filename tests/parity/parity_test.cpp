// CpuOps vs Hugging Face transformers on the tiny test models. The goldens
// (tests/parity/golden/<preset>.json + <preset>.last.f32) come from tests/parity/make_golden.py
// run on a machine with torch (tests/parity/run_on_gpu.sh); this test regenerates the same models
// with ceiling's own generator (same seed, checked by checksum) and compares:
//   * logits: at every position of every prompt, HF's top-8 tokens; all V logits at the last
//     position of prompt 0 — |ours − HF| ≤ kLogitTol (both sides fp32 from the same bf16 weights);
//   * the argmax at every position where HF's top-1/top-2 gap exceeds 2·kLogitTol;
//   * greedy continuation of 32 tokens: identical, except that a divergence is accepted only at a
//     step whose HF top-1/top-2 gap is within 2·kLogitTol (a numerical tie).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/cpu_ops.h"
#include "engine/forward.h"
#include "serve/generate.h"
#include "engine/test_model.h"
#include "model/weights.h"

namespace ceiling::engine {
namespace {

// Max |Δ logit| allowed: fp32 on both sides from the same bf16 weights, different summation
// orders. Logits of these models are O(1) (|logit| up to ~5); the measured maximum differences
// are 2.9e-6 .. 4.3e-6 (transformers 5.17, torch 2.11, CPU), printed by the test.
constexpr double kLogitTol = 2e-5;

const std::filesystem::path kGolden =
    std::filesystem::path(CEILING_SOURCE_DIR) / "tests/parity/golden";
const std::filesystem::path kWork = CEILING_PARITY_WORK_DIR;

uint64_t checksum64(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  data.resize((data.size() + 7) / 8 * 8, '\0');
  uint64_t h = 0;
  for (size_t i = 0; i < data.size() / 8; ++i) {
    uint64_t w = 0;
    for (int b = 7; b >= 0; --b) w = (w << 8) | static_cast<unsigned char>(data[i * 8 + b]);
    h += w * (2 * static_cast<uint64_t>(i) + 1);
  }
  return h;
}

class Parity : public ::testing::TestWithParam<std::string> {};

TEST_P(Parity, CpuOpsMatchesTransformers) {
  const std::string preset = GetParam();
  const auto golden_path = kGolden / (preset + ".json");
  if (!std::filesystem::exists(golden_path))
    GTEST_SKIP() << "no golden " << golden_path << ": run tests/parity/run_on_gpu.sh on a machine "
                 << "with torch + transformers and copy its golden/ files there";
  std::ifstream gin(golden_path);
  const nlohmann::json g = nlohmann::json::parse(gin);

  MakeTestModelOptions o;
  o.preset = preset;
  o.out = kWork / preset;
  o.tokenizer_dir =
      std::filesystem::path(CEILING_DATA_DIR) / "tokenizers" / test_model_preset(preset).tokenizer;
  o.seed = g.at("seed").get<uint64_t>();
  make_test_model(o);
  const std::string sum = fmt::format("{:016x}", checksum64(o.out / "model.safetensors"));
  ASSERT_EQ(sum, g.at("model_checksum64").get<std::string>())
      << "make-test-model no longer writes the weights the goldens were made from: regenerate them";

  const Model m = load_model(o.out);
  CpuOps ops(CpuOpsOptions{2});
  ops.upload(m.config, m.weights);
  const int V = m.config.vocab_size;
  double worst = 0;
  int prompt_index = 0, greedy_same = 0, greedy_total = 0;
  for (const auto& p : g.at("prompts")) {
    SCOPED_TRACE("prompt " + std::to_string(prompt_index));
    const auto ids = p.at("ids").get<std::vector<int32_t>>();
    const int T = static_cast<int>(ids.size());
    // All positions' logits in one prefill step over 16-token blocks.
    Forward fwd(ops, ForwardLimits{T, T});
    KvCache kv = ops.alloc_kv_cache((T + 15) / 16, 16);
    std::vector<int32_t> blocks;
    for (int b = 0; b < kv.num_blocks; ++b) blocks.push_back(kv.num_blocks - 1 - b);
    StepBatch step;
    step.max_blocks = kv.num_blocks;
    append_sequence(step, ids, 0, blocks, 16, false);
    for (int t = 0; t < T; ++t) step.logits_rows.push_back(t);
    const TensorView lv = fwd.run(step, kv);
    std::vector<float> logits(static_cast<size_t>(lv.numel()));
    ops.to_host(lv, logits.data());

    const auto top_ids = p.at("top_ids").get<std::vector<std::vector<int>>>();
    const auto top_val = p.at("top_logits").get<std::vector<std::vector<double>>>();
    for (int t = 0; t < T; ++t) {
      const float* row = logits.data() + static_cast<size_t>(t) * V;
      for (size_t j = 0; j < top_ids[t].size(); ++j) {
        const double d = std::fabs(row[top_ids[t][j]] - top_val[t][j]);
        worst = std::max(worst, d);
        EXPECT_LE(d, kLogitTol) << "position " << t << " token " << top_ids[t][j];
      }
      if (top_val[t][0] - top_val[t][1] > 2 * kLogitTol) {
        const int am = static_cast<int>(std::max_element(row, row + V) - row);
        EXPECT_EQ(am, top_ids[t][0]) << "argmax at position " << t;
      }
    }
    if (p.contains("last_logits_file")) {
      const auto f = kGolden / p.at("last_logits_file").get<std::string>();
      std::ifstream in(f, std::ios::binary);
      std::vector<float> want(V);
      in.read(reinterpret_cast<char*>(want.data()),
              static_cast<std::streamsize>(V * sizeof(float)));
      ASSERT_TRUE(in) << f << " is shorter than " << V << " floats";
      const float* row = logits.data() + static_cast<size_t>(T - 1) * V;
      double dmax = 0;
      for (int i = 0; i < V; ++i)
        dmax = std::max(dmax, static_cast<double>(std::fabs(row[i] - want[i])));
      worst = std::max(worst, dmax);
      EXPECT_LE(dmax, kLogitTol) << "full last-position logits";
    }

    // Greedy continuation through the generator (paged cache, decode steps).
    const auto want = p.at("greedy").get<std::vector<int32_t>>();
    greedy_total += static_cast<int>(want.size());
    const auto gaps = p.at("greedy_gaps").get<std::vector<double>>();
    Generator gen(ops, GeneratorLimits{T + static_cast<int>(want.size()) + 1, 16, 64});
    GenerateOptions go;
    go.sampling.temperature = 0;
    go.max_new_tokens = static_cast<int>(want.size());
    const auto got = gen.generate(ids, go).tokens;
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      if (got[i] == want[i]) {
        ++greedy_same;
        continue;
      }
      EXPECT_LE(gaps[i], 2 * kLogitTol)
          << "greedy token " << i << ": ceiling " << got[i] << ", transformers " << want[i];
      break;  // after a tie-induced divergence the sequences legitimately differ
    }
    ++prompt_index;
  }
  std::printf(
      "[ %s ] max |logit - transformers| = %.3g (tolerance %.0e); greedy %d/%d tokens identical "
      "(%s, transformers %s)\n",
      preset.c_str(), worst, kLogitTol, greedy_same, greedy_total, g.value("device", "?").c_str(),
      g.value("transformers", "?").c_str());
}

std::string preset_test_name(const ::testing::TestParamInfo<std::string>& param) {
  std::string n = param.param;
  for (char& ch : n)
    if (ch == '-') ch = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(TinyPresets, Parity,
                         ::testing::Values("tiny-llama", "tiny-mistral", "tiny-qwen2",
                                           "tiny-qwen3"),
                         preset_test_name);

}  // namespace
}  // namespace ceiling::engine
