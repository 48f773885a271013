// SmolLM2-135M-Instruct (the real chat model scripts/fetch_smollm2.sh converts into
// models/SmolLM2-135M-Instruct) through CpuOps, against the independent NumPy forward of
// smollm2_reference.py (the ctest fixture): the logits of the first greedy steps of two chat
// prompts, and the greedy tokens. Skips when the model or the reference is absent.
//
// Tolerance: both sides compute in fp32 on the same bf16 weights, so they differ only by fp32
// summation order over 30 layers (measured: max |difference| ~5e-5 logits). Every logit must
// agree within kAbs + kRel * max|reference| (1e-3 + 1e-4 * ~30 = 4e-3 logits, ~80x the measured
// difference); the argmax must agree wherever the reference's top-two margin exceeds twice that.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/cpu_ops.h"
#include "serve/generate.h"
#include "model/loader.h"
#include "model/weights.h"

namespace ceiling::engine {
namespace {

constexpr double kAbs = 1e-3, kRel = 1e-4;

const std::filesystem::path kModel =
    std::filesystem::path(CEILING_SOURCE_DIR) / "models/SmolLM2-135M-Instruct";
const std::filesystem::path kReference =
    std::filesystem::path(CEILING_SMOLLM2_REFERENCE_DIR) / "smollm2_reference.json";

TEST(SmolLM2, FirstStepsMatchTheNumpyForward) {
  if (!std::filesystem::exists(kModel / "model.safetensors"))
    GTEST_SKIP() << "no " << kModel << ": run scripts/fetch_smollm2.sh";
  std::ifstream in(kReference);
  ASSERT_TRUE(in) << kReference << " missing: run the ctest fixture engine_smollm2_reference";
  const nlohmann::json ref = nlohmann::json::parse(in);

  const Model m = load_model(kModel);
  CpuOps ops(CpuOpsOptions{0});
  ops.upload(m.config, m.weights);
  Generator gen(ops, GeneratorLimits{256, 16, 64});
  double worst = 0;
  for (const auto& c : ref.at("cases")) {
    SCOPED_TRACE(c.at("question").get<std::string>());
    std::vector<int32_t> ids = c.at("prompt_ids").get<std::vector<int32_t>>();
    const auto greedy = c.at("greedy_ids").get<std::vector<int32_t>>();
    const auto& steps = c.at("logits");
    ASSERT_EQ(steps.size(), greedy.size());
    for (size_t s = 0; s < steps.size(); ++s) {
      const auto want = steps[s].get<std::vector<float>>();
      const std::vector<float> got = gen.prompt_logits(ids);
      ASSERT_EQ(got.size(), want.size());
      double max_ref = 0, max_diff = 0;
      for (size_t v = 0; v < want.size(); ++v) {
        max_ref = std::max(max_ref, std::abs(static_cast<double>(want[v])));
        max_diff = std::max(max_diff, std::abs(static_cast<double>(got[v]) - want[v]));
      }
      const double tol = kAbs + kRel * max_ref;
      worst = std::max(worst, max_diff / tol);
      EXPECT_LE(max_diff, tol) << "step " << s;
      std::vector<float> sorted = want;
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
      const auto argmax = std::max_element(got.begin(), got.end()) - got.begin();
      if (sorted[0] - sorted[1] > 2 * tol) {
        EXPECT_EQ(argmax, greedy[s]) << "step " << s;
      }
      ids.push_back(greedy[s]);  // follow the reference's greedy path
    }
  }
  std::printf("worst logit difference: %.3f of the tolerance\n", worst);
}

}  // namespace
}  // namespace ceiling::engine
