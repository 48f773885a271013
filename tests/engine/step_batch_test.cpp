#include "engine/step_batch.h"

#include <gtest/gtest.h>

#include "core/status.h"

namespace ceiling::engine {
namespace {

StepBatch two_sequences() {
  StepBatch s;
  s.max_blocks = 3;
  append_sequence(s, {10, 11, 12, 13, 14}, 0, {4, 2}, 4, true);  // prefill crossing a block
  append_sequence(s, {20}, 6, {0, 1}, 4, true);                  // decode at position 6
  return s;
}

TEST(StepBatch, AppendBuildsConsistentMetadata) {
  const StepBatch s = two_sequences();
  EXPECT_EQ(s.token_ids, (std::vector<int32_t>{10, 11, 12, 13, 14, 20}));
  EXPECT_EQ(s.positions, (std::vector<int32_t>{0, 1, 2, 3, 4, 6}));
  EXPECT_EQ(s.slot_mapping, (std::vector<int32_t>{16, 17, 18, 19, 8, 6}));
  EXPECT_EQ(s.query_start, (std::vector<int32_t>{0, 5, 6}));
  EXPECT_EQ(s.seq_lens, (std::vector<int32_t>{5, 7}));
  EXPECT_EQ(s.block_tables, (std::vector<int32_t>{4, 2, -1, 0, 1, -1}));
  EXPECT_EQ(s.logits_rows, (std::vector<int32_t>{4, 5}));
  EXPECT_FALSE(s.is_decode());
  EXPECT_NO_THROW(s.validate(5, 4));
}

TEST(StepBatch, ValidateCatchesEveryBrokenInvariant) {
  EXPECT_THROW(two_sequences().validate(4, 4), Error);  // block 4 of a 4-block cache
  auto broken = [](auto mutate) {
    StepBatch s = two_sequences();
    mutate(s);
    EXPECT_THROW(s.validate(5, 4), Error);
  };
  broken([](StepBatch& s) { s.positions[2] = 7; });
  broken([](StepBatch& s) { s.slot_mapping[4] = 20; });
  broken([](StepBatch& s) { s.query_start[1] = 7; });
  broken([](StepBatch& s) { s.seq_lens[1] = 0; });
  broken([](StepBatch& s) { s.seq_lens[1] = 13; });  // beyond 3 blocks of 4
  broken([](StepBatch& s) { s.logits_rows[0] = 6; });
  broken([](StepBatch& s) { s.block_tables.pop_back(); });
  broken([](StepBatch& s) { s.token_ids.push_back(1); });
  broken([](StepBatch& s) { s.block_tables[4] = -1; });
  EXPECT_THROW(StepBatch{}.validate(5, 4), Error);
}

TEST(StepBatch, AppendRejectsTablesTooShort) {
  StepBatch s;
  s.max_blocks = 2;
  EXPECT_THROW(append_sequence(s, {1, 2, 3, 4, 5}, 0, {0}, 4, true), Error);
  EXPECT_THROW(append_sequence(s, {1}, 0, {0, 1, 2}, 4, true), Error);
  EXPECT_THROW(append_sequence(s, {}, 0, {0}, 4, true), Error);
}

}  // namespace
}  // namespace ceiling::engine
