#include "serve/kv_block_manager.h"

#include <algorithm>

#include "core/status.h"

namespace ceiling::serve {

namespace {

constexpr uint64_t kRootHash = 0x6365696c696e6721ull;  // the parent of block 0

uint64_t mix(uint64_t z) {  // SplitMix64 finalizer
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

KvBlockManager::KvBlockManager(int num_blocks, int block_size, bool enable_prefix_caching)
    : block_size_(block_size), prefix_caching_(enable_prefix_caching) {
  CEILING_ENSURE(num_blocks > 0, "KV cache: need at least one block (got {})", num_blocks);
  CEILING_ENSURE(block_size > 0, "KV cache: block size must be positive (got {})", block_size);
  blocks_.resize(static_cast<size_t>(num_blocks));
  free_.reserve(blocks_.size());
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);  // block 0 is taken first
}

uint64_t KvBlockManager::block_hash(uint64_t parent, const Sequence& seq, int b) const {
  uint64_t h = mix(parent);
  for (int i = b * block_size_; i < (b + 1) * block_size_; ++i)
    h = mix(h ^ static_cast<uint32_t>(seq.token(i)));
  return h == 0 ? 1 : h;  // 0 means "not registered"
}

bool KvBlockManager::matches(const Block& blk, const Sequence& seq, int b) const {
  for (int i = 0; i < block_size_; ++i)
    if (blk.tokens[static_cast<size_t>(i)] != seq.token(b * block_size_ + i)) return false;
  return true;
}

int KvBlockManager::cached_prefix(const Sequence& seq) const {
  if (!prefix_caching_) return 0;
  uint64_t parent = kRootHash;
  int b = 0;
  // Leave at least one token to compute: the step that ends the prompt must produce logits.
  for (; (b + 1) * block_size_ <= seq.num_tokens() - 1; ++b) {
    const uint64_t h = block_hash(parent, seq, b);
    auto it = cached_.find(h);
    if (it == cached_.end() || !matches(blocks_[static_cast<size_t>(it->second)], seq, b)) break;
    parent = h;
  }
  return b * block_size_;
}

bool KvBlockManager::can_allocate(const Sequence& seq, int cached, int num_new) const {
  if (!seq.block_table.empty() || cached % block_size_ != 0 || num_new < 0) return false;
  // Hit blocks that sit in the LRU stop being free when taken.
  int hit_free = 0;
  uint64_t parent = kRootHash;
  for (int b = 0; b < cached / block_size_; ++b) {
    parent = block_hash(parent, seq, b);
    auto it = cached_.find(parent);
    if (it == cached_.end()) return false;  // the prefix changed since cached_prefix()
    hit_free += blocks_[static_cast<size_t>(it->second)].ref == 0;
  }
  const int fresh = blocks_for(int64_t{cached} + num_new) - cached / block_size_;
  return fresh <= num_free() - hit_free;
}

void KvBlockManager::allocate(Sequence& seq, int cached, int num_new) {
  CEILING_ENSURE(can_allocate(seq, cached, num_new),
                 "KV cache: allocate({} cached + {} new) for sequence {} without room", cached,
                 num_new, seq.id);
  uint64_t parent = kRootHash;
  for (int b = 0; b < cached / block_size_; ++b) {
    parent = block_hash(parent, seq, b);
    const int32_t id = cached_.at(parent);
    ref_cached(id);
    seq.block_table.push_back(id);
    seq.block_hashes.push_back(parent);
  }
  seq.num_computed = seq.num_cached = cached;
  queries_ += seq.num_tokens();
  hits_ += cached;
  append(seq, num_new);
}

bool KvBlockManager::can_append(const Sequence& seq, int num_new) const {
  const int need =
      blocks_for(int64_t{seq.num_computed} + num_new) - static_cast<int>(seq.block_table.size());
  return need <= num_free();
}

void KvBlockManager::append(Sequence& seq, int num_new) {
  const int need = blocks_for(int64_t{seq.num_computed} + num_new);
  CEILING_ENSURE(need - static_cast<int>(seq.block_table.size()) <= num_free(),
                 "KV cache: sequence {} needs {} blocks, {} free", seq.id,
                 need - static_cast<int>(seq.block_table.size()), num_free());
  while (static_cast<int>(seq.block_table.size()) < need) seq.block_table.push_back(take_fresh());
}

void KvBlockManager::on_computed(Sequence& seq) {
  if (!prefix_caching_) return;
  const int full =
      std::min(seq.num_computed / block_size_, static_cast<int>(seq.block_table.size()));
  for (int b = static_cast<int>(seq.block_hashes.size()); b < full; ++b) {
    const uint64_t parent = b == 0 ? kRootHash : seq.block_hashes[static_cast<size_t>(b - 1)];
    const uint64_t h = block_hash(parent, seq, b);
    seq.block_hashes.push_back(h);
    const int32_t id = seq.block_table[static_cast<size_t>(b)];
    Block& blk = blocks_[static_cast<size_t>(id)];
    if (blk.hash != 0) continue;     // a prefix hit: already registered
    if (cached_.count(h)) continue;  // another sequence registered the same tokens
    blk.hash = h;
    blk.tokens.assign(static_cast<size_t>(block_size_), 0);
    for (int i = 0; i < block_size_; ++i)
      blk.tokens[static_cast<size_t>(i)] = seq.token(b * block_size_ + i);
    cached_[h] = id;
  }
}

void KvBlockManager::free(Sequence& seq) {
  // Last block first: a prefix's tail is evicted before its head.
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) {
    Block& blk = blocks_[static_cast<size_t>(*it)];
    CEILING_ENSURE(blk.ref > 0, "KV cache: block {} of sequence {} freed twice", *it, seq.id);
    if (--blk.ref > 0) continue;
    if (blk.hash != 0) {
      blk.lru_it = lru_.insert(lru_.end(), *it);
    } else {
      free_.push_back(*it);
    }
  }
  seq.block_table.clear();
  seq.block_hashes.clear();
  seq.num_computed = 0;
}

int32_t KvBlockManager::take_fresh() {
  int32_t id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    CEILING_ENSURE(!lru_.empty(), "KV cache: no free block left");
    id = lru_.front();
    lru_.pop_front();
    Block& blk = blocks_[static_cast<size_t>(id)];
    cached_.erase(blk.hash);
    blk.hash = 0;
    blk.tokens.clear();
  }
  blocks_[static_cast<size_t>(id)].ref = 1;
  return id;
}

