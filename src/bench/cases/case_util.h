// Building blocks shared by the kernel cases: per-set device pools and a base class holding the
// set count and seed. Include only from src/bench/cases/ and tests/gpu.
#pragma once

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/case.h"
#include "bench/check_util.h"
#include "bench/device_util.h"

namespace ceiling::bench {

// `copies` sets of n elements of T in one allocation; each set starts 256-byte aligned.
template <typename T>
class Pool {
 public:
  Pool() = default;
  Pool(size_t n, int copies)
      : n_(n),
        stride_((n * sizeof(T) + 255) / 256 * 256 / sizeof(T)),
        copies_(copies),
        buf_(stride_ * sizeof(T) * static_cast<size_t>(copies)) {}
  T* at(int set) const { return buf_.as<T>() + stride_ * static_cast<size_t>(set); }
  size_t n() const { return n_; }
  size_t total() const { return stride_ * static_cast<size_t>(copies_); }
  T* base() const { return buf_.as<T>(); }

 private:
  size_t n_ = 0, stride_ = 0;
  int copies_ = 0;
  DeviceBuffer buf_;
};

// Common state: how many sets and which seed. check() draws set 0 anew from check_seed().
class CaseBase : public KernelCase {
 protected:
  int copies_ = 0;
  uint64_t seed_ = 0;
  int checks_ = 0;
  void remember(int copies, uint64_t seed) {
    copies_ = copies;
    seed_ = seed;
  }
  uint64_t check_seed() { return seed_ * 0x9E3779B97F4A7C15ull + 0xC0FFEEull + ++checks_; }
};

inline size_t bf16_bytes(double n) {
  return static_cast<size_t>(n * 2);
}

// Pieces of shape strings: "T=1 H=4096".
inline std::string kv(const char* k, long long v) {
  return std::string(k) + "=" + std::to_string(v);
}

}  // namespace ceiling::bench
