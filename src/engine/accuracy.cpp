#include "engine/accuracy.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "core/status.h"
#include "engine/forward.h"

namespace ceiling::engine {

namespace {

constexpr int kBlockSize = 16;

int64_t argmax(const float* x, int64_t n) {
  return std::max_element(x, x + n) - x;
}

// One variant's model state over the windows.
struct Runner {
  Forward forward;
  KvCache kv;
  Runner(Ops& ops, const AccuracyOptions& o)
      : forward(ops, ForwardLimits{o.chunk, o.chunk}),
        kv(ops.alloc_kv_cache((o.window + kBlockSize - 1) / kBlockSize, kBlockSize)) {}
};

}  // namespace

double AccuracyStats::perplexity() const {
  return positions ? std::exp(sum_nll / static_cast<double>(positions)) : 0.0;
}

void log_softmax(const float* logits, int64_t V, float* out) {
  const float mx = *std::max_element(logits, logits + V);
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(logits[v] - mx));
  const float lse = mx + static_cast<float>(std::log(sum));
  for (int64_t v = 0; v < V; ++v) out[v] = logits[v] - lse;
}

std::vector<AccuracyStats> measure_accuracy(std::span<const AccuracyVariant> variants,
                                            std::span<const int32_t> tokens,
                                            const AccuracyOptions& o,
                                            const AccuracyProgress& progress) {
  CEILING_ENSURE(!variants.empty(), "accuracy: no variants");
  CEILING_ENSURE(o.window >= 2 && o.chunk >= 1, "accuracy: window {} must be >= 2, chunk {} >= 1",
                 o.window, o.chunk);
  int64_t n = static_cast<int64_t>(tokens.size());
  if (o.max_tokens > 0) n = std::min(n, o.max_tokens);
  const int windows = static_cast<int>(n / o.window);
  CEILING_ENSURE(windows >= 1, "accuracy: {} tokens do not fill one window of {}", n, o.window);
  const int64_t V = variants[0].ops->config().vocab_size;
  for (const AccuracyVariant& v : variants)
    CEILING_ENSURE(v.ops->config().vocab_size == V, "accuracy: {} has another vocabulary", v.name);

  std::vector<std::unique_ptr<Runner>> runners;
  for (const AccuracyVariant& v : variants) runners.push_back(std::make_unique<Runner>(*v.ops, o));
  std::vector<AccuracyStats> stats(variants.size());
  // The reference's log-probabilities and probabilities of the chunk's rows.
  std::vector<float> ref_lp(static_cast<size_t>(o.chunk * V)), ref_p(ref_lp.size()),
      lp(static_cast<size_t>(V)), logits(static_cast<size_t>(o.chunk * V));
  std::vector<int32_t> blocks((o.window + kBlockSize - 1) / kBlockSize);
  for (size_t b = 0; b < blocks.size(); ++b) blocks[b] = static_cast<int32_t>(b);

  for (int w = 0; w < windows; ++w) {
    const int32_t* win = tokens.data() + int64_t{w} * o.window;
    for (int c0 = 0; c0 < o.window; c0 += o.chunk) {
      const int c1 = std::min(o.window, c0 + o.chunk), R = c1 - c0;
      StepBatch step;
      step.max_blocks = static_cast<int>(blocks.size());
      append_sequence(step, std::vector<int32_t>(win + c0, win + c1), c0, blocks, kBlockSize,
                      false);
      for (int r = 0; r < R; ++r) step.logits_rows.push_back(r);
      const int scored = std::min(R, o.window - 1 - c0);  // rows with a next token in the window
      for (size_t i = 0; i < variants.size(); ++i) {
        Ops& ops = *variants[i].ops;
        const auto t0 = std::chrono::steady_clock::now();
        const TensorView out = runners[i]->forward.run(step, runners[i]->kv);
        ops.to_host(rows(out, R), logits.data());
        stats[i].seconds +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        for (int r = 0; r < scored; ++r) {
          const float* row = logits.data() + int64_t{r} * V;
          float* ref = ref_lp.data() + int64_t{r} * V;
          float* p = ref_p.data() + int64_t{r} * V;
          float* mine = i == 0 ? ref : lp.data();
          log_softmax(row, V, mine);
          if (i == 0)
            for (int64_t v = 0; v < V; ++v) p[v] = std::exp(ref[v]);
          AccuracyStats& s = stats[i];
          s.sum_nll -= mine[win[c0 + r + 1]];
          double kl = 0;
          if (i > 0)
            for (int64_t v = 0; v < V; ++v) kl += static_cast<double>(p[v]) * (ref[v] - mine[v]);
          s.sum_kl += kl;
          s.max_kl = std::max(s.max_kl, kl);
          s.top1_agree += argmax(ref, V) == argmax(mine, V);
          ++s.positions;
        }
      }
    }
    if (progress) progress(w + 1, windows, stats);
  }
  return stats;
}

}  // namespace ceiling::engine