void KvBlockManager::ref_cached(int32_t id) {
  Block& blk = blocks_[static_cast<size_t>(id)];
  if (blk.ref == 0) lru_.erase(blk.lru_it);
  ++blk.ref;
}

void KvBlockManager::check_invariants(const std::vector<const Sequence*>& live) const {
  std::vector<int> refs(blocks_.size(), 0);
  for (const Sequence* s : live)
    for (int32_t b : s->block_table) {
      CEILING_ENSURE(b >= 0 && b < num_blocks(), "KV cache: sequence {} holds block {}", s->id, b);
      ++refs[static_cast<size_t>(b)];
    }
  std::vector<int> listed(blocks_.size(), 0);
  for (int32_t b : free_) ++listed[static_cast<size_t>(b)];
  for (int32_t b : lru_) ++listed[static_cast<size_t>(b)];
  for (size_t b = 0; b < blocks_.size(); ++b) {
    const Block& blk = blocks_[b];
    CEILING_ENSURE(blk.ref >= 0, "KV cache: block {} has ref {}", b, blk.ref);
    CEILING_ENSURE(blk.ref == refs[b], "KV cache: block {} has ref {} but {} tables hold it", b,
                   blk.ref, refs[b]);
    CEILING_ENSURE(listed[b] == (blk.ref == 0 ? 1 : 0),
                   "KV cache: block {} (ref {}) is on the free lists {} times", b, blk.ref,
                   listed[b]);
    if (blk.hash != 0) {
      auto it = cached_.find(blk.hash);
      CEILING_ENSURE(it != cached_.end() && it->second == static_cast<int32_t>(b),
                     "KV cache: block {} has a hash the cache does not map to it", b);
    }
  }
  for (int32_t b : free_)
    CEILING_ENSURE(blocks_[static_cast<size_t>(b)].hash == 0, "KV cache: free block {} hashed", b);
  for (int32_t b : lru_)
    CEILING_ENSURE(blocks_[static_cast<size_t>(b)].hash != 0, "KV cache: LRU block {} unhashed", b);
}

}  // namespace ceiling::serve
