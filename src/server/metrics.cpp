#include "server/metrics.h"

namespace ceiling::server {
namespace {

std::vector<double> latency_buckets() {  // seconds, as vLLM's request-latency buckets
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,  0.75,
          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160., 640., 2560.};
}

}  // namespace

ServerMetrics::ServerMetrics(std::string model_name)
    : model_(std::move(model_name)),
      ttft_(latency_buckets()),
      itl_(latency_buckets()),
      e2e_(latency_buckets()),
      queue_(latency_buckets()) {
  for (const char* r : {"stop", "length", "abort"}) success_[r] = 0;
}

void ServerMetrics::record(const Finished& f) {
  std::lock_guard<std::mutex> lock(mu_);
  prompt_tokens_ += f.prompt_tokens;
  generation_tokens_ += f.generation_tokens;
  ++success_[f.finished_reason];
  e2e_.observe(f.e2e_s);
  if (f.queue_s >= 0) queue_.observe(f.queue_s);
  if (f.ttft_s >= 0) ttft_.observe(f.ttft_s);
}

void ServerMetrics::record_inter_token(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  itl_.observe(seconds);
}

std::string ServerMetrics::render(const serve::EngineSnapshot& e) const {
  const Labels m = {{"model_name", model_}};
  PromText t;
  auto one = [&](const char* name, const char* help, const char* type, double v) {
    t.family(name, help, type);
    t.sample(name, m, v);
  };
  one("ceiling:num_requests_running", "Requests in the engine's running batch.", "gauge",
      e.num_running);
  one("ceiling:num_requests_waiting", "Requests waiting for the engine.", "gauge", e.num_waiting);
  one("ceiling:kv_cache_usage_perc", "KV cache usage (1 = every block in use).", "gauge",
      e.kv_usage);
  one("ceiling:kv_cache_free_blocks", "KV cache blocks free (cached prefixes included).", "gauge",
      e.kv_free_blocks);
  one("ceiling:kv_cache_blocks", "KV cache blocks in all.", "gauge", e.kv_blocks);
  one("ceiling:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
      "counter", static_cast<double>(e.prefix_queries));
  one("ceiling:prefix_cache_hits_total", "Prompt tokens served from the prefix cache.", "counter",
      static_cast<double>(e.prefix_hits));
  one("ceiling:num_preemptions_total", "Preemptions (recompute) in the engine.", "counter",
      static_cast<double>(e.preemptions));
  std::lock_guard<std::mutex> lock(mu_);
  one("ceiling:prompt_tokens_total", "Prompt tokens of finished requests.", "counter",
      static_cast<double>(prompt_tokens_));
  one("ceiling:generation_tokens_total", "Generated tokens of finished requests.", "counter",
      static_cast<double>(generation_tokens_));
  t.family("ceiling:request_success_total", "Finished requests by finish reason.", "counter");
  for (const auto& [reason, n] : success_) {
    Labels l = m;
    l.emplace_back("finished_reason", reason);
    t.sample("ceiling:request_success_total", l, static_cast<double>(n));
  }
  auto hist = [&](const char* name, const char* help, const Histogram& h) {
    t.family(name, help, "histogram");
    t.histogram(name, m, h);
  };
  hist("ceiling:time_to_first_token_seconds", "Arrival to first token.", ttft_);
  hist("ceiling:inter_token_latency_seconds", "Time between a request's successive tokens.", itl_);
  hist("ceiling:e2e_request_latency_seconds", "Arrival to finish.", e2e_);
  hist("ceiling:request_queue_time_seconds", "Arrival to first scheduled.", queue_);
  return t.str();
}

}  // namespace ceiling::server
