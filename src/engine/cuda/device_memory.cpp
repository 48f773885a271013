#include "engine/cuda/device_memory.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <utility>

#include "core/check.h"

namespace ceiling::engine::cuda_impl {

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  const cudaError_t e = cudaMalloc(&ptr_, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the (non-sticky) allocation error
    fail("cuda: cannot allocate {:.1f} MiB of device memory: {}", bytes / 1048576.0,
         cudaGetErrorString(e));
  }
}
DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

PinnedBuffer::PinnedBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  const cudaError_t e = cudaMallocHost(&ptr_, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    fail("cuda: cannot allocate {:.1f} MiB of pinned host memory: {}", bytes / 1048576.0,
         cudaGetErrorString(e));
  }
}
PinnedBuffer::~PinnedBuffer() {
  if (ptr_) cudaFreeHost(ptr_);
}
PinnedBuffer::PinnedBuffer(PinnedBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFreeHost(ptr_);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void* DeviceArena::allocate(size_t bytes) {
  constexpr size_t kAlign = 256;
  const size_t need = std::max<size_t>((bytes + kAlign - 1) / kAlign * kAlign, kAlign);
  if (chunks_.empty() || used_ + need > chunks_.back().bytes()) {
    chunks_.emplace_back(std::max(need, chunk_bytes_));
    used_ = 0;
  }
  char* p = static_cast<char*>(chunks_.back().get()) + used_;
  used_ += need;
  blocks_.push_back({reinterpret_cast<uintptr_t>(p), bytes});
  return p;
}

size_t DeviceArena::bytes_reserved() const {
  size_t n = 0;
  for (const DeviceBuffer& c : chunks_) n += c.bytes();
  return n;
}

bool DeviceArena::contains(const void* p, size_t bytes) const {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  for (const Block& b : blocks_)
    if (a >= b.start && a + bytes <= b.start + b.bytes) return true;
  return false;
}

}  // namespace ceiling::engine::cuda_impl
