// The continuous-batching scheduler: which sequences run in the next step and how many tokens
// each computes.
//
// Each step has a token budget (max_num_batched_tokens) and a sequence cap (max_num_seqs).
//  1. Running sequences in decode (one token left to compute) are scheduled first, oldest first;
//     then running sequences still prefilling, each with a chunk up to the remaining budget.
//  2. When a running sequence needs a block and none is free, the newest running sequence is
//     preempted (recompute: its blocks are freed, it returns to the front of the waiting queue
//     with its output kept, and later prefills prompt + output again). It may be the sequence
//     itself. A sequence preempted after being scheduled in this step is unscheduled.
//  3. If nothing was preempted, waiting sequences are admitted FCFS while the budget, the cap and
//     the cache allow: each takes its prefix-cache hit and a chunk of the rest (chunked prefill).
//     The first waiting sequence that does not fit stops admission (no overtaking).
// Requests join (add) and leave (finish / abort) between any two steps.
// Thread-safety: none (the engine thread owns it).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "serve/kv_block_manager.h"
#include "serve/sequence.h"

namespace ceiling::serve {

struct SchedulerConfig {
  int max_num_seqs = 256;
  int max_num_batched_tokens = 8192;
  bool chunked_prefill = true;  // false: a prompt is admitted only whole
};

struct ScheduledSeq {
  Sequence* seq = nullptr;
  int num_new = 0;           // tokens computed this step: [seq->num_computed, + num_new)
  bool want_logits = false;  // the chunk ends the sequence's known tokens: sample after it
};

struct SchedulerOutput {
  std::vector<ScheduledSeq> seqs;  // decodes first
  std::vector<Sequence*> preempted;
  int num_tokens = 0;
  int num_decode = 0;  // leading entries of seqs that are decodes
  bool empty() const { return seqs.empty(); }
};

class Scheduler {
 public:
  Scheduler(SchedulerConfig config, KvBlockManager& kv);

  const SchedulerConfig& config() const { return config_; }
  void add(Sequence* seq);  // a new request: to the back of the waiting queue
  SchedulerOutput schedule();
  // After the step ran: advances num_computed of every scheduled sequence and registers its full
  // blocks with the prefix cache.
  void on_step_done(const SchedulerOutput& out);
  // Removes a sequence (finished or aborted) from its queue and frees its blocks.
  void remove(Sequence* seq);

  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  int num_running() const { return static_cast<int>(running_.size()); }
  int64_t num_preemptions() const { return preemptions_; }
  bool empty() const { return waiting_.empty() && running_.empty(); }
  std::vector<const Sequence*> live() const;  // every queued sequence (for invariant checks)

 private:
  void preempt(Sequence* victim, SchedulerOutput& out, int& budget);

  SchedulerConfig config_;
  KvBlockManager& kv_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;  // admission order: back = newest
  int64_t preemptions_ = 0;
};

}  // namespace ceiling::serve
