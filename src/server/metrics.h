// The server's metrics, named like vLLM's with a `ceiling:` prefix and a `model_name` label.
// Request-side counters and histograms are recorded by the HTTP threads (thread-safe); the
// engine-side gauges come from AsyncEngine::snapshot() at scrape time.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "serve/async_engine.h"
#include "server/prom_text.h"

namespace ceiling::server {

class ServerMetrics {
 public:
  explicit ServerMetrics(std::string model_name);

  // Thread-safe. One finished engine request (a choice).
  struct Finished {
    int prompt_tokens = 0, generation_tokens = 0;
    std::string finished_reason;                  // "stop", "length", "abort"
    double e2e_s = 0, queue_s = -1, ttft_s = -1;  // negative: not observed
  };
  void record(const Finished& f);
  void record_inter_token(double seconds);  // thread-safe

  // The exposition text: the engine snapshot's gauges plus everything recorded.
  std::string render(const serve::EngineSnapshot& engine) const;

 private:
  std::string model_;
  mutable std::mutex mu_;
  int64_t prompt_tokens_ = 0, generation_tokens_ = 0;  // guarded by mu_
  std::map<std::string, int64_t> success_;             // guarded by mu_; by finished_reason
  Histogram ttft_, itl_, e2e_, queue_;                 // guarded by mu_
};

}  // namespace ceiling::server
