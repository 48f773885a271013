#include "engine/block_allocator.h"

#include <gtest/gtest.h>

#include <set>

#include "core/status.h"

namespace ceiling::engine {
namespace {

TEST(BlockAllocator, HandsOutEveryBlockOnceThenFails) {
  BlockAllocator a(5);
  std::set<int32_t> got;
  for (int i = 0; i < 5; ++i) got.insert(a.allocate());
  EXPECT_EQ(got, (std::set<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(a.num_free(), 0);
  EXPECT_THROW(a.allocate(), Error);
  a.free(3);
  EXPECT_EQ(a.allocate(), 3);
  EXPECT_THROW(BlockAllocator(0), Error);
}

TEST(BlockAllocator, RejectsDoubleFreeAndBadIds) {
  BlockAllocator a(3);
  const int32_t b = a.allocate();
  a.free(b);
  EXPECT_THROW(a.free(b), Error);
  EXPECT_THROW(a.free(-1), Error);
  EXPECT_THROW(a.free(3), Error);
}

TEST(SequenceBlocks, GrowsByBlockAndMapsSlots) {
  BlockAllocator a(8);
  {
    SequenceBlocks s(a, 4);
    s.reserve(1);
    EXPECT_EQ(s.table().size(), 1u);
    s.reserve(4);
    EXPECT_EQ(s.table().size(), 1u);  // exactly one full block
    s.reserve(5);
    EXPECT_EQ(s.table().size(), 2u);  // block boundary crossed
    EXPECT_EQ(s.capacity(), 8);
    EXPECT_EQ(s.slot(5), int64_t{s.table()[1]} * 4 + 1);
    EXPECT_THROW(s.slot(8), Error);
    EXPECT_EQ(a.num_free(), 6);
    SequenceBlocks t(a, 4);
    EXPECT_THROW(t.reserve(100), Error);  // runs out; keeps what it got
    EXPECT_EQ(a.num_free(), 0);
  }
  EXPECT_EQ(a.num_free(), 8);  // destructors return every block
}

}  // namespace
}  // namespace ceiling::engine
