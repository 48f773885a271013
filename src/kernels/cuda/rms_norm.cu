// RMSNorm (+ the residual add) kernels and their dispatch; the meaning is in rms_norm.h.
//
// Long rows at prefill sizes (T = 4096, H = 4096, residual, H200): x and residual read, residual
// and out written, 134 MB (half of it writes): 29 µs at the measured read ceiling; a
// device-to-device copy (also half writes) runs at ~94 % of it, ~31.4 µs. Little's law: 4.55 TB/s
// × ~1 µs loaded latency ≈ 35 KB of reads in flight per SM. The block kernel (a CTA a row, 256
// threads × 2 chunks of x and of residual, 4 CTAs per SM: ≤ 64 KB per SM) measures 76–80 % of
// read. Three alternatives were built and measured in the same run
// (bench/results/2026-11-23r4_h200_kernels.json, rms_norm_residual_cfg; bench/notes.md): a
// one-wave grid with the next row's loads in flight during the current row's reduction (74 %),
// the same at half the grid (63 %), the row staged in shared memory with 8 CTAs per SM (78 %).
// None beat the block kernel, so they were removed: past ~64 KB per SM the bytes in flight are
// not the limit (the fixed ~2.8 µs ramp and tail of a kernel and the mixed read/write streams
// are).
#include "core/check.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/quantize_act.cuh"
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

// kRows rows of H = 8·chunks elements, each spread over `lanes` threads (chunks lane,
// lane + lanes, ...; kChunks per thread, held packed in registers). Every load of every row is
// issued before the first reduction, so a CTA keeps kRows rows of x (and residual) in flight;
// the weights w are loaded by the caller (before the PDL wait: no kernel writes them).
// sum(ss) reduces the kRows partial sums over the lanes. row_ids[r] < 0: no such row (the thread
// still takes part in the reduction).
template <int kChunks, int kRows, typename SumFn>
__device__ __forceinline__ void norm_rows(const bf16* x, bf16* residual,
                                          const detail::Bf16x8 (&wv)[kChunks], bf16* out, int H,
                                          float eps, const int64_t (&row_ids)[kRows],
                                          RowLayout layout, int lane, int lanes, SumFn sum) {
  const int chunks = H / 8;
  detail::Bf16x8 xv[kRows][kChunks], rv[kRows][kChunks];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t off = layout.offset(row_ids[r], H);
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      const int c = lane + j * lanes;
      if (row_ids[r] >= 0 && c < chunks) {
        xv[r][j] = detail::load8(x + off + c * 8);
        if (residual) rv[r][j] = detail::load8(residual + row_ids[r] * H + c * 8);
      }
    }
  }
  float ss[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    ss[r] = 0.0f;
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      const int c = lane + j * lanes;
      if (row_ids[r] >= 0 && c < chunks) {
        float a[8];
        detail::to_float8(xv[r][j], a);
        if (residual) {
          float b[8];
          detail::to_float8(rv[r][j], b);
#pragma unroll
          for (int e = 0; e < 8; ++e) a[e] += b[e];
          xv[r][j] = detail::from_float8(a);  // normalize exactly what the residual stream holds
          detail::store8(residual + row_ids[r] * H + c * 8, xv[r][j]);
          detail::to_float8(xv[r][j], a);
        }
#pragma unroll
        for (int e = 0; e < 8; ++e) ss[r] += a[e] * a[e];
      }
    }
  }
  sum(ss);
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float inv = rsqrtf(ss[r] / static_cast<float>(H) + eps);
    const int64_t off = layout.offset(row_ids[r], H);
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      const int c = lane + j * lanes;
      if (row_ids[r] >= 0 && c < chunks) {
        float a[8], wf[8];
        detail::to_float8(xv[r][j], a);
        detail::to_float8(wv[j], wf);
#pragma unroll
        for (int e = 0; e < 8; ++e) a[e] *= inv * wf[e];
        detail::store8(out + off + c * 8, detail::from_float8(a));
      }
    }
  }
}

