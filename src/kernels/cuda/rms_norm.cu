#include "core/check.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/rms_norm.h"

namespace ceiling::cuda {
namespace {

using detail::bf16;

// Where row i lives: (i / per_group) * group_stride + (i % per_group) * H elements from the base.
struct RowLayout {
  int per_group;
  int64_t group_stride;
  __device__ int64_t offset(int64_t i, int H) const {
    return (i / per_group) * group_stride + (i % per_group) * H;
  }
};

// One row of H = 8·chunks elements, with the row's chunks spread over `lanes` threads
// (lane, lane + lanes, ...), kChunks per thread held in registers. `sum` reduces over the lanes.
template <int kChunks, typename SumFn>
__device__ __forceinline__ void norm_row(const bf16* x, bf16* residual, const bf16* __restrict__ w,
                                         bf16* out, int H, float eps, int lane, int lanes,
                                         SumFn sum) {
  const int chunks = H / 8;
  float r[kChunks][8];
  detail::Bf16x8 wv[kChunks];  // loaded with x, so no DRAM round trip follows the reduction
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    const int c = lane + j * lanes;
    if (c < chunks) {
      wv[j] = detail::load8(w + c * 8);
      detail::to_float8(detail::load8(x + c * 8), r[j]);
      if (residual) {
        float res[8];
        detail::to_float8(detail::load8(residual + c * 8), res);
#pragma unroll
        for (int e = 0; e < 8; ++e) r[j][e] += res[e];
        const detail::Bf16x8 rb = detail::from_float8(r[j]);
        detail::store8(residual + c * 8, rb);
        detail::to_float8(rb, r[j]);  // normalize exactly what the residual stream holds
      }
#pragma unroll
      for (int e = 0; e < 8; ++e) ss += r[j][e] * r[j][e];
    }
  }
  const float inv = rsqrtf(sum(ss) / static_cast<float>(H) + eps);
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    const int c = lane + j * lanes;
    if (c < chunks) {
      float wf[8];
      detail::to_float8(wv[j], wf);
#pragma unroll
      for (int e = 0; e < 8; ++e) r[j][e] *= inv * wf[e];
      detail::store8(out + c * 8, detail::from_float8(r[j]));
    }
  }
}

// One CTA per row (large H), at most kMaxBlock threads.
constexpr int kMaxBlock = 512;
template <int kChunks>
__global__ void __launch_bounds__(kMaxBlock)
    rms_norm_block_kernel(const bf16* x, bf16* residual, const bf16* __restrict__ w, bf16* out,
                          int H, float eps, RowLayout layout) {
  __shared__ float scratch[32];
  const int64_t off = layout.offset(blockIdx.x, H);
  bf16* res = residual ? residual + static_cast<int64_t>(blockIdx.x) * H : nullptr;
  norm_row<kChunks>(x + off, res, w, out + off, H, eps, threadIdx.x, blockDim.x,
                    [&](float v) { return detail::block_sum(v, scratch); });
}

// One warp per row (H ≤ 256·kChunks), blockDim/32 rows per CTA.
template <int kChunks>
__global__ void rms_norm_warp_kernel(const bf16* x, bf16* residual, const bf16* __restrict__ w,
                                     bf16* out, int rows, int H, float eps, RowLayout layout) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= rows) return;  // whole warps leave together
  const int64_t off = layout.offset(row, H);
  bf16* res = residual ? residual + row * H : nullptr;
  norm_row<kChunks>(x + off, res, w, out + off, H, eps, threadIdx.x & 31, 32,
                    [](float v) { return detail::warp_sum(v); });
}

