#include "loadgen/runner.h"

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace ceiling::loadgen {

RunOutput run_load(const RunConfig& c, const std::vector<std::string>& bodies) {
  const int n = static_cast<int>(bodies.size());
  RunOutput out;
  out.results.resize(n);
  if (n == 0) return out;
  out.workers = std::min(n, c.max_concurrency > 0 ? c.max_concurrency : c.max_workers);
  const std::vector<double> arrivals = poisson_arrivals(n, c.request_rate, c.seed);

  std::mutex mu;
  std::condition_variable cv;
  int released = 0, taken = 0, ended = 0;
  Clock::time_point origin;                        // set once the workers run
  std::vector<std::unique_ptr<Connection>> conns;  // made here: a bad URL throws here
  for (int w = 0; w < out.workers; ++w)
    conns.push_back(std::make_unique<Connection>(c.base, c.api_key, c.timeout_s));
  if (c.preconnect) {
    for (auto& conn : conns) conn->open();
  }
  auto worker = [&](Connection& conn) {
    for (;;) {
      int i;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return taken < released || taken == n; });
        if (taken == n) return;
        i = taken++;
      }
      out.results[i] = conn.stream(c.api, c.endpoint, bodies[i], origin);
      std::lock_guard lock(mu);
      ++ended;
      if (c.on_done) c.on_done(ended, n);
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(out.workers);
  for (int w = 0; w < out.workers; ++w) pool.emplace_back(worker, std::ref(*conns[w]));
  origin = Clock::now();  // workers read it only after a release, under `mu`
  for (int i = 0; i < n;) {
    const Clock::time_point due = origin + std::chrono::duration_cast<Clock::duration>(
                                               std::chrono::duration<double>(arrivals[i]));
    std::this_thread::sleep_until(due);
    std::lock_guard lock(mu);
    const Clock::time_point now = Clock::now();
    while (i < n && origin + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(arrivals[i])) <=
                        now) {
      ++i;
    }
    released = i;
    cv.notify_all();
  }
  for (std::thread& t : pool) t.join();
  out.duration_s = std::chrono::duration<double>(Clock::now() - origin).count();
  return out;
}

}  // namespace ceiling::loadgen