template <int kChunks>
__device__ __forceinline__ void load_weights(const bf16* __restrict__ w, int H, int lane, int lanes,
                                             detail::Bf16x8 (&wv)[kChunks]) {
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    const int c = lane + j * lanes;
    if (c < H / 8) wv[j] = detail::load8(w + c * 8);
  }
}

// The CTA-wide sums of kRows partial sums (every thread calls it once per launch: scratch is
// written once).
template <int kRows>
__device__ __forceinline__ void block_sum(float (&ss)[kRows], float (&scratch)[kRows][32]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    ss[r] = detail::warp_sum(ss[r]);
    if (lane == 0) scratch[r][warp] = ss[r];
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < kRows; ++r) ss[r] = detail::warp_sum(lane < warps ? scratch[r][lane] : 0.0f);
}

// kRows consecutive rows per CTA (large H), at most kMaxBlock threads. The block reduction is
// done once for all kRows rows.
constexpr int kMaxBlock = 512;
template <int kChunks, int kRows>
__global__ void __launch_bounds__(kMaxBlock)
    rms_norm_block_kernel(const bf16* x, bf16* residual, const bf16* __restrict__ w, bf16* out,
                          int rows, int H, float eps, RowLayout layout) {
  __shared__ float scratch[kRows][32];
  detail::pdl_launch_dependents();
  detail::Bf16x8 wv[kChunks];
  load_weights<kChunks>(w, H, threadIdx.x, blockDim.x, wv);
  detail::pdl_wait();
  int64_t row_ids[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kRows + r;
    row_ids[r] = row < rows ? row : -1;
  }
  norm_rows<kChunks, kRows>(x, residual, wv, out, H, eps, row_ids, layout, threadIdx.x, blockDim.x,
                            [&](float(&ss)[kRows]) { block_sum<kRows>(ss, scratch); });
}

// rms_norm_fp8: the block kernel's row (one a CTA), then the row it wrote to E4M3 with its own
// scale (quantize_act.cuh): the bf16 output is re-read by the threads that stored it.
template <int kChunks>
__global__ void __launch_bounds__(kMaxBlock)
    rms_norm_fp8_kernel(const bf16* x, const bf16* __restrict__ w, bf16* out,
                        uint8_t* __restrict__ q, float* __restrict__ scale, int H, float eps) {
  __shared__ float scratch[1][32];
  detail::pdl_launch_dependents();
  detail::Bf16x8 wv[kChunks];
  load_weights<kChunks>(w, H, threadIdx.x, blockDim.x, wv);
  detail::pdl_wait();
  const int64_t row = blockIdx.x;
  const int64_t row_ids[1] = {row};
  norm_rows<kChunks, 1>(x, nullptr, wv, out, H, eps, row_ids, RowLayout{1, H}, threadIdx.x,
                        blockDim.x, [&](float(&ss)[1]) { block_sum<1>(ss, scratch); });
  const bf16* orow = out + row * H;
  float amax = 0.0f;
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    const int c = threadIdx.x + j * blockDim.x;
    if (c < H / 8) {
      float f[8];
      detail::to_float8(detail::load8(orow + c * 8), f);
      amax = detail::amax8(f, amax);
    }
  }
  const float inv = detail::row_fp8_inv_scale(amax, scale + row);
  detail::quantize_own_chunks(orow, H / 8, threadIdx.x, blockDim.x, inv, q + row * H);
}

// Groups of G lanes (a power of two ≤ 32) per row, kRows rows per group (H ≤ 8·G·kChunks);
// a CTA of blockDim/G groups covers blockDim/G·kRows consecutive rows, row r of group g at
// r·groups + g (so the groups of a warp read neighbouring rows together).
template <int kChunks, int G, int kRows>
__global__ void rms_norm_group_kernel(const bf16* x, bf16* residual, const bf16* __restrict__ w,
                                      bf16* out, int rows, int H, float eps, RowLayout layout) {
  detail::pdl_launch_dependents();
  const int lane = threadIdx.x % G, g = threadIdx.x / G, groups = blockDim.x / G;
  detail::Bf16x8 wv[kChunks];
  load_weights<kChunks>(w, H, lane, G, wv);
  detail::pdl_wait();
  int64_t row_ids[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t row = static_cast<int64_t>(blockIdx.x) * groups * kRows + r * groups + g;
    row_ids[r] = row < rows ? row : -1;
  }
  norm_rows<kChunks, kRows>(x, residual, wv, out, H, eps, row_ids, layout, lane, G,
                            [](float(&ss)[kRows]) {
#pragma unroll
                              for (int r = 0; r < kRows; ++r)
#pragma unroll
                                for (int o = G / 2; o > 0; o >>= 1)
                                  ss[r] += __shfl_xor_sync(0xffffffffu, ss[r], o);
                            });
}

