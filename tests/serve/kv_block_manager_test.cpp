// KvBlockManager: ref counts, free lists, the prefix cache's hits, LRU eviction and the checks
// that return instead of throwing. Every test ends with check_invariants.
#include "serve/kv_block_manager.h"

#include <gtest/gtest.h>

#include <random>

#include "core/status.h"

namespace ceiling::serve {
namespace {

Sequence make_seq(int64_t id, std::vector<int32_t> prompt) {
  Sequence s;
  s.id = id;
  s.prompt = std::move(prompt);
  return s;
}

std::vector<int32_t> iota_tokens(int n, int32_t start) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + i;
  return v;
}

// Admits `s` with its cached prefix and computes the whole prompt.
int admit_and_compute(KvBlockManager& kv, Sequence& s) {
  const int cached = kv.cached_prefix(s);
  EXPECT_TRUE(kv.can_allocate(s, cached, s.num_tokens() - cached));
  kv.allocate(s, cached, s.num_tokens() - cached);
  s.num_computed = s.num_tokens();
  kv.on_computed(s);
  return cached;
}

TEST(KvBlockManager, AllocateAndFreeReturnEveryBlock) {
  KvBlockManager kv(10, 4, /*prefix caching=*/false);
  Sequence a = make_seq(0, iota_tokens(9, 0));  // 3 blocks
  EXPECT_EQ(admit_and_compute(kv, a), 0);
  EXPECT_EQ(a.block_table.size(), 3u);
  EXPECT_EQ(kv.num_free(), 7);
  kv.check_invariants({&a});
  ASSERT_TRUE(kv.can_append(a, 3));  // 12 tokens: still 3 blocks
  ASSERT_TRUE(kv.can_append(a, 4));  // 13: a fourth
  kv.append(a, 4);
  EXPECT_EQ(kv.num_free(), 6);
  kv.free(a);
  EXPECT_EQ(kv.num_free(), 10);
  EXPECT_TRUE(a.block_table.empty());
  kv.check_invariants({});
}

TEST(KvBlockManager, ChecksReturnFalseWhenFull) {
  KvBlockManager kv(3, 4, false);
  Sequence a = make_seq(0, iota_tokens(12, 0));
  admit_and_compute(kv, a);
  Sequence b = make_seq(1, iota_tokens(1, 100));
  EXPECT_FALSE(kv.can_allocate(b, 0, 1));
  EXPECT_FALSE(kv.can_append(a, 1));
  EXPECT_THROW(kv.append(a, 1), Error);
  kv.check_invariants({&a});
}

TEST(KvBlockManager, PrefixHitSharesFullBlocksAndLeavesOneTokenToCompute) {
  KvBlockManager kv(16, 4, true);
  Sequence a = make_seq(0, iota_tokens(10, 0));  // blocks [0..3] [4..7] full, [8, 9] partial
  EXPECT_EQ(admit_and_compute(kv, a), 0);
  Sequence b = make_seq(1, iota_tokens(10, 0));  // same prompt
  EXPECT_EQ(kv.cached_prefix(b), 8);
  EXPECT_EQ(admit_and_compute(kv, b), 8);
  EXPECT_EQ(b.block_table[0], a.block_table[0]);
  EXPECT_EQ(b.block_table[1], a.block_table[1]);
  EXPECT_NE(b.block_table[2], a.block_table[2]);
  EXPECT_EQ(b.num_cached, 8);
  // A prompt of exactly two full blocks hits only the first: one token must be computed.
  Sequence c = make_seq(2, iota_tokens(8, 0));
  EXPECT_EQ(kv.cached_prefix(c), 4);
  // A different second block stops the chain.
  std::vector<int32_t> p = iota_tokens(10, 0);
  p[5] = 999;
  Sequence d = make_seq(3, p);
  EXPECT_EQ(kv.cached_prefix(d), 4);
  // The same tokens at another offset do not hit (the hash chains the parent).
  std::vector<int32_t> q = {50, 51, 52, 53, 4, 5, 6, 7, 1};
  Sequence e = make_seq(4, q);
  EXPECT_EQ(kv.cached_prefix(e), 0);
  kv.check_invariants({&a, &b});
  EXPECT_EQ(kv.prefix_hits(), 8);
  EXPECT_EQ(kv.prefix_queries(), 20);
  kv.free(a);
  kv.free(b);
  kv.check_invariants({});
  EXPECT_EQ(kv.num_free(), 16);
}

TEST(KvBlockManager, FreedBlocksStayCachedUntilNeededThenLeastRecentlyUsedGoFirst) {
  KvBlockManager kv(4, 2, true);
  Sequence a = make_seq(0, {1, 2, 3, 4, 5});  // blocks {1,2} {3,4} full, {5} partial
  admit_and_compute(kv, a);
  kv.free(a);
  EXPECT_EQ(kv.num_free(), 4);
  EXPECT_EQ(kv.num_cached_free(), 2);
  Sequence b = make_seq(1, {1, 2, 3, 4, 9});
  EXPECT_EQ(admit_and_compute(kv, b), 4);  // both cached blocks reused as they are
  kv.check_invariants({&b});
  kv.free(b);
  // Four fresh blocks for a new prompt: the two plain free blocks, then the cached ones, the
  // tail block {3,4} (freed last-block-first, so least recent) before the head {1,2}.
  Sequence c = make_seq(2, {7, 7, 7, 7, 7, 7});  // 3 blocks
  admit_and_compute(kv, c);
  EXPECT_EQ(kv.num_cached_free(), 1);
  Sequence d = make_seq(3, {1, 2, 3, 4, 5});
  EXPECT_EQ(kv.cached_prefix(d), 2);  // {1,2} survived, {3,4} was evicted
  kv.check_invariants({&c});
}

TEST(KvBlockManager, CanAllocateCountsCachedHitsThatAreFreeBlocks) {
  KvBlockManager kv(3, 2, true);
  Sequence a = make_seq(0, {1, 2, 3, 4, 5});  // 3 blocks; {1,2} {3,4} registered
  admit_and_compute(kv, a);
  kv.free(a);
  Sequence b = make_seq(1, {1, 2, 3, 4, 5, 6, 7});  // hit 4, then 3 new tokens -> 2 fresh blocks
  const int cached = kv.cached_prefix(b);
  EXPECT_EQ(cached, 4);
  // 3 free blocks, but 2 of them are the hits: only 1 is fresh.
  EXPECT_FALSE(kv.can_allocate(b, cached, 3));
  EXPECT_TRUE(kv.can_allocate(b, cached, 2));
  kv.check_invariants({});
}

TEST(KvBlockManager, RandomOperationsKeepEveryInvariant) {
  std::mt19937 rng(7);
  KvBlockManager kv(64, 4, true);
  std::vector<std::unique_ptr<Sequence>> live;
  int64_t next = 0;
  for (int it = 0; it < 3000; ++it) {
    const int op = static_cast<int>(rng() % 3);
    if (op == 0 && live.size() < 12) {  // admit a prompt from a small alphabet (many hits)
      std::vector<int32_t> p(1 + rng() % 20);
      for (auto& t : p) t = static_cast<int32_t>(rng() % 3);
      auto s = std::make_unique<Sequence>(make_seq(next++, p));
      const int cached = kv.cached_prefix(*s);
      const int n = s->num_tokens() - cached;
      if (!kv.can_allocate(*s, cached, n)) continue;
      kv.allocate(*s, cached, n);
      s->num_computed = s->num_tokens();
      kv.on_computed(*s);
      live.push_back(std::move(s));
    } else if (op == 1 && !live.empty()) {  // decode one token
      Sequence& s = *live[rng() % live.size()];
      s.output.push_back(static_cast<int32_t>(rng() % 3));
      const int n = s.num_tokens() - s.num_computed;
      if (!kv.can_append(s, n)) continue;
      kv.append(s, n);
      s.num_computed = s.num_tokens();
      kv.on_computed(s);
    } else if (op == 2 && !live.empty()) {
      const size_t i = rng() % live.size();
      kv.free(*live[i]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    }
    std::vector<const Sequence*> v;
    for (auto& s : live) v.push_back(s.get());
    ASSERT_NO_THROW(kv.check_invariants(v)) << "after op " << it;
  }
  for (auto& s : live) kv.free(*s);
  kv.check_invariants({});
  EXPECT_EQ(kv.num_free(), 64);
  EXPECT_GT(kv.prefix_hits(), 0);
}

}  // namespace
}  // namespace ceiling::serve
