// KV-cache block bookkeeping: a free list of physical blocks, and each sequence's block table
// that grows as the sequence does. The continuous-batching scheduler will share one allocator
// between sequences; the single-sequence generate loop already goes through it.
#pragma once

#include <cstdint>
#include <vector>

namespace ceiling::engine {

class BlockAllocator {
 public:
  explicit BlockAllocator(int num_blocks);

  int num_blocks() const { return num_blocks_; }
  int num_free() const { return static_cast<int>(free_.size()); }

  // A free block id in [0, num_blocks). Throws ceiling::Error when none is left.
  int32_t allocate();
  // Returns a block to the free list. Throws on an id out of range or already free.
  void free(int32_t block);

 private:
  int num_blocks_;
  std::vector<int32_t> free_;  // LIFO: the most recently freed block is reused first
  std::vector<bool> is_free_;  // [num_blocks]
};

// One sequence's block table: block b holds positions [b·block_size, (b+1)·block_size).
class SequenceBlocks {
 public:
  SequenceBlocks(BlockAllocator& allocator, int block_size);
  ~SequenceBlocks();  // frees every block
  SequenceBlocks(const SequenceBlocks&) = delete;
  SequenceBlocks& operator=(const SequenceBlocks&) = delete;

  // Allocates blocks until `num_tokens` positions fit. Throws when the allocator runs out (the
  // table keeps the blocks it already got).
  void reserve(int num_tokens);
  // Frees every block (the sequence finished or was preempted).
  void release();

  const std::vector<int32_t>& table() const { return table_; }
  int capacity() const { return static_cast<int>(table_.size()) * block_size_; }
  int block_size() const { return block_size_; }
  // The KV slot of position `pos` (which must be < capacity()).
  int64_t slot(int pos) const;

 private:
  BlockAllocator& allocator_;
  int block_size_;
  std::vector<int32_t> table_;
};

}  // namespace ceiling::engine
