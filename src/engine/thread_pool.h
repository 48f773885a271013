// A small fixed pool of worker threads for CpuOps: parallel_for splits a range into chunks that
// the workers and the calling thread take in turn. One parallel_for at a time per pool (the
// caller blocks until every chunk is done); the pool is used by one thread (the engine thread).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ceiling::engine {

class ThreadPool {
 public:
  // n_threads total workers including the caller; <= 0 means std::thread::hardware_concurrency().
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint chunks covering [0, n). Runs inline when n <= grain or
  // the pool has one thread. Exceptions from fn are rethrown (the first one) after all chunks.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop();
  void run_chunks();

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  uint64_t generation_ = 0;
  bool stop_ = false;
  // The current job (guarded by mu_ except next_chunk_, which workers claim under mu_ too).
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, chunk_ = 0, next_ = 0;
  int busy_ = 0;
  std::exception_ptr error_;
};

}  // namespace ceiling::engine
