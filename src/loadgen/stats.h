// The numbers `vllm bench serve` reports, computed the same way (vllm/benchmarks/serve.py,
// calculate_metrics): only successful requests count toward tokens and latencies; TPOT =
// (e2el - ttft) / (output_tokens - 1) over requests with more than one output token; ITL is every
// gap between content chunks of every request; percentiles interpolate linearly between the
// closest ranks (numpy's default). Latencies in milliseconds, throughputs per second.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "loadgen/result.h"

namespace ceiling::loadgen {

// p in [0, 100]; 0 for an empty sample (as vLLM's `np.percentile(x or 0, p)`).
double percentile(std::vector<double> v, double p);

struct Distribution {
  double mean = 0, median = 0, std = 0, p90 = 0, p95 = 0, p99 = 0;
};

// Of values in seconds, reported in milliseconds.
Distribution distribution_ms(const std::vector<double>& seconds);

// Most requests in flight at once: intervals [start, start + e2el) of every request, failed ones
// included (they held a connection too).
int64_t peak_concurrency(const std::vector<RequestResult>& results);

struct Metrics {
  int64_t completed = 0, failed = 0;
  double duration = 0;
  int64_t total_input_tokens = 0, total_output_tokens = 0;
  double request_throughput = 0, output_throughput = 0, total_token_throughput = 0;
  int64_t max_concurrent_requests = 0;
  Distribution ttft, tpot, itl, e2el;
};

// `prompt_tokens[i]`: request i's prompt length as sent (-1: unknown); the server's
// usage.prompt_tokens wins when it reported one.
Metrics compute_metrics(const std::vector<RequestResult>& results,
                        const std::vector<int64_t>& prompt_tokens, double duration_s);

// The metrics under vLLM's result-JSON names (completed, failed, duration, mean_ttft_ms, ...).
nlohmann::ordered_json metrics_json(const Metrics& m);

}  // namespace ceiling::loadgen
