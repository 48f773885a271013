// RMSNorm (+ the residual add) kernels and their dispatch; the meaning is in rms_norm.h.
//
// Long rows at prefill sizes (T = 4096, H = 4096, residual, H200), prediction and measurement:
//   Bytes: x and residual read, residual and out written: 134 MB, half of it writes. At the
//   measured read ceiling (4.55–4.65 TB/s) 29 µs; a device-to-device copy (also half writes) runs
//   at ~94 % of it, so ~31.4 µs is the practical floor; the target (85 % of read) is 34.7 µs.
//   Little's law: 4.55 TB/s × ~1 µs loaded latency = 4.5 MB in flight, ~35 KB of reads per SM.
//   rms_norm_block_kernel (dispatched): a CTA a row (256 threads × 2 chunks of x and of residual
//   = 16 KB of reads), 56 registers, 4 CTAs per SM: ≤ 64 KB per SM. 37.0–38.1 µs, 76–80 % over
//   four runs on three machines (read ceilings 4.53–4.65 TB/s).
//   Tried for the target, each a benchmark comparison (rms_norm_residual_cfg), in the same runs:
//   - stream (rms_norm_stream_kernel): a grid of one wave, each CTA walking rows grid apart with
//     the next row's loads issued before the current row's reduction. Predicted 2–3× Little and
//     33–34 µs (86–89 %); measured 38.2–39.1 µs. A two-deep register pipeline keeps ~one row per
//     CTA in flight on average (the next row's loads wait out the current row's), not two.
//   - stream_half: the same at half the grid (~32 KB per SM): 46 µs, 63–65 %; rms_norm without a
//     residual (8 KB a CTA, ~32 KB per SM) is also at 63–66 %. Below ~64 KB per SM the bytes in
//     flight do limit it.
//   - row_smem (rms_norm_staged_kernel): the row staged in shared memory by cp.async, ≤ 32
//     registers, 8 CTAs per SM: 128 KB per SM, 3.6× Little. Predicted ~34 µs; measured 37.1–37.6
//     µs, within ±1.5 % of the dispatched kernel: past ~64 KB per SM more bytes in flight do not
//     help. Evict-first (.cs) loads and/or stores measured 1–5 % slower.
//   So past ~64 KB per SM the gap to the ~31.4 µs copy floor is not the bytes in flight: ~2.8 µs
//   is the fixed cost of a chained kernel (ramp and tail; silu_mul's fit over T shows it), and
//   ~3 µs is unexplained, with DRAM at ~74 % of its 4.8 TB/s datasheet rate (presumably the mix
//   of two read and two write streams, one of them in place; not profiled further). The target
//   (≥ 85 %) is not met.
#include <algorithm>
#include <atomic>

#include "core/check.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/pdl.cuh"
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

// kRows rows of H = 8·chunks elements held in registers, each spread over `lanes` threads
// (chunks lane, lane + lanes, ...; kChunks per thread, packed). id[r] < 0: no such row (the
// thread still takes part in the reduction).
template <int kChunks, int kRows>
struct RowRegs {
  detail::Bf16x8 x[kRows][kChunks], r[kRows][kChunks];
  int64_t id[kRows];
};

// Issues every load of x (and residual) of the rows; nothing waits on them here.
template <int kChunks, int kRows>
__device__ __forceinline__ void load_rows(RowRegs<kChunks, kRows>& v, const bf16* x,
                                          const bf16* residual, int H, RowLayout layout, int lane,
                                          int lanes) {
  const int chunks = H / 8;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t off = layout.offset(v.id[r], H);
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      const int c = lane + j * lanes;
      if (v.id[r] >= 0 && c < chunks) {
        v.x[r][j] = detail::load8(x + off + c * 8);
        if (residual) v.r[r][j] = detail::load8(residual + v.id[r] * H + c * 8);
      }
    }
  }
}