// Any H, any alignment: one CTA per row, two passes (the second re-reads what the first wrote).
__global__ void rms_norm_scalar_kernel(const bf16* x, bf16* residual, const bf16* __restrict__ w,
                                       bf16* out, int H, float eps, RowLayout layout) {
  __shared__ float scratch[32];
  detail::pdl_launch_dependents();
  detail::pdl_wait();
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

// Short rows (H ≤ 256, e.g. the per-head q/k norm): from this many rows on, each lane group takes
// two rows, all loads issued before the reduction (the grid still fills the GPU many times over).
// Measured with G = 16 lanes a row of D = 128 (both changes together): rms_norm_heads T = 4096,
// 32 heads, 30.4 -> 21.6 µs on the H200.
constexpr int kTwoRowsFrom = 2048;

template <int kChunks, int G, int kRows>
cudaError_t launch_group(const bf16* x, bf16* residual, const bf16* w, int rows, int H, float eps,
                         bf16* out, RowLayout layout, cudaStream_t stream) {
  constexpr int kThreads = 128;
  const unsigned grid = detail::ceil_div(rows, kThreads / G * kRows);
  return detail::launch_pdl(rms_norm_group_kernel<kChunks, G, kRows>, dim3(grid), dim3(kThreads), 0,
                            stream, x, residual, w, out, rows, H, eps, layout);
}

template <int G>
cudaError_t launch_small(const bf16* x, bf16* residual, const bf16* w, int rows, int H, float eps,
                         bf16* out, RowLayout layout, cudaStream_t stream) {
  if (rows >= kTwoRowsFrom)
    return launch_group<1, G, 2>(x, residual, w, rows, H, eps, out, layout, stream);
  return launch_group<1, G, 1>(x, residual, w, rows, H, eps, out, layout, stream);
}

cudaError_t launch(const bf16* x, bf16* residual, const bf16* w, int rows, int H, float eps,
                   bf16* out, RowLayout layout, bool aligned, cudaStream_t stream) {
  const int chunks = H / 8;
  if (H % 8 != 0 || !aligned)
    return detail::launch_pdl(rms_norm_scalar_kernel, dim3(rows), dim3(256), 0, stream, x, residual,
                              w, out, H, eps, layout);
  // Up to 32 chunks: G lanes a row (G = chunks rounded up to a power of two), one chunk a lane.
  if (chunks <= 1) return launch_small<1>(x, residual, w, rows, H, eps, out, layout, stream);
  if (chunks <= 2) return launch_small<2>(x, residual, w, rows, H, eps, out, layout, stream);
  if (chunks <= 4) return launch_small<4>(x, residual, w, rows, H, eps, out, layout, stream);
  if (chunks <= 8) return launch_small<8>(x, residual, w, rows, H, eps, out, layout, stream);
  if (chunks <= 16) return launch_small<16>(x, residual, w, rows, H, eps, out, layout, stream);
  if (chunks <= 32) return launch_small<32>(x, residual, w, rows, H, eps, out, layout, stream);
  if (chunks <= 32 * 4)  // a warp a row, four chunks a lane
    return launch_group<4, 32, 1>(x, residual, w, rows, H, eps, out, layout, stream);
  // A CTA a row: two chunks (32 bytes of x) a thread up to H = 8192, four up to 16384, then the
  // scalar path. Two rows per CTA (rms_norm_block_kernel<2, 2>, every load of both rows before
  // the one reduction) measured slower at T = 4096, H = 4096 on the H200: 38.5 µs against
  // 36.5 µs for the previous one-row-per-CTA kernel in the same run (probably the longer drain of
  // the last wave of larger CTAs; not profiled), so the block kernel takes one row at every size.
  const int threads2 = (chunks + 1) / 2;
  if (threads2 <= kMaxBlock) {
    const dim3 block((threads2 + 31) / 32 * 32);
    return detail::launch_pdl(rms_norm_block_kernel<2, 1>, dim3(rows), block, 0, stream, x,
                              residual, w, out, rows, H, eps, layout);
  }
  if (chunks <= 4 * kMaxBlock) {
    const dim3 block(((chunks + 3) / 4 + 31) / 32 * 32);
    return detail::launch_pdl(rms_norm_block_kernel<4, 1>, dim3(rows), block, 0, stream, x,
                              residual, w, out, rows, H, eps, layout);
  }
  return detail::launch_pdl(rms_norm_scalar_kernel, dim3(rows), dim3(1024), 0, stream, x, residual,
                            w, out, H, eps, layout);
}

}  // namespace

