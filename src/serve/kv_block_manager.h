// The paged KV cache's bookkeeping: reference-counted blocks, each sequence's block table, and
// the automatic prefix cache.
//
// Prefix caching (as vLLM's): every *full* block a sequence has computed is registered under a
// chained hash h_b = H(h_{b-1}, tokens of block b), so equal prefixes give equal hashes. A new
// sequence takes the blocks of the longest registered prefix of its tokens (their reference count
// goes up) and computes only the rest. At least one token is always left to compute, so the step
// that finishes the prompt produces logits. A block whose count drops to zero keeps its hash and
// contents and joins an LRU of evictable blocks: it is reused as-is on a later hit, or evicted
// (hash dropped, contents overwritten) when a fresh block is needed and no plain free one is left.
//
// Counters: queries and hits are counted in prompt tokens at each admission (vLLM's metric).
// Every check returns instead of throwing; the mutators throw only on a broken invariant.
// Thread-safety: none (the engine thread owns it).
#pragma once

#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

#include "serve/sequence.h"

namespace ceiling::serve {

class KvBlockManager {
 public:
  KvBlockManager(int num_blocks, int block_size, bool enable_prefix_caching);

  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  int block_size() const { return block_size_; }
  bool prefix_caching() const { return prefix_caching_; }
  // Blocks a new allocation can take: plain free ones plus evictable cached ones.
  int num_free() const { return static_cast<int>(free_.size() + lru_.size()); }
  int num_cached_free() const { return static_cast<int>(lru_.size()); }
  double usage() const { return 1.0 - static_cast<double>(num_free()) / num_blocks(); }
  int blocks_for(int64_t tokens) const {
    return static_cast<int>((tokens + block_size_ - 1) / block_size_);
  }

  // Admission of a sequence with no blocks: how many of its leading tokens the prefix cache
  // holds (a multiple of the block size, < num_tokens), without changing anything.
  int cached_prefix(const Sequence& seq) const;
  // Whether the sequence (no blocks yet) can be admitted to compute `num_new` tokens after its
  // cached prefix of `cached` tokens.
  bool can_allocate(const Sequence& seq, int cached, int num_new) const;
  // Takes the cached prefix (seq.num_computed = seq.num_cached = cached) and blocks for `num_new`
  // more tokens. Call only after can_allocate with the same numbers.
  void allocate(Sequence& seq, int cached, int num_new);
  // Whether a running sequence can grow to num_computed + num_new tokens / grows it.
  bool can_append(const Sequence& seq, int num_new) const;
  void append(Sequence& seq, int num_new);
  // After a step computed tokens up to seq.num_computed: registers the newly full blocks.
  void on_computed(Sequence& seq);
  // Returns every block of the sequence (finished, aborted or preempted).
  void free(Sequence& seq);

  int64_t prefix_queries() const { return queries_; }
  int64_t prefix_hits() const { return hits_; }
  // Checks the ref counts against `live` (every sequence holding blocks) and the free lists;
  // throws naming the first broken invariant (for tests).
  void check_invariants(const std::vector<const Sequence*>& live) const;

 private:
  struct Block {
    int ref = 0;
    uint64_t hash = 0;            // 0: not registered
    std::vector<int32_t> tokens;  // the registered block's tokens (hash collisions are checked)
    std::list<int32_t>::iterator lru_it;
  };
  uint64_t block_hash(uint64_t parent, const Sequence& seq, int b) const;
  bool matches(const Block& blk, const Sequence& seq, int b) const;
  int32_t take_fresh();         // a plain free block, else the least recently used cached one
  void ref_cached(int32_t id);  // +1 on a hit (leaves the LRU at 0 -> 1)

  int block_size_;
  bool prefix_caching_;
  std::vector<Block> blocks_;
  std::vector<int32_t> free_;                     // ref 0, no hash (LIFO)
  std::list<int32_t> lru_;                        // ref 0, hashed: front = least recently freed
  std::unordered_map<uint64_t, int32_t> cached_;  // hash -> block
  int64_t queries_ = 0, hits_ = 0;
};

}  // namespace ceiling::serve
