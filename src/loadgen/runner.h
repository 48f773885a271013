// The load: requests released on a Poisson schedule (or all at once) to a fixed pool of worker
// threads, each with its own keep-alive Connection; the pool's size bounds the requests in
// flight (--max-concurrency), so no thread is created per request. The connections are opened
// one by one before the clock starts (Connection::open).
#pragma once

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "loadgen/client.h"
#include "loadgen/request.h"
#include "loadgen/result.h"

namespace ceiling::loadgen {

struct RunConfig {
  BaseUrl base;
  std::string endpoint = "/v1/completions";
  std::string api_key;
  Api api = Api::kCompletions;
  double request_rate = std::numeric_limits<double>::infinity();  // requests/s
  int max_concurrency = 0;                                        // 0: no limit but max_workers
  int max_workers = 1024;  // the pool's size without a concurrency limit
  uint64_t seed = 0;
  double timeout_s = 6 * 3600;  // per response, as vLLM's client
  bool preconnect = true;       // open every connection, one at a time, before the clock starts
  // Called after each request ends with (ended, total); from worker threads, serialized.
  std::function<void(int, int)> on_done;
};

struct RunOutput {
  std::vector<RequestResult> results;  // in request order
  double duration_s = 0;               // from the first release to the end of the last request
  int workers = 0;
};

// Sends bodies[i] at arrival i of poisson_arrivals(n, request_rate, seed) (or as soon as a
// worker is free after it) and waits for all of them.
RunOutput run_load(const RunConfig& c, const std::vector<std::string>& bodies);

}  // namespace ceiling::loadgen
