#include "engine/block_allocator.h"

#include "core/status.h"

namespace ceiling::engine {

BlockAllocator::BlockAllocator(int num_blocks)
    : num_blocks_(num_blocks), is_free_(num_blocks, true) {
  CEILING_ENSURE(num_blocks > 0, "block allocator: num_blocks must be positive (got {})",
                 num_blocks);
  free_.reserve(num_blocks);
  for (int b = num_blocks - 1; b >= 0; --b) free_.push_back(b);  // block 0 is handed out first
}

int32_t BlockAllocator::allocate() {
  CEILING_ENSURE(!free_.empty(), "KV cache full: all {} blocks are in use", num_blocks_);
  const int32_t b = free_.back();
  free_.pop_back();
  is_free_[b] = false;
  return b;
}

void BlockAllocator::free(int32_t block) {
  CEILING_ENSURE(block >= 0 && block < num_blocks_,
                 "block allocator: block {} out of range [0, {})", block, num_blocks_);
  CEILING_ENSURE(!is_free_[block], "block allocator: block {} freed twice", block);
  is_free_[block] = true;
  free_.push_back(block);
}

SequenceBlocks::SequenceBlocks(BlockAllocator& allocator, int block_size)
    : allocator_(allocator), block_size_(block_size) {
  CEILING_ENSURE(block_size > 0, "block_size must be positive (got {})", block_size);
}

SequenceBlocks::~SequenceBlocks() {
  release();
}

void SequenceBlocks::reserve(int num_tokens) {
  while (capacity() < num_tokens) table_.push_back(allocator_.allocate());
}

void SequenceBlocks::release() {
  for (int32_t b : table_) allocator_.free(b);
  table_.clear();
}

int64_t SequenceBlocks::slot(int pos) const {
  CEILING_ENSURE(pos >= 0 && pos < capacity(), "sequence: position {} outside its {} slots", pos,
                 capacity());
  return int64_t{table_[pos / block_size_]} * block_size_ + pos % block_size_;
}

}  // namespace ceiling::engine
