// Device and pinned host memory for the CUDA backend: owning buffers, and the arena every
// workspace buffer of a CudaOps comes from (plain cudaMalloc, never managed memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ceiling::engine::cuda_impl {

// One cudaMalloc (device) or cudaMallocHost (pinned host) allocation. Move-only. Throws
// ceiling::Error naming the size when the allocation fails.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& o) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Bump allocator over device chunks of at least `chunk_bytes`. Allocations are 256-byte aligned,
// never move and are freed together with the arena. Not thread-safe.
class DeviceArena {
 public:
  explicit DeviceArena(size_t chunk_bytes = size_t{64} << 20) : chunk_bytes_(chunk_bytes) {}
  void* allocate(size_t bytes);
  size_t bytes_reserved() const;  // sum of the chunks' sizes

  // The allocation holding [p, p + bytes), or false when p was not returned by allocate().
  bool contains(const void* p, size_t bytes) const;

 private:
  struct Block {
    uintptr_t start;
    size_t bytes;
  };
  size_t chunk_bytes_;
  std::vector<DeviceBuffer> chunks_;
  size_t used_ = 0;            // bytes used in chunks_.back()
  std::vector<Block> blocks_;  // every allocation, for contains()
};

}  // namespace ceiling::engine::cuda_impl
