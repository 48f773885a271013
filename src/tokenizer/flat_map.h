// Open-addressing hash tables for the BPE hot paths (vocab lookup per character, merge lookup
// per adjacent pair): flat arrays, linear probing, no per-entry allocation. Insert-only.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ceiling::tok {

// string -> int32. Keys live in one arena; views returned by key() stay valid until the next
// insert that grows the arena (build first, then query).
class FlatStringMap {
 public:
  void reserve(std::size_t n) {
    entries_.reserve(n);
    rehash(capacity_for(n));
  }
  // Inserts or overwrites (the last value for a key wins, as in serde's HashMap).
  void insert(std::string_view key, int32_t value) {
    if ((entries_.size() + 1) * 2 > slots_.size()) rehash(capacity_for(entries_.size() + 1));
    const uint64_t h = hash(key);
    for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
      const uint64_t slot = slots_[i];
      if (slot == 0) {
        entries_.push_back(
            {static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(key.size()), value});
        arena_.append(key);
        slots_[i] = pack(h, entries_.size());
        return;
      }
      if (tag(slot) != tag_of(h)) continue;
      Entry& en = entries_[index(slot)];
      if (this->key(en) == key) {
        en.value = value;
        return;
      }
    }
  }
  std::optional<int32_t> find(std::string_view key) const {
    if (slots_.empty()) return std::nullopt;
    const uint64_t h = hash(key);
    for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
      const uint64_t slot = slots_[i];
      if (slot == 0) return std::nullopt;
      if (tag(slot) != tag_of(h)) continue;
      const Entry& en = entries_[index(slot)];
      if (this->key(en) == key) return en.value;
    }
  }
  std::size_t size() const { return entries_.size(); }
  // Calls f(key, value) for every entry in insertion order.
  template <typename F>
  void for_each(F&& f) const {
    for (const Entry& e : entries_) f(key(e), e.value);
  }

 private:
  struct Entry {
    uint32_t offset, size;
    int32_t value;
  };
  // A slot packs the key hash's high 32 bits (checked before touching the entry) with the
  // entry index + 1 (0 marks an empty slot).
  static uint64_t hash(std::string_view s) { return std::hash<std::string_view>{}(s); }
  static uint32_t tag_of(uint64_t h) { return static_cast<uint32_t>(h >> 32); }
  static uint32_t tag(uint64_t slot) { return static_cast<uint32_t>(slot >> 32); }
  static std::size_t index(uint64_t slot) { return static_cast<uint32_t>(slot) - 1; }
  static uint64_t pack(uint64_t h, std::size_t index_plus_one) {
    return (static_cast<uint64_t>(tag_of(h)) << 32) | static_cast<uint32_t>(index_plus_one);
  }
  static std::size_t capacity_for(std::size_t n) {
    std::size_t c = 16;
    while (c < n * 2) c *= 2;
    return c;
  }
  std::string_view key(const Entry& e) const {
    return std::string_view(arena_).substr(e.offset, e.size);
  }
  void rehash(std::size_t cap) {
    if (cap <= slots_.size()) return;
    slots_.assign(cap, 0);
    mask_ = cap - 1;
    for (std::size_t k = 0; k < entries_.size(); ++k) {
      const uint64_t h = hash(key(entries_[k]));
      std::size_t i = h & mask_;
      while (slots_[i] != 0) i = (i + 1) & mask_;
      slots_[i] = pack(h, k + 1);
    }
  }
  std::vector<Entry> entries_;
  std::vector<uint64_t> slots_;
  std::size_t mask_ = 0;
  std::string arena_;
};

// uint64 -> V with a reserved empty key (~0), for merge pairs packed as (left id << 32 | right).
template <typename V>
class FlatU64Map {
 public:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  void reserve(std::size_t n) {
    std::size_t cap = 16;
    while (cap < n * 2) cap *= 2;
    if (cap > keys_.size()) rehash(cap);
  }
  void insert_or_assign(uint64_t key, const V& v) {
    if ((size_ + 1) * 2 > keys_.size()) reserve(size_ + 1);
    for (std::size_t i = slot(key);; i = (i + 1) & mask_) {
      if (keys_[i] == key) {
        values_[i] = v;
        return;
      }
      if (keys_[i] == kEmpty) {
        keys_[i] = key;
        values_[i] = v;
        ++size_;
        return;
      }
    }
  }
  const V* find(uint64_t key) const {
    if (keys_.empty()) return nullptr;
    for (std::size_t i = slot(key);; i = (i + 1) & mask_) {
      if (keys_[i] == key) return &values_[i];
      if (keys_[i] == kEmpty) return nullptr;
    }
  }

 private:
  std::size_t slot(uint64_t key) const {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> 32) & mask_;
  }
  void rehash(std::size_t cap) {
    std::vector<uint64_t> old_keys = std::move(keys_);
    std::vector<V> old_values = std::move(values_);
    keys_.assign(cap, kEmpty);
    values_.assign(cap, V{});
    mask_ = cap - 1;
    for (std::size_t k = 0; k < old_keys.size(); ++k) {
      if (old_keys[k] == kEmpty) continue;
      std::size_t i = slot(old_keys[k]);
      while (keys_[i] != kEmpty) i = (i + 1) & mask_;
      keys_[i] = old_keys[k];
      values_[i] = old_values[k];
    }
  }
  std::vector<uint64_t> keys_;
  std::vector<V> values_;
  std::size_t mask_ = 0, size_ = 0;
};

}  // namespace ceiling::tok
