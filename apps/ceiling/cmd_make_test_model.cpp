// `ceiling make-test-model`: writes a Hugging Face model directory with deterministic random
// weights (engine/test_model.h): tiny presets for tests and parity checks, real shapes for GPU
// benchmarks (streamed to disk, never held in memory).
#include <fmt/format.h>

#include <chrono>
#include <cstdio>

#include "ceiling/command.h"
#include "ceiling/progress.h"
#include "core/status.h"
#include "engine/test_model.h"

namespace ceiling::cli {
namespace {

struct Args {
  std::string preset, out, tokenizer_dir;
  uint64_t seed = 0;
  int threads = 0;
};

int run(const Args& a) {
  engine::MakeTestModelOptions o;
  o.preset = a.preset;
  o.out = a.out;
  o.seed = a.seed;
  o.tokenizer_dir = a.tokenizer_dir;
  o.n_threads = a.threads;
  const auto t0 = std::chrono::steady_clock::now();
  Progress progress("writing " + a.out);
  o.progress = [&](uint64_t done, uint64_t total) {
    progress.update(static_cast<double>(done) / static_cast<double>(total),
                    fmt::format("of {:.2f} GB", static_cast<double>(total) / 1e9));
  };
  engine::make_test_model(o);
  progress.done();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print(stderr, "wrote {} ({}) in {:.1f} s\n", a.out, a.preset, s);
  return 0;
}

CEILING_COMMAND(
    "make-test-model",
    "Write a model directory with deterministic random weights (tests, benchmarks)",
    [](CLI::App& sub) -> std::function<int()> {
      auto args = std::make_shared<Args>();
      std::string names;
      for (const auto& n : engine::test_model_preset_names())
        names += (names.empty() ? "" : ", ") + n;
      sub.add_option("--preset", args->preset, "Model shape: " + names)->required();
      sub.add_option("--out", args->out, "Output directory")->required();
      sub.add_option("--seed", args->seed, "Weight seed (same seed, same files)");
      sub.add_option("--tokenizer-dir", args->tokenizer_dir,
                     "Directory with tokenizer.json + tokenizer_config.json "
                     "(default: the preset's tokenizer in the shared data)");
      sub.add_option("--threads", args->threads, "Fill threads (default: all)");
      return [args] { return run(*args); };
    },
    60);

}  // namespace
}  // namespace ceiling::cli