// The rest of the rows loaded by load_rows: r = bf16(x + residual) stored back to residual,
// sum(ss) reduces the kRows partial sums of r² over the lanes, then out = r · rsqrt(mean(r²) +
// eps) · w, with w's chunk j (chunk index c) from w_chunk(j, c).
template <int kChunks, int kRows, typename SumFn, typename WFn>
__device__ __forceinline__ void finish_rows(RowRegs<kChunks, kRows>& v, bf16* residual, WFn w_chunk,
                                            bf16* out, int H, float eps, RowLayout layout, int lane,
                                            int lanes, SumFn sum) {
  const int chunks = H / 8;
  float ss[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    ss[r] = 0.0f;
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      const int c = lane + j * lanes;
      if (v.id[r] >= 0 && c < chunks) {
        float a[8];
        detail::to_float8(v.x[r][j], a);
        if (residual) {
          float b[8];
          detail::to_float8(v.r[r][j], b);
#pragma unroll
          for (int e = 0; e < 8; ++e) a[e] += b[e];
          v.x[r][j] = detail::from_float8(a);  // normalize exactly what the residual stream holds
          detail::store8(residual + v.id[r] * H + c * 8, v.x[r][j]);
          detail::to_float8(v.x[r][j], a);
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
    const int64_t off = layout.offset(v.id[r], H);
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      const int c = lane + j * lanes;
      if (v.id[r] >= 0 && c < chunks) {
        float a[8], wf[8];
        detail::to_float8(v.x[r][j], a);
        detail::to_float8(w_chunk(j, c), wf);
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

// Sums each ss[r] over the CTA (blockDim.x a multiple of 32) through scratch[kRows][32], with
// one barrier: a kernel that reduces again must alternate between two scratch buffers (a
// thread writes the next buffer only after the barrier that every reader of this one reached
// after reading it).
template <int kRows>
__device__ __forceinline__ void cta_sum(float (&ss)[kRows], float (*scratch)[32]) {
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

// One row per CTA (long rows), at most kMaxBlock threads.
constexpr int kMaxBlock = 512;
template <int kChunks>
__global__ void __launch_bounds__(kMaxBlock)
    rms_norm_block_kernel(const bf16* x, bf16* residual, const bf16* __restrict__ w, bf16* out,
                          int rows, int H, float eps, RowLayout layout) {
  __shared__ float scratch[1][32];  // written once per launch
  detail::pdl_launch_dependents();
  detail::Bf16x8 wv[kChunks];
  load_weights<kChunks>(w, H, threadIdx.x, blockDim.x, wv);
  detail::pdl_wait();
  RowRegs<kChunks, 1> v;
  v.id[0] = blockIdx.x < rows ? static_cast<int64_t>(blockIdx.x) : -1;
  load_rows(v, x, residual, H, layout, threadIdx.x, blockDim.x);
  finish_rows(
      v, residual, [&](int j, int) { return wv[j]; }, out, H, eps, layout, threadIdx.x, blockDim.x,
      [&](float(&ss)[1]) { cta_sum<1>(ss, scratch); });
}

__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  const auto d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
}

// Long rows, a comparison kernel (as fast as rms_norm_block_kernel at T = 4096: the file comment):
// one row per CTA
// with the row's x and residual chunks staged in shared memory by cp.async
// (each thread reads back only its own slots) and w read after the reduction, so that a thread
// holds one chunk at a time: ≤ 32 registers, twice the CTAs (and bytes in flight) per SM of
// rms_norm_block_kernel. The same arithmetic in the same order.
constexpr int kStagedThreadsPerSm = 2048;  // ≤ 32 registers a thread
template <int kChunks>
__global__ void __launch_bounds__(kMaxBlock, kStagedThreadsPerSm / kMaxBlock)
    rms_norm_staged_kernel(const bf16* x, bf16* residual, const bf16* __restrict__ w, bf16* out,
                           int rows, int H, float eps, RowLayout layout) {
  extern __shared__ uint4 stage[];  // x [kChunks][blockDim], then residual [kChunks][blockDim]
  __shared__ float scratch[1][32];  // written once per launch
  detail::pdl_launch_dependents();
  detail::pdl_wait();
  const int chunks = H / 8;
  const int64_t row = blockIdx.x, off = layout.offset(row, H);
  uint4* xs = stage + threadIdx.x;
  uint4* rs = stage + kChunks * blockDim.x + threadIdx.x;
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    const int c = threadIdx.x + j * blockDim.x;
    if (c < chunks) {
      cp_async16(xs + j * blockDim.x, x + off + c * 8);
      if (residual) cp_async16(rs + j * blockDim.x, residual + row * H + c * 8);
    }
  }
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
  float ss[1] = {0.0f};
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    const int c = threadIdx.x + j * blockDim.x;
    if (c < chunks) {
      detail::Bf16x8 xv = detail::as_bf16x8(xs[j * blockDim.x]);
      float a[8];
      detail::to_float8(xv, a);
      if (residual) {
        float b[8];
        detail::to_float8(detail::as_bf16x8(rs[j * blockDim.x]), b);
#pragma unroll
        for (int e = 0; e < 8; ++e) a[e] += b[e];
        xv = detail::from_float8(a);  // normalize exactly what the residual stream holds
        detail::store8(residual + row * H + c * 8, xv);
        xs[j * blockDim.x] = detail::as_uint4(xv);
        detail::to_float8(xv, a);
      }
#pragma unroll
      for (int e = 0; e < 8; ++e) ss[0] += a[e] * a[e];
    }
  }
  cta_sum<1>(ss, scratch);
  const float inv = rsqrtf(ss[0] / static_cast<float>(H) + eps);
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    const int c = threadIdx.x + j * blockDim.x;
    if (c < chunks) {
      float a[8], wf[8];
      detail::to_float8(detail::as_bf16x8(xs[j * blockDim.x]), a);
      detail::to_float8(detail::load8(w + c * 8), wf);
#pragma unroll
      for (int e = 0; e < 8; ++e) a[e] *= inv * wf[e];
      detail::store8(out + off + c * 8, detail::from_float8(a));
    }
  }
}

// Long rows, a comparison kernel (measured no faster: the file comment): a grid of at most one
// wave (kStreamThreadsPerSm / blockDim.x CTAs per SM, which the register cap guarantees), CTA b
// takes rows b, b + gridDim.x, ... in two register sets a and b that alternate: the loads of
// the next row are issued before the current row's reduction. The grid has at most `rows`
// CTAs. Rows alternate between the two halves of scratch (one barrier per row). Row i of x and
// out starts at i·row_stride (a layout with one row per group: no division in the addressing,
// which keeps the kernel within its 64 registers).
constexpr int kStreamThreadsPerSm = 1024;  // ≤ 64 registers a thread
template <int kChunks>
__global__ void __launch_bounds__(kMaxBlock, kStreamThreadsPerSm / kMaxBlock)
    rms_norm_stream_kernel(const bf16* x, bf16* residual, const bf16* __restrict__ w, bf16* out,
                           int rows, int H, float eps, int64_t row_stride) {
  __shared__ float scratch[2][32];
  const RowLayout layout{1, row_stride};
  detail::pdl_launch_dependents();
  detail::pdl_wait();
  // w is read after each row's reduction (L1 hits after the first row: every CTA of the SM reads
  // the same H elements) rather than held in registers across both rows.
  const auto w_chunk = [&](int, int c) { return detail::load8(w + c * 8); };
  const int64_t stride = gridDim.x;
  const auto next = [&](int64_t row) { return row + stride < rows ? row + stride : -1; };
  RowRegs<kChunks, 1> a, b;
  a.id[0] = blockIdx.x;
  load_rows(a, x, residual, H, layout, threadIdx.x, blockDim.x);
  for (;;) {  // the row ids are uniform across the CTA: every thread reaches every barrier
    b.id[0] = next(a.id[0]);
    load_rows(b, x, residual, H, layout, threadIdx.x, blockDim.x);
    finish_rows(a, residual, w_chunk, out, H, eps, layout, threadIdx.x, blockDim.x,
                [&](float(&ss)[1]) { cta_sum<1>(ss, scratch); });
    if (b.id[0] < 0) break;
    a.id[0] = next(b.id[0]);
    load_rows(a, x, residual, H, layout, threadIdx.x, blockDim.x);
    finish_rows(b, residual, w_chunk, out, H, eps, layout, threadIdx.x, blockDim.x,
                [&](float(&ss)[1]) { cta_sum<1>(ss, scratch + 1); });
    if (a.id[0] < 0) break;
  }
}

// Groups of G lanes (a power of two ≤ 32) per row, kRows rows per group (H ≤ 8·G·kChunks);
// a CTA of blockDim/G groups covers blockDim/G·kRows consecutive rows, row r of group g at
// r·groups + g (so the groups of a warp read neighbouring rows together). Every load of every
// row is issued before the first reduction.
template <int kChunks, int G, int kRows>
__global__ void rms_norm_group_kernel(const bf16* x, bf16* residual, const bf16* __restrict__ w,
                                      bf16* out, int rows, int H, float eps, RowLayout layout) {
  detail::pdl_launch_dependents();
  const int lane = threadIdx.x % G, g = threadIdx.x / G, groups = blockDim.x / G;
  detail::Bf16x8 wv[kChunks];
  load_weights<kChunks>(w, H, lane, G, wv);
  detail::pdl_wait();
  RowRegs<kChunks, kRows> v;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t row = static_cast<int64_t>(blockIdx.x) * groups * kRows + r * groups + g;
    v.id[r] = row < rows ? row : -1;
  }
  load_rows(v, x, residual, H, layout, lane, G);
  const auto w_chunk = [&](int j, int) { return wv[j]; };
  finish_rows(v, residual, w_chunk, out, H, eps, layout, lane, G, [](float(&ss)[kRows]) {
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int o = G / 2; o > 0; o >>= 1) ss[r] += __shfl_xor_sync(0xffffffffu, ss[r], o);
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

// Multiprocessors of the current device (cached per device; sizes the stream kernel's grid).
int sm_count() {
  static std::atomic<int> cached[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) dev = 0;
  int n = cached[dev].load(std::memory_order_relaxed);
  if (n == 0) {
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0)
      n = 1;
    cached[dev].store(n, std::memory_order_relaxed);
  }
  return n;
}

// Long rows on the 16-byte path up to H = 8192: two chunks (32 bytes of x) a thread.
constexpr int kLongRowsMaxChunks = 2 * kMaxBlock;

bool long_rows_supported(int H, bool aligned) {
  return aligned && H % 8 == 0 && H / 8 > 128 && H / 8 <= kLongRowsMaxChunks;
}

// CTAs of the stream kernel that are resident at once (its grid).
int64_t stream_wave(int threads) {
  return static_cast<int64_t>(sm_count()) * std::max(1, kStreamThreadsPerSm / threads);
}

// The long-row kernels (block.x threads, two chunks each); the stream kernels need
// layout.per_group == 1 (rms_norm_heads' layouts take the block kernel).
cudaError_t launch_long(RmsNormLongRows k, const bf16* x, bf16* residual, const bf16* w, int rows,
                        int H, float eps, bf16* out, RowLayout layout, cudaStream_t stream) {
  const dim3 block(((H / 8 + 1) / 2 + 31) / 32 * 32);
  if (k == RmsNormLongRows::kRowStaged)
    return detail::launch_pdl(rms_norm_staged_kernel<2>, dim3(rows), block,
                              size_t{2 * 2 * 16} * block.x, stream, x, residual, w, out, rows, H,
                              eps, layout);
  if (k == RmsNormLongRows::kRowPerCta || layout.per_group != 1)
    return detail::launch_pdl(rms_norm_block_kernel<2>, dim3(rows), block, 0, stream, x, residual,
                              w, out, rows, H, eps, layout);
  int64_t ctas = stream_wave(static_cast<int>(block.x));
  if (k == RmsNormLongRows::kStreamHalfGrid) ctas = std::max<int64_t>(1, ctas / 2);
  return detail::launch_pdl(rms_norm_stream_kernel<2>, dim3(std::min<int64_t>(rows, ctas)), block,
                            0, stream, x, residual, w, out, rows, H, eps, layout.group_stride);
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
  // Up to H = 8192: a CTA a row, two chunks (32 bytes of x) a thread, at every row count (the
  // other long-row kernels measured no faster at T = 4096: see the file comment).
  if (chunks <= kLongRowsMaxChunks)
    return launch_long(RmsNormLongRows::kRowPerCta, x, residual, w, rows, H, eps, out, layout,
                       stream);
  // Up to H = 16384: a CTA a row, four chunks a thread; then the scalar path.
  if (chunks <= 4 * kMaxBlock) {
    const dim3 block(((chunks + 3) / 4 + 31) / 32 * 32);
    return detail::launch_pdl(rms_norm_block_kernel<4>, dim3(rows), block, 0, stream, x, residual,
                              w, out, rows, H, eps, layout);
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

const char* rms_norm_long_rows_name(RmsNormLongRows k) {
  switch (k) {
    case RmsNormLongRows::kStream:
      return "stream";
    case RmsNormLongRows::kStreamHalfGrid:
      return "stream_half";
    case RmsNormLongRows::kRowPerCta:
      return "row";
    case RmsNormLongRows::kRowStaged:
      return "row_smem";
  }
  return "?";
}

Status rms_norm_long_rows(RmsNormLongRows k, const bf16* x, bf16* residual, const bf16* w, int rows,
                          int H, float eps, bf16* out, cudaStream_t stream) {
  if (rows < 0 || H <= 0 || !(eps >= 0.0f))
    return Status::error("rms_norm_long_rows: bad shape rows {} H {} or eps {}", rows, H, eps);
  const bool aligned = detail::aligned16(x) && detail::aligned16(out) && detail::aligned16(w) &&
                       (!residual || detail::aligned16(residual));
  if (!long_rows_supported(H, aligned))
    return Status::error(
        "rms_norm_long_rows: H {} not supported (need H % 8 == 0, 1024 < H <= 8192 and 16-byte "
        "aligned pointers)",
        H);
  if (rows == 0) return Status();
  CEILING_CUDA_RETURN(launch_long(k, x, residual, w, rows, H, eps, out, RowLayout{1, H}, stream));
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
