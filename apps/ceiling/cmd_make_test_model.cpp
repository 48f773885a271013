// `ceiling make-test-model`: writes a Hugging Face model directory with deterministic random
// weights (engine/test_model.h): tiny presets for tests and parity checks, real shapes for GPU
// benchmarks (streamed to disk, never held in memory).
#include <fmt/format.h>

#include <chrono>
#include <cstdio>

#include "ceiling/command.h"
#include "ceiling/flag_check.h"
#include "ceiling/progress.h"
#include "core/status.h"
#include "engine/test_model.h"
#include "hw/measured.h"
#include "tokenizer/tokenizer.h"

namespace ceiling::cli {
namespace {

struct Args {
  std::string preset, out, tokenizer_dir;
  uint64_t seed = 0;
  int threads = 0;
};

// Every id of the tokenizer must name a row of the embedding, or `generate` meets ids outside
// the vocab (the Llama-3 tokenizer has 128256 ids, tiny-llama's vocab 32000).
void check_tokenizer_fits(const Args& a, const std::filesystem::path& dir) {
  const engine::TestModelPreset preset = engine::test_model_preset(a.preset);
  std::error_code ec;
  if (!std::filesystem::exists(dir / "tokenizer.json", ec)) return;  // make_test_model says so
  const int64_t ids = Tokenizer::from_dir(dir).vocab_size();
  if (ids > preset.config.vocab_size)
    fail(
        "make-test-model: the tokenizer in {} has {} ids but preset {} has vocab_size {} (pick a "
        "preset whose vocab holds the tokenizer's ids, or its own tokenizer)",
        dir.string(), ids, a.preset, preset.config.vocab_size);
}

int run(const Args& a) {
  engine::MakeTestModelOptions o;
  o.preset = a.preset;
  o.out = a.out;
  o.seed = a.seed;
  o.tokenizer_dir = a.tokenizer_dir;
  // The preset's tokenizer ships in the repository (data/tokenizers/<name>), found at run time
  // beside the working directory or the binary (build tree or installed prefix), never through a
  // path compiled in.
  if (o.tokenizer_dir.empty()) {
    const std::string rel =
        "data/tokenizers/" + engine::test_model_preset(a.preset).tokenizer + "/tokenizer.json";
    const auto found = hw::find_repo_file(rel);
    if (!found)
      fail("{} not found beside the working directory or the binary; pass --tokenizer-dir DIR",
           rel);
    o.tokenizer_dir = found->parent_path();
  }
  check_tokenizer_fits(a, o.tokenizer_dir);
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
      sub.add_option("--seed", args->seed, "Weight seed (same seed, same files)")->check(kU64);
      sub.add_option("--tokenizer-dir", args->tokenizer_dir,
                     "Directory with tokenizer.json + tokenizer_config.json "
                     "(default: the preset's tokenizer in the repository's data/tokenizers)");
      sub.add_option("--threads", args->threads, "Fill threads (default: all)")
          ->check(CLI::Range(0, kMaxThreads));
      return [args] { return run(*args); };
    },
    60);

}  // namespace
}  // namespace ceiling::cli