Status rms_norm(const bf16* x, bf16* residual, const bf16* w, int rows, int H, float eps, bf16* out,
                cudaStream_t stream) {
  if (rows < 0 || H <= 0)
    return Status::error("rms_norm: bad shape rows {} H {} (need rows >= 0, H > 0)", rows, H);
  if (!(eps >= 0.0f)) return Status::error("rms_norm: eps {} must be >= 0", eps);
  if (rows == 0) return Status();
  const bool aligned = detail::aligned16(x) && detail::aligned16(out) && detail::aligned16(w) &&
                       (!residual || detail::aligned16(residual));
  CEILING_CUDA_RETURN(launch(x, residual, w, rows, H, eps, out, RowLayout{1, H}, aligned, stream));
  return Status();
}

Status rms_norm_fp8(const bf16* x, const bf16* w, int rows, int H, float eps, bf16* out, uint8_t* q,
                    float* scale, cudaStream_t stream) {
  if (rows < 0 || H < 8 || H % 8 != 0 || H > 8 * 4 * kMaxBlock)
    return Status::error("rms_norm_fp8: H {} must be a multiple of 8 in [8, {}] (rows {})", H,
                         8 * 4 * kMaxBlock, rows);
  if (!(eps >= 0.0f)) return Status::error("rms_norm_fp8: eps {} must be >= 0", eps);
  if (!detail::aligned16(x) || !detail::aligned16(out) || !detail::aligned16(w) ||
      !detail::aligned16(q) || !scale)
    return Status::error("rms_norm_fp8: rows must be 16-byte aligned and scale not null");
  if (rows == 0) return Status();
  const int chunks = H / 8;
  if (chunks <= 2 * kMaxBlock) {
    const dim3 block(((chunks + 1) / 2 + 31) / 32 * 32);
    CEILING_CUDA_RETURN(detail::launch_pdl(rms_norm_fp8_kernel<2>, dim3(rows), block, 0, stream, x,
                                           w, out, q, scale, H, eps));
  } else {
    const dim3 block(((chunks + 3) / 4 + 31) / 32 * 32);
    CEILING_CUDA_RETURN(detail::launch_pdl(rms_norm_fp8_kernel<4>, dim3(rows), block, 0, stream, x,
                                           w, out, q, scale, H, eps));
  }
  return Status();
}

Status rms_norm_heads(bf16* x, int64_t token_stride, int T, int heads, int D, const bf16* w,
                      float eps, cudaStream_t stream) {
  if (T < 0 || heads <= 0 || D <= 0 || token_stride < static_cast<int64_t>(heads) * D)
    return Status::error(
        "rms_norm_heads: bad shape T {} heads {} D {} token_stride {} (need token_stride >= "
        "heads * D)",
        T, heads, D, token_stride);
  if (!(eps >= 0.0f)) return Status::error("rms_norm_heads: eps {} must be >= 0", eps);
  if (T == 0) return Status();
  const bool aligned = detail::aligned16(x) && detail::aligned16(w) && token_stride % 8 == 0;
  CEILING_CUDA_RETURN(
      launch(x, nullptr, w, T * heads, D, eps, x, RowLayout{heads, token_stride}, aligned, stream));
  return Status();
}

}  // namespace ceiling::cuda
