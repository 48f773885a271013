// Weight dtype conversion on the GPU at upload time (f32 / f16 checkpoints -> bf16).
#include <cuda_fp16.h>

#include "core/check.h"
#include "engine/cuda/engine_kernels.h"

namespace ceiling::engine::cuda_impl {
namespace {

constexpr int kThreads = 256;

template <typename T>
__device__ __forceinline__ float to_f32(T v);
template <>
__device__ __forceinline__ float to_f32<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ float to_f32<__half>(__half v) {
  return __half2float(v);
}

template <typename T>
__global__ void convert_kernel(const T* __restrict__ src, bf16* __restrict__ dst, size_t n) {
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += stride)
    dst[i] = __float2bfloat16_rn(to_f32(src[i]));
}

unsigned grid_for(size_t n) {
  const size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 8192 ? blocks : 8192);
}

}  // namespace

Status convert_to_bf16(const void* src, DType src_dtype, bf16* dst, size_t n, cudaStream_t stream) {
  if (n == 0) return Status();
  switch (src_dtype) {
    case DType::kBF16:
      CEILING_CUDA_RETURN(
          cudaMemcpyAsync(dst, src, n * sizeof(bf16), cudaMemcpyDeviceToDevice, stream));
      return Status();
    case DType::kF32:
      convert_kernel<<<grid_for(n), kThreads, 0, stream>>>(static_cast<const float*>(src), dst, n);
      break;
    case DType::kF16:
      convert_kernel<<<grid_for(n), kThreads, 0, stream>>>(static_cast<const __half*>(src), dst, n);
      break;
    default:
      return Status::error("convert_to_bf16: dtype {} not supported (f32, f16, bf16)",
                           dtype_name(src_dtype));
  }
  CEILING_CUDA_RETURN_LAST();
  return Status();
}

}  // namespace ceiling::engine::cuda_impl
