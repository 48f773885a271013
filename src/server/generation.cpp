#include "server/generation.h"

namespace ceiling::server {
namespace {

double seconds(serve::Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

GenerationJob::GenerationJob(serve::AsyncEngine& engine, ServerMetrics& metrics,
                             Admission& admission, int n)
    : engine_(engine), metrics_(metrics), admission_(admission), last_token_at_(n) {}

std::shared_ptr<GenerationJob> GenerationJob::start(serve::AsyncEngine& engine,
                                                    const GenerationRequest& req,
                                                    ServerMetrics& metrics, Admission& admission) {
  const int n = static_cast<int>(req.choices.size());
  std::shared_ptr<GenerationJob> job(new GenerationJob(engine, metrics, admission, n));
  std::vector<uint64_t> keys;
  for (int i = 0; i < n; ++i) {  // (a refused submit calls back at once, on this thread)
    const ChoiceJob& c = req.choices[static_cast<size_t>(i)];
    keys.push_back(engine.submit(
        c.prompt, c.params, [job, i](const serve::RequestOutput& o) { job->on_output(i, o); }));
  }
  std::lock_guard<std::mutex> lock(job->mu_);
  job->keys_ = std::move(keys);
  return job;
}

void GenerationJob::on_output(int choice, const serve::RequestOutput& o) {
  const auto now = serve::Clock::now();
  auto& last = last_token_at_[static_cast<size_t>(choice)];
  if (!o.new_tokens.empty()) {
    if (last != serve::Clock::time_point{}) metrics_.record_inter_token(seconds(now - last));
    last = now;
  }
  if (o.finished) {
    ServerMetrics::Finished f;
    f.prompt_tokens = o.prompt_tokens;
    f.generation_tokens = o.completion_tokens;
    f.finished_reason = std::string(serve::finish_reason_name(o.finish));
    if (o.arrival != serve::Clock::time_point{}) {
      f.e2e_s =
          seconds((o.finished_at != serve::Clock::time_point{} ? o.finished_at : now) - o.arrival);
      if (o.first_scheduled >= o.arrival) f.queue_s = seconds(o.first_scheduled - o.arrival);
      if (o.first_token >= o.arrival) f.ttft_s = seconds(o.first_token - o.arrival);
    }
    if (o.error.empty()) metrics_.record(f);
    admission_.release(1);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back({choice, o});
  }
  cv_.notify_one();
}

std::vector<GenerationJob::Event> GenerationJob::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !events_.empty(); });
  std::vector<Event> out(std::make_move_iterator(events_.begin()),
                         std::make_move_iterator(events_.end()));
  events_.clear();
  return out;
}

void GenerationJob::abort() {
  std::vector<uint64_t> keys;
  {
    std::lock_guard<std::mutex> lock(mu_);
    keys = keys_;
  }
  for (uint64_t k : keys) engine_.abort(k);
}

}  // namespace ceiling::server
