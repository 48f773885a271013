#include <cstring>

#include "bench/device_util.h"
#include "core/check.h"

namespace ceiling::bench {
namespace {

__device__ __forceinline__ uint64_t hash64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__device__ __forceinline__ float unit(uint64_t seed, size_t i) {
  return static_cast<float>(hash64(seed ^ hash64(i)) >> 40) * 0x1.0p-24f;
}

template <typename T>
__global__ void fill_kernel(T* p, size_t n, uint64_t seed, float lo, float hi) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const float v = lo + (hi - lo) * unit(seed, i);
    if constexpr (sizeof(T) == 2)
      p[i] = __float2bfloat16(v);
    else
      p[i] = v;
  }
}

__global__ void fill_int_kernel(int32_t* p, size_t n, uint64_t seed, int32_t lo, int32_t hi) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t span = static_cast<uint64_t>(static_cast<int64_t>(hi) - lo);
    p[i] = static_cast<int32_t>(lo + static_cast<int64_t>(hash64(seed ^ hash64(i)) % span));
  }
}

unsigned grid_for(size_t n) {
  const size_t g = (n + 255) / 256;
  return static_cast<unsigned>(g < 4096 ? (g == 0 ? 1 : g) : 4096);
}

}  // namespace

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes > 0) CEILING_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void fill_uniform(__nv_bfloat16* p, size_t n, uint64_t seed, float lo, float hi, cudaStream_t s) {
  if (n == 0) return;
  fill_kernel<<<grid_for(n), 256, 0, s>>>(p, n, seed, lo, hi);
  CEILING_CUDA_CHECK(cudaGetLastError());
}

void fill_uniform(float* p, size_t n, uint64_t seed, float lo, float hi, cudaStream_t s) {
  if (n == 0) return;
  fill_kernel<<<grid_for(n), 256, 0, s>>>(p, n, seed, lo, hi);
  CEILING_CUDA_CHECK(cudaGetLastError());
}

void fill_uniform_int(int32_t* p, size_t n, uint64_t seed, int32_t lo, int32_t hi, cudaStream_t s) {
  CEILING_ENSURE(hi > lo, "fill_uniform_int: empty range [{}, {})", lo, hi);
  if (n == 0) return;
  fill_int_kernel<<<grid_for(n), 256, 0, s>>>(p, n, seed, lo, hi);
  CEILING_CUDA_CHECK(cudaGetLastError());
}

void poison(void* p, size_t bytes, cudaStream_t s) {
  if (bytes > 0) CEILING_CUDA_CHECK(cudaMemsetAsync(p, 0xFF, bytes, s));
}

size_t l2_bytes() {
  int dev = 0;
  CEILING_CUDA_CHECK(cudaGetDevice(&dev));
  int l2 = 0;
  CEILING_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  return static_cast<size_t>(l2);
}

}  // namespace ceiling::bench
