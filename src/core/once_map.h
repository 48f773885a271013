// Values computed once per key and looked up afterwards: the per-device queries and attribute
// settings that launchers and planners would otherwise repeat on every eager step (the GEMVs'
// shared-memory carveout, the skinny GEMM's cluster occupancy, the sm90 prefill probe). A few
// keys each, so a short list under one mutex; make() runs under it, so it runs once per key
// even when threads race. A make() that fails (returns std::nullopt) stores nothing: the next
// call tries again.
#pragma once

#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace ceiling {

template <typename Key, typename Value>
class OnceMap {
 public:
  // The value stored for `key`; else make()'s (a std::optional<Value>), stored unless empty.
  template <typename Make>
  std::optional<Value> get(const Key& key, Make&& make) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [k, v] : entries_)
      if (k == key) return v;
    std::optional<Value> v = std::forward<Make>(make)();
    if (v) entries_.emplace_back(key, *v);
    return v;
  }
  // Every stored (key, value), in the order they were first made.
  std::vector<std::pair<Key, Value>> entries() const {
    std::lock_guard<std::mutex> lock(mu_);
    return entries_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<Key, Value>> entries_;
};

}  // namespace ceiling
