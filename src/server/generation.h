// One HTTP request's engine requests (its choices): submitted together to the AsyncEngine,
// aborted together, their outputs handed from the engine thread to the waiting HTTP thread.
//
//   HTTP thread: start() ─> AsyncEngine::submit × choices
//   engine thread: callback ─> metrics, admission slot back (on finish), event queue ─┐
//   HTTP thread: wait() <──────────────────────────────────────────────────────────────┘
//
// The engine-thread callback only copies the output into the queue (and records metrics), so it
// never blocks on the HTTP side. The job lives as long as either side holds it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "serve/async_engine.h"
#include "server/guard.h"
#include "server/metrics.h"
#include "server/request.h"

namespace ceiling::server {

class GenerationJob {
 public:
  struct Event {
    int choice = 0;
    serve::RequestOutput out;
  };

  // Submits every choice of `req`. The admission slots (one per choice) must already be taken;
  // each comes back when its choice finishes.
  static std::shared_ptr<GenerationJob> start(serve::AsyncEngine& engine,
                                              const GenerationRequest& req, ServerMetrics& metrics,
                                              Admission& admission);
  // Thread-safe. The events that arrived, waiting up to `timeout` for the first.
  std::vector<Event> wait(std::chrono::milliseconds timeout);
  // Thread-safe, idempotent. Aborts every choice not finished yet.
  void abort();

 private:
  GenerationJob(serve::AsyncEngine& engine, ServerMetrics& metrics, Admission& admission, int n);
  void on_output(int choice, const serve::RequestOutput& o);  // engine thread

  serve::AsyncEngine& engine_;
  ServerMetrics& metrics_;
  Admission& admission_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> events_;                             // guarded by mu_
  std::vector<uint64_t> keys_;                           // guarded by mu_
  std::vector<serve::Clock::time_point> last_token_at_;  // engine thread only
};

}  // namespace ceiling::server
