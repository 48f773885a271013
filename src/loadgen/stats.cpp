#include "loadgen/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

namespace ceiling::loadgen {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = p / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (rank - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

Distribution distribution_ms(const std::vector<double>& seconds) {
  Distribution d;
  if (seconds.empty()) return d;
  const double n = static_cast<double>(seconds.size());
  const double mean = std::accumulate(seconds.begin(), seconds.end(), 0.0) / n;
  double var = 0;
  for (const double x : seconds) var += (x - mean) * (x - mean);
  d.mean = mean * 1e3;
  d.std = std::sqrt(var / n) * 1e3;  // population std, as np.std
  d.median = percentile(seconds, 50) * 1e3;
  d.p90 = percentile(seconds, 90) * 1e3;
  d.p95 = percentile(seconds, 95) * 1e3;
  d.p99 = percentile(seconds, 99) * 1e3;
  return d;
}

int64_t peak_concurrency(const std::vector<RequestResult>& results) {
  std::vector<std::pair<double, int>> events;  // (time, +1 start / -1 end); ends sort first
  for (const RequestResult& r : results) {
    events.emplace_back(r.start_s, +1);
    events.emplace_back(r.start_s + r.e2el_s, -1);
  }
  std::sort(events.begin(), events.end());
  int64_t now = 0, peak = 0;
  for (const auto& e : events) peak = std::max(peak, now += e.second);
  return peak;
}

Metrics compute_metrics(const std::vector<RequestResult>& results,
                        const std::vector<int64_t>& prompt_tokens, double duration_s) {
  Metrics m;
  m.duration = duration_s;
  std::vector<double> ttft, tpot, itl, e2el;
  for (size_t i = 0; i < results.size(); ++i) {
    const RequestResult& r = results[i];
    if (!r.success) {
      ++m.failed;
      continue;
    }
    ++m.completed;
    const int64_t out = r.output_tokens();
    const int64_t in = r.usage_prompt_tokens >= 0 ? r.usage_prompt_tokens
                       : i < prompt_tokens.size() ? std::max<int64_t>(prompt_tokens[i], 0)
                                                  : 0;
    m.total_input_tokens += in;
    m.total_output_tokens += out;
    if (out > 1) tpot.push_back((r.e2el_s - r.ttft_s) / static_cast<double>(out - 1));
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
    ttft.push_back(r.ttft_s);
    e2el.push_back(r.e2el_s);
  }
  if (duration_s > 0) {
    m.request_throughput = static_cast<double>(m.completed) / duration_s;
    m.output_throughput = static_cast<double>(m.total_output_tokens) / duration_s;
    m.total_token_throughput =
        static_cast<double>(m.total_input_tokens + m.total_output_tokens) / duration_s;
  }
  m.max_concurrent_requests = peak_concurrency(results);
  m.ttft = distribution_ms(ttft);
  m.tpot = distribution_ms(tpot);
  m.itl = distribution_ms(itl);
  m.e2el = distribution_ms(e2el);
  return m;
}

nlohmann::ordered_json metrics_json(const Metrics& m) {
  nlohmann::ordered_json j = {
      {"completed", m.completed},
      {"failed", m.failed},
      {"duration", m.duration},
      {"total_input_tokens", m.total_input_tokens},
      {"total_output_tokens", m.total_output_tokens},
      {"request_throughput", m.request_throughput},
      {"output_throughput", m.output_throughput},
      {"total_token_throughput", m.total_token_throughput},
      {"max_concurrent_requests", m.max_concurrent_requests},
  };
  const std::pair<const char*, const Distribution*> dists[] = {
      {"ttft", &m.ttft}, {"tpot", &m.tpot}, {"itl", &m.itl}, {"e2el", &m.e2el}};
  for (const auto& [name, d] : dists) {
    const std::string n = name;
    j["mean_" + n + "_ms"] = d->mean;
    j["median_" + n + "_ms"] = d->median;
    j["std_" + n + "_ms"] = d->std;
    j["p90_" + n + "_ms"] = d->p90;
    j["p95_" + n + "_ms"] = d->p95;
    j["p99_" + n + "_ms"] = d->p99;
  }
  return j;
}

}  // namespace ceiling::loadgen
