// Device-memory helpers for benchmark cases and gpu tests: an owning buffer, random fills drawn on
// the device from a seed (never zeros), NaN poisoning of outputs, and host copies.
// Throw ceiling::Error on CUDA failures (these run at setup, never inside a timed run).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/check.h"

namespace ceiling::bench {

// An owning cudaMalloc allocation. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Uniform values in [lo, hi) from a counter-based hash of (seed, index): reproducible per seed,
// independent of launch shape.
void fill_uniform(__nv_bfloat16* p, size_t n, uint64_t seed, float lo, float hi, cudaStream_t s);
void fill_uniform(float* p, size_t n, uint64_t seed, float lo, float hi, cudaStream_t s);
// Integers uniform in [lo, hi).
void fill_uniform_int(int32_t* p, size_t n, uint64_t seed, int32_t lo, int32_t hi, cudaStream_t s);

// Fills `bytes` with 0xFF: NaN for bf16/f16/f32 (and -1 for int32), so an unwritten output fails.
void poison(void* p, size_t bytes, cudaStream_t s);

// Blocking copies (synchronize `s` first).
template <typename T>
std::vector<T> to_host(const T* p, size_t n, cudaStream_t s) {
  std::vector<T> v(n);
  CEILING_CUDA_CHECK(cudaStreamSynchronize(s));
  if (n > 0) CEILING_CUDA_CHECK(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}
template <typename T>
void to_device(T* p, const std::vector<T>& v, cudaStream_t s) {
  CEILING_CUDA_CHECK(cudaStreamSynchronize(s));
  if (!v.empty())
    CEILING_CUDA_CHECK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
}

// The card's L2 size in bytes (device 0 / the current device).
size_t l2_bytes();

}  // namespace ceiling::bench
