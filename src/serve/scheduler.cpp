#include "serve/scheduler.h"

#include <algorithm>

#include "core/status.h"

namespace ceiling::serve {

Scheduler::Scheduler(SchedulerConfig config, KvBlockManager& kv) : config_(config), kv_(kv) {
  CEILING_ENSURE(config.max_num_seqs >= 1, "--max-num-seqs must be >= 1 (got {})",
                 config.max_num_seqs);
  CEILING_ENSURE(config.max_num_batched_tokens >= config.max_num_seqs,
                 "--max-num-batched-tokens ({}) must be >= --max-num-seqs ({})",
                 config.max_num_batched_tokens, config.max_num_seqs);
}

void Scheduler::add(Sequence* seq) {
  seq->status = SeqStatus::kWaiting;
  waiting_.push_back(seq);
}

void Scheduler::preempt(Sequence* victim, SchedulerOutput& out, int& budget) {
  auto it = std::find_if(out.seqs.begin(), out.seqs.end(),
                         [&](const ScheduledSeq& s) { return s.seq == victim; });
  if (it != out.seqs.end()) {  // unschedule it
    budget += it->num_new;
    out.num_tokens -= it->num_new;
    if (it - out.seqs.begin() < out.num_decode) --out.num_decode;
    out.seqs.erase(it);
  }
  running_.erase(std::find(running_.begin(), running_.end(), victim));
  kv_.free(*victim);
  victim->status = SeqStatus::kWaiting;
  ++victim->num_preemptions;
  ++preemptions_;
  waiting_.push_front(victim);
  out.preempted.push_back(victim);
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  int budget = config_.max_num_batched_tokens;
  // 1. Running: decodes, then chunks of prompts already under way.
  for (int pass = 0; pass < 2; ++pass) {
    const std::vector<Sequence*> order = running_;  // preemption edits running_
    for (Sequence* seq : order) {
      if (seq->status != SeqStatus::kRunning) continue;  // preempted in this loop
      const int left = seq->num_uncomputed();
      if ((pass == 0) != (left == 1)) continue;
      const int n = std::min(left, budget);
      if (n <= 0) break;
      bool self_preempted = false;
      while (!kv_.can_append(*seq, n)) {
        Sequence* victim = running_.back();
        preempt(victim, out, budget);
        if (victim == seq) {
          self_preempted = true;
          break;
        }
      }
      if (self_preempted) continue;
      kv_.append(*seq, n);
      out.seqs.push_back({seq, n, seq->num_computed + n == seq->num_tokens()});
      out.num_tokens += n;
      out.num_decode += pass == 0;
      budget -= n;
    }
  }
  // 2. Waiting, FCFS, unless this step had to preempt.
  while (out.preempted.empty() && !waiting_.empty() && budget > 0 &&
         static_cast<int>(running_.size()) < config_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    const int cached = kv_.cached_prefix(*seq);
    const int left = seq->num_tokens() - cached;
    const int n = std::min(left, budget);
    if (!config_.chunked_prefill && n < left) break;
    if (!kv_.can_allocate(*seq, cached, n)) break;
    kv_.allocate(*seq, cached, n);
    waiting_.pop_front();
    running_.push_back(seq);
    seq->status = SeqStatus::kRunning;
    out.seqs.push_back({seq, n, seq->num_computed + n == seq->num_tokens()});
    out.num_tokens += n;
    budget -= n;
  }
  return out;
}

void Scheduler::on_step_done(const SchedulerOutput& out) {
  for (const ScheduledSeq& s : out.seqs) {
    s.seq->num_computed += s.num_new;
    kv_.on_computed(*s.seq);
  }
}

void Scheduler::remove(Sequence* seq) {
  if (auto it = std::find(running_.begin(), running_.end(), seq); it != running_.end())
    running_.erase(it);
  if (auto it = std::find(waiting_.begin(), waiting_.end(), seq); it != waiting_.end())
    waiting_.erase(it);
  kv_.free(*seq);
}

std::vector<const Sequence*> Scheduler::live() const {
  std::vector<const Sequence*> v(waiting_.begin(), waiting_.end());
  v.insert(v.end(), running_.begin(), running_.end());
  return v;
}

}  // namespace ceiling::serve
