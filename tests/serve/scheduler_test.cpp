// Scheduler rules on synthetic sequences (no model): the token budget, decodes first, chunked
// prefill, the sequence cap, FCFS admission, preemption of the newest by recompute and resume,
// and prefix hits at admission. A "step" here advances the computed counts and appends a token
// to every sequence that wanted logits.
#include "serve/scheduler.h"

#include <gtest/gtest.h>

#include <memory>

#include "core/status.h"

namespace ceiling::serve {
namespace {

struct Sim {
  KvBlockManager kv;
  Scheduler sched;
  std::vector<std::unique_ptr<Sequence>> seqs;
  Sim(int blocks, int bs, SchedulerConfig c, bool prefix = false)
      : kv(blocks, bs, prefix), sched(c, kv) {}

  Sequence* add(int prompt_len, int32_t first = 0) {
    auto s = std::make_unique<Sequence>();
    s->id = static_cast<int64_t>(seqs.size());
    for (int i = 0; i < prompt_len; ++i) s->prompt.push_back(first + i);
    sched.add(s.get());
    seqs.push_back(std::move(s));
    return seqs.back().get();
  }
  SchedulerOutput step() {
    SchedulerOutput out = sched.schedule();
    sched.on_step_done(out);
    for (const ScheduledSeq& s : out.seqs)
      if (s.want_logits) s.seq->output.push_back(7);
    kv.check_invariants(sched.live());
    return out;
  }
  int scheduled(const SchedulerOutput& out, const Sequence* s) {
    for (const ScheduledSeq& x : out.seqs)
      if (x.seq == s) return x.num_new;
    return 0;
  }
};

TEST(Scheduler, ChunksPromptsToTheTokenBudgetAndPutsDecodesFirst) {
  Sim sim(100, 4, {.max_num_seqs = 8, .max_num_batched_tokens = 10});
  Sequence* a = sim.add(6);
  Sequence* b = sim.add(25);
  SchedulerOutput o = sim.step();
  EXPECT_EQ(sim.scheduled(o, a), 6);
  EXPECT_EQ(sim.scheduled(o, b), 4);  // the rest of the budget: a chunk
  EXPECT_TRUE(o.seqs[0].want_logits);
  EXPECT_FALSE(o.seqs[1].want_logits);
  EXPECT_EQ(o.num_tokens, 10);
  o = sim.step();  // a decodes (first), b continues with 9
  ASSERT_EQ(o.seqs.size(), 2u);
  EXPECT_EQ(o.seqs[0].seq, a);
  EXPECT_EQ(o.num_decode, 1);
  EXPECT_EQ(sim.scheduled(o, b), 9);
  o = sim.step();
  EXPECT_EQ(sim.scheduled(o, b), 9);
  o = sim.step();
  EXPECT_EQ(sim.scheduled(o, b), 3);  // 4 + 9 + 9 + 3 = 25: the last chunk wants logits
  EXPECT_TRUE(o.seqs.back().want_logits);
  EXPECT_EQ(b->output.size(), 1u);
  for (int i = 0; i < 4; ++i) EXPECT_LE(sim.step().num_tokens, 10);
}

TEST(Scheduler, CapsSequencesAndAdmitsFirstComeFirstServed) {
  Sim sim(100, 4, {.max_num_seqs = 2, .max_num_batched_tokens = 64});
  Sequence* a = sim.add(3);
  Sequence* b = sim.add(3);
  Sequence* c = sim.add(3);
  SchedulerOutput o = sim.step();
  EXPECT_EQ(o.seqs.size(), 2u);
  EXPECT_EQ(sim.scheduled(o, c), 0);
  EXPECT_EQ(sim.sched.num_waiting(), 1);
  sim.sched.remove(a);  // a finishes: c joins at the next step
  o = sim.step();
  EXPECT_EQ(sim.scheduled(o, b), 1);
  EXPECT_EQ(sim.scheduled(o, c), 3);
}

TEST(Scheduler, NoOvertakingWhenTheHeadDoesNotFit) {
  Sim sim(6, 4, {.max_num_seqs = 8, .max_num_batched_tokens = 64, .chunked_prefill = false});
  sim.add(16);                   // 4 blocks
  Sequence* big = sim.add(12);   // 3 blocks: does not fit now
  Sequence* small = sim.add(2);  // would fit, but must wait behind `big`
  SchedulerOutput o = sim.step();
  EXPECT_EQ(o.seqs.size(), 1u);
  EXPECT_EQ(sim.scheduled(o, big), 0);
  EXPECT_EQ(sim.scheduled(o, small), 0);
}

TEST(Scheduler, PreemptsTheNewestByRecomputeAndResumesIt) {
  // 4 blocks of 4: two prompts of 8 tokens take 2 blocks each; the first decode (position 8)
  // needs a third block, and none is free.
  Sim sim(4, 4, {.max_num_seqs = 4, .max_num_batched_tokens = 64});
  Sequence* a = sim.add(8);
  Sequence* b = sim.add(8, 100);
  sim.step();                      // both prefilled, each has 1 output token
  SchedulerOutput o = sim.step();  // a needs a block: b (newest) is preempted
  ASSERT_EQ(o.preempted.size(), 1u);
  EXPECT_EQ(o.preempted[0], b);
  EXPECT_EQ(b->status, SeqStatus::kWaiting);
  EXPECT_EQ(b->num_computed, 0);
  EXPECT_TRUE(b->block_table.empty());
  EXPECT_EQ(b->output.size(), 1u);  // kept
  EXPECT_EQ(sim.scheduled(o, a), 1);
  EXPECT_EQ(sim.sched.num_preemptions(), 1);
  sim.sched.remove(a);  // a finishes: b resumes by recomputing prompt + output
  o = sim.step();
  EXPECT_EQ(sim.scheduled(o, b), 9);
  EXPECT_TRUE(o.seqs[0].want_logits);
  EXPECT_EQ(b->output.size(), 2u);
}

TEST(Scheduler, PreemptsItselfWhenItIsTheNewest) {
  Sim sim(3, 4, {.max_num_seqs = 4, .max_num_batched_tokens = 64});
  Sequence* a = sim.add(7);      // 2 blocks; after its first token 8 tokens still fit in 2
  Sequence* b = sim.add(4, 50);  // 1 block; its fifth token needs a second: none is free
  sim.step();
  SchedulerOutput o = sim.step();
  ASSERT_EQ(o.preempted.size(), 1u);
  EXPECT_EQ(o.preempted[0], b);
  EXPECT_EQ(sim.scheduled(o, a), 1);
  EXPECT_EQ(sim.scheduled(o, b), 0);
  EXPECT_EQ(sim.sched.num_waiting(), 1);
}

TEST(Scheduler, AdmissionTakesThePrefixCacheHit) {
  Sim sim(32, 4, {.max_num_seqs = 4, .max_num_batched_tokens = 64}, /*prefix=*/true);
  Sequence* a = sim.add(13);
  sim.step();
  Sequence* b = sim.add(13);  // same tokens
  SchedulerOutput o = sim.step();
  EXPECT_EQ(sim.scheduled(o, b), 1);  // 12 cached, 1 computed
  EXPECT_EQ(b->num_cached, 12);
  EXPECT_EQ(b->block_table[0], a->block_table[0]);
}

TEST(Scheduler, RejectsABudgetBelowTheSequenceCap) {
  KvBlockManager kv(4, 4, false);
  EXPECT_THROW(Scheduler(SchedulerConfig{8, 4, true}, kv), Error);
  EXPECT_THROW(Scheduler(SchedulerConfig{0, 4, true}, kv), Error);
}

}  // namespace
}  // namespace ceiling::serve
