// Accuracy of low-precision variants against a reference on the CPU (`ceiling bench accuracy`):
// every variant reads the same token windows; for each predicted position the reference's and
// the variant's next-token distributions give
//   NLL  = −log p_variant(next token)                  -> perplexity exp(mean NLL)
//   KL   = Σ_v p_ref(v) · (log p_ref(v) − log p_var(v)) -> mean KL (nats)
//   top1 = [argmax p_ref == argmax p_var]               -> agreement
// The reference runs first on each chunk, so KL is exact (no stored logits).
// Windows: the tokens are cut into windows of W tokens (no BOS added, no overlap); position i of
// a window predicts token i + 1, so a window scores W − 1 positions. Each window is prefilled in
// chunks of C tokens with logits on every row.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/ops.h"

namespace ceiling::engine {

struct AccuracyVariant {
  std::string name;  // "bf16", "fp8", ...
  Ops* ops;          // weights uploaded; the first variant is the reference
};

struct AccuracyStats {
  int64_t positions = 0;  // predicted positions scored
  double sum_nll = 0, sum_kl = 0, max_kl = 0;
  int64_t top1_agree = 0;
  double seconds = 0;  // wall time of this variant's forward steps
  double perplexity() const;
  double mean_kl() const { return positions ? sum_kl / static_cast<double>(positions) : 0.0; }
  double top1() const {
    return positions ? static_cast<double>(top1_agree) / static_cast<double>(positions) : 0.0;
  }
};

struct AccuracyOptions {
  int window = 1024;       // W
  int chunk = 256;         // C
  int64_t max_tokens = 0;  // tokens of the text used (0: all); whole windows only
};

// After each window: (windows done, windows in all, the stats so far).
using AccuracyProgress = std::function<void(int, int, std::span<const AccuracyStats>)>;

// Scores every variant on `tokens`; result[i] belongs to variants[i]. `progress` (may be empty)
// runs after each window.
std::vector<AccuracyStats> measure_accuracy(std::span<const AccuracyVariant> variants,
                                            std::span<const int32_t> tokens,
                                            const AccuracyOptions& options,
                                            const AccuracyProgress& progress = {});

// log-softmax of logits[V] into out[V] (double sums).
void log_softmax(const float* logits, int64_t V, float* out);

}  // namespace ceiling::engine