// Any H, any alignment: one CTA per row, two passes (the second re-reads what the first wrote).
__global__ void rms_norm_scalar_kernel(const bf16* x, bf16* residual, const bf16* __restrict__ w,
                                       bf16* out, int H, float eps, RowLayout layout) {
  __shared__ float scratch[32];
  const int64_t off = layout.offset(blockIdx.x, H);
  bf16* res = residual ? residual + static_cast<int64_t>(blockIdx.x) * H : nullptr;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < H; i += blockDim.x) {
    float r = __bfloat162float(x[off + i]);
    if (res) {
      const bf16 rb = __float2bfloat16(r + __bfloat162float(res[i]));
      res[i] = rb;
      r = __bfloat162float(rb);
    }
    ss += r * r;
  }
  const float inv = rsqrtf(detail::block_sum(ss, scratch) / static_cast<float>(H) + eps);
  for (int i = threadIdx.x; i < H; i += blockDim.x) {
    const float r = __bfloat162float(res ? res[i] : x[off + i]);
    out[off + i] = __float2bfloat16(r * inv * __bfloat162float(w[i]));
  }
}

Status launch(const bf16* x, bf16* residual, const bf16* w, int rows, int H, float eps, bf16* out,
              RowLayout layout, bool aligned, cudaStream_t stream) {
  if (rows == 0) return Status();
  const int chunks = H / 8;
  if (H % 8 != 0 || !aligned) {
    rms_norm_scalar_kernel<<<rows, 256, 0, stream>>>(x, residual, w, out, H, eps, layout);
  } else if (chunks <= 32 * 4) {  // a warp per row
    constexpr int kWarps = 4;
    const unsigned grid = detail::ceil_div(rows, kWarps);
    if (chunks <= 32)
      rms_norm_warp_kernel<1>
          <<<grid, 32 * kWarps, 0, stream>>>(x, residual, w, out, rows, H, eps, layout);
    else
      rms_norm_warp_kernel<4>
          <<<grid, 32 * kWarps, 0, stream>>>(x, residual, w, out, rows, H, eps, layout);
  } else {
    // Two chunks (32 bytes of x) a thread up to H = 8192, four up to 16384, then the scalar path.
    const int threads2 = (chunks + 1) / 2;
    if (threads2 <= kMaxBlock) {
      const int threads = (threads2 + 31) / 32 * 32;
      rms_norm_block_kernel<2><<<rows, threads, 0, stream>>>(x, residual, w, out, H, eps, layout);
    } else if (chunks <= 4 * kMaxBlock) {
      const int threads = ((chunks + 3) / 4 + 31) / 32 * 32;
      rms_norm_block_kernel<4><<<rows, threads, 0, stream>>>(x, residual, w, out, H, eps, layout);
    } else {
      rms_norm_scalar_kernel<<<rows, 1024, 0, stream>>>(x, residual, w, out, H, eps, layout);
    }
  }
  CEILING_CUDA_RETURN_LAST();
  return Status();
}

}  // namespace

Status rms_norm(const bf16* x, bf16* residual, const bf16* w, int rows, int H, float eps, bf16* out,
                cudaStream_t stream) {
  if (rows < 0 || H <= 0)
    return Status::error("rms_norm: bad shape rows {} H {} (need rows >= 0, H > 0)", rows, H);
  if (!(eps >= 0.0f)) return Status::error("rms_norm: eps {} must be >= 0", eps);
  const bool aligned = detail::aligned16(x) && detail::aligned16(out) && detail::aligned16(w) &&
                       (!residual || detail::aligned16(residual));
  return launch(x, residual, w, rows, H, eps, out, RowLayout{1, H}, aligned, stream);
}

Status rms_norm_heads(bf16* x, int64_t token_stride, int T, int heads, int D, const bf16* w,
                      float eps, cudaStream_t stream) {
  if (T < 0 || heads <= 0 || D <= 0 || token_stride < static_cast<int64_t>(heads) * D)
    return Status::error(
        "rms_norm_heads: bad shape T {} heads {} D {} token_stride {} (need token_stride >= "
        "heads * D)",
        T, heads, D, token_stride);
  if (!(eps >= 0.0f)) return Status::error("rms_norm_heads: eps {} must be >= 0", eps);
  const bool aligned = detail::aligned16(x) && detail::aligned16(w) && token_stride % 8 == 0;
  return launch(x, nullptr, w, T * heads, D, eps, x, RowLayout{heads, token_stride}, aligned,
                stream);
}

}  // namespace ceiling::cuda
