#include "serve/async_engine.h"

#include <exception>

#include "core/status.h"

namespace ceiling::serve {

AsyncEngine::AsyncEngine(Engine& engine) : engine_(engine) {
  publish();
  thread_ = std::thread([this] { loop(); });
}

AsyncEngine::~AsyncEngine() {
  shutdown();
}

uint64_t AsyncEngine::submit(std::vector<int32_t> prompt, RequestParams params, Callback cb) {
  uint64_t key;
  {
    std::lock_guard<std::mutex> lock(mu_);
    key = next_key_++;
    if (stop_ || !healthy_) {
      RequestOutput o;
      o.finished = true;
      o.finish = FinishReason::kAbort;
      o.error = healthy_ ? "the engine is shutting down" : "the engine failed";
      if (cb) cb(o);
      return key;
    }
    submits_.push_back({key, std::move(prompt), std::move(params), std::move(cb)});
    ++in_flight_;
  }
  cv_.notify_one();
  return key;
}

void AsyncEngine::abort(uint64_t key) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborts_.push_back(key);
  }
  cv_.notify_one();
}

void AsyncEngine::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

bool AsyncEngine::healthy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return healthy_;
}

int AsyncEngine::num_in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_flight_;
}

EngineSnapshot AsyncEngine::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return snapshot_;
}

void AsyncEngine::publish() {
  EngineSnapshot s;
  s.num_running = engine_.num_running();
  s.num_waiting = engine_.num_waiting();
  s.kv_blocks = engine_.kv().num_blocks();
  s.kv_free_blocks = engine_.kv().num_free();
  s.kv_usage = engine_.kv().usage();
  s.prefix_queries = engine_.kv().prefix_queries();
  s.prefix_hits = engine_.kv().prefix_hits();
  s.preemptions = engine_.scheduler().num_preemptions();
  s.steps = engine_.stats().steps;
  std::lock_guard<std::mutex> lock(mu_);
  snapshot_ = s;
}

void AsyncEngine::fail_all(const std::string& why) {
  for (auto& [id, entry] : by_id_) {
    engine_.abort(id);
    RequestOutput o;
    o.id = id;
    o.finished = true;
    o.finish = FinishReason::kAbort;
    o.error = why;
    if (entry.second) entry.second(o);
  }
  std::lock_guard<std::mutex> lock(mu_);
  in_flight_ -= static_cast<int>(by_id_.size());
  by_id_.clear();
  id_of_.clear();
}

void AsyncEngine::loop() {
  for (;;) {
    std::vector<Submit> submits;
    std::vector<uint64_t> aborts;
    bool stop;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        return stop_ || !submits_.empty() || !aborts_.empty() || engine_.has_unfinished();
      });
      submits.swap(submits_);
      aborts.swap(aborts_);
      stop = stop_;
    }
    for (Submit& s : submits) {
      try {
        const int64_t id = engine_.add_request(std::move(s.prompt), std::move(s.params));
        id_of_[s.key] = id;
        by_id_[id] = {s.key, std::move(s.cb)};
      } catch (const std::exception& e) {
        RequestOutput o;
        o.finished = true;
        o.finish = FinishReason::kAbort;
        o.error = e.what();
        if (s.cb) s.cb(o);
        std::lock_guard<std::mutex> lock(mu_);
        --in_flight_;
      }
    }
    for (uint64_t key : aborts)
      if (auto it = id_of_.find(key); it != id_of_.end()) engine_.abort(it->second);
    if (stop) {
      fail_all("aborted: the engine is shutting down");
      return;
    }
    try {
      std::vector<RequestOutput> outs = engine_.step();
      publish();  // before the callbacks: a finished request sees its blocks returned
      for (const RequestOutput& o : outs) {
        auto it = by_id_.find(o.id);
        if (it == by_id_.end()) continue;
        if (it->second.second) it->second.second(o);
        if (o.finished) {
          id_of_.erase(it->second.first);
          by_id_.erase(it);
          std::lock_guard<std::mutex> lock(mu_);
          --in_flight_;
        }
      }
    } catch (const std::exception& e) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        healthy_ = false;
      }
      fail_all(std::string("engine error: ") + e.what());
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_; });
      return;
    }
  }
}

}  // namespace ceiling::serve
