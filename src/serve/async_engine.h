// A thread-safe front for the Engine (for servers): one engine thread owns the Engine and the
// device; any thread submits requests and aborts them. Outputs come back through the request's
// callback, called on the engine thread (keep it short: hand the output to the waiting thread).
//
//   submit() ─┐                ┌─ engine.add_request / abort
//   abort()  ─┴─> inbox (mutex) ─> engine thread ─> engine.step() ─> callbacks
//
// A request that fails validation gets one callback with finished = true, finish = kAbort and
// `error` set. If a step throws (a CUDA error, say), every request in flight gets such a callback,
// the engine stops accepting work and healthy() turns false.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "serve/engine.h"

namespace ceiling::serve {

// The engine's gauges and counters as of its last step (for metrics): copied by the engine thread
// after every step, read by any thread through AsyncEngine::snapshot().
struct EngineSnapshot {
  int num_running = 0, num_waiting = 0;
  int kv_blocks = 0, kv_free_blocks = 0;
  double kv_usage = 0;                          // fraction of blocks in use
  int64_t prefix_queries = 0, prefix_hits = 0;  // tokens
  int64_t preemptions = 0;
  int64_t steps = 0;
};

class AsyncEngine {
 public:
  using Callback = std::function<void(const RequestOutput&)>;

  // `engine` must outlive this object and must not be used by any other thread meanwhile.
  explicit AsyncEngine(Engine& engine);
  ~AsyncEngine();  // shutdown()
  AsyncEngine(const AsyncEngine&) = delete;
  AsyncEngine& operator=(const AsyncEngine&) = delete;

  // Thread-safe. Queues a request; returns its key (for abort). The callback receives every
  // RequestOutput of the request, the last one with finished = true.
  uint64_t submit(std::vector<int32_t> prompt, RequestParams params, Callback cb);
  // Thread-safe. Aborts a queued or running request (its last callback has finish kAbort); no-op
  // for an unknown or finished key.
  void abort(uint64_t key);
  // Thread-safe. Aborts everything in flight and joins the engine thread.
  void shutdown();
  bool healthy() const;
  // Requests submitted and not finished (thread-safe).
  int num_in_flight() const;
  // Thread-safe. The engine's state after its last step (or at construction).
  EngineSnapshot snapshot() const;

 private:
  struct Submit {
    uint64_t key;
    std::vector<int32_t> prompt;
    RequestParams params;
    Callback cb;
  };
  void loop();
  void fail_all(const std::string& why);  // engine thread
  void publish();                         // engine thread: snapshot_ <- the engine's state

  Engine& engine_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Submit> submits_;   // guarded by mu_
  std::vector<uint64_t> aborts_;  // guarded by mu_
  bool stop_ = false;             // guarded by mu_
  bool healthy_ = true;           // guarded by mu_
  int in_flight_ = 0;             // guarded by mu_
  uint64_t next_key_ = 1;         // guarded by mu_
  EngineSnapshot snapshot_;       // guarded by mu_
  // Engine thread only.
  std::unordered_map<uint64_t, int64_t> id_of_;
  std::unordered_map<int64_t, std::pair<uint64_t, Callback>> by_id_;
  std::thread thread_;
};

}  // namespace ceiling::serve
