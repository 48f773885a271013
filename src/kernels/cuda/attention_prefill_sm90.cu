// Causal varlen prefill attention on sm_90a, FlashAttention-3 style: warpgroup MMA (wgmma).
//
// One CTA per (query head, 128-row query tile); two warpgroups, each owning 64 query rows.
// K/V tiles of 128 keys are gathered from the paged cache with 16-byte cp.async (all 256 threads)
// into 128-byte-swizzled shared memory, three stages deep. Per key tile, each warpgroup issues
// S = Q·K^T as D/16 wgmma m64n128k16 with both operands in shared memory (K-major), runs the
// online softmax on the accumulator registers (fp32, log2 domain), converts P to bf16 A-fragments
// in registers and issues O += P·V as 8 wgmma with V read N-major (transposed) from shared memory.
// Tiles are walked from the diagonal down, so only the first one or two are masked.
// Shared-memory layouts and descriptors: attention_sm90.cuh. Launched with PDL (pdl.cuh): every
// thread waits on the previous kernel before reading anything.
//
// Also here: prefill_wgmma_available(), which both wgmma kernels share.
#include <cuda_bf16.h>

#include <optional>

#include "core/check.h"
#include "core/once_map.h"
#include "kernels/cuda/attention_prefill_sm90.h"
#include "kernels/cuda/attention_sm90.cuh"
#include "kernels/cuda/pdl.cuh"

namespace ceiling::cuda::sm90 {
namespace {

using namespace attn;

constexpr int kBM = kPrefillBlockM, kBN = 128, kThreads = 256, kStages = 3;

template <int D>
constexpr int wgmma_smem_bytes() {
  return 1024 + kBM * D * 2 + kStages * 2 * kBN * D * 2;  // alignment slack + Q + stages × (K, V)
}

// Accumulator fragment of m64nN (per warp: rows 16w..16w+15): element 4j+e of n8 tile j is
// row g + 8·(e / 2), column 8j + 2t + (e % 2), as for mma.sync m16n8.
template <int D, int BS>
__global__ void __launch_bounds__(kThreads, 1) prefill_wgmma_kernel(const PrefillParams p) {
#ifdef CEILING_WGMMA
  constexpr int kChunks = D / 8;
  constexpr int kTileBytes = kBN * D * 2;
  extern __shared__ uint8_t smem_raw[];
  __shared__ QTile sh_tile;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int wg = warp / 4, wq = warp % 4;

  detail::pdl_launch_dependents();
  detail::pdl_wait();
  if (warp == 0) {
    const QTile found = find_tile<kBM>(p, blockIdx.y);
    if (lane == 0) sh_tile = found;
  }
  __syncthreads();
  const QTile tile = sh_tile;
  if (tile.seq < 0) return;
  const int h = blockIdx.x, kvh = h / p.group;
  const uint32_t sq = (smem_addr(smem_raw) + 1023u) & ~1023u;
  const uint32_t skv = sq + kBM * D * 2;

  for (int c = tid; c < kBM * kChunks; c += kThreads) {
    const int row = c / kChunks, ch = c % kChunks, i = tile.i0 + row;
    const bool ok = i < tile.q_len;
    const __nv_bfloat16* src =
        p.q + static_cast<int64_t>(tile.q0 + (ok ? i : 0)) * p.q_stride + h * D + ch * 8;
    cp_async16(sq + sw128(kBM, row, ch), src, ok);
  }
  cp_async_commit();

  const int32_t* table = p.block_tables + static_cast<int64_t>(tile.seq) * p.max_blocks;
  auto load_kv = [&](int n, int stage) {
    const uint32_t ks = skv + stage * 2 * kTileBytes, vs = ks + kTileBytes;
    for (int c = tid; c < kBN * kChunks; c += kThreads) {
      const int row = c / kChunks, ch = c % kChunks, tok = n * kBN + row;
      int page = tok < tile.kv_end ? table[tok / BS] : -1;
      const bool ok = page >= 0 && page < p.num_blocks;
      page = ok ? page : 0;
      const int64_t off = ((static_cast<int64_t>(page) * p.hkv + kvh) * BS + tok % BS) * D + ch * 8;
      const uint32_t o = sw128(kBN, row, ch);
      cp_async16(ks + o, p.k + off, ok);
      cp_async16(vs + o, p.v + off, ok);
    }
  };

  // Three stages: tiles it and it+1 are in flight while tile it is consumed, and one barrier
  // per tile both publishes tile it and retires the stage tile it-1 used.
  const int n_kv = ceil_div(tile.kv_end, kBN);
  if (n_kv > 0) load_kv(n_kv - 1, 0);
  cp_async_commit();
  if (n_kv > 1) load_kv(n_kv - 2, 1);
  cp_async_commit();

  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
  const int warp_pos = tile.first_pos() + wg * 64 + wq * 16;
  const int lim0 = min(warp_pos + g, tile.len - 1), lim1 = min(warp_pos + g + 8, tile.len - 1);
  const uint32_t q_base = sq + wg * 64 * 128;  // this warpgroup's 64 rows in each panel

  for (int it = 0; it < n_kv; ++it) {
    const int n = n_kv - 1 - it, st = it % kStages;
    cp_async_wait<1>();
    fence_proxy_async();
    __syncthreads();
    if (it + 2 < n_kv) load_kv(n - 2, (it + 2) % kStages);
    cp_async_commit();
    const uint32_t ks = skv + st * 2 * kTileBytes, vs = ks + kTileBytes;

    float s[kBN / 2];
#pragma unroll
    for (int i = 0; i < kBN / 2; ++i) s[i] = 0.0f;  // overwritten (scale-d 0); keeps it defined
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint32_t koff = (kk % 4) * 32;  // k16 step inside a 128-byte row
      wgmma_ss_n128(s, desc(q_base + (kk / 4) * kBM * 128 + koff, 16, 1024),
                    desc(ks + (kk / 4) * kBN * 128 + koff, 16, 1024), kk > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();

    const bool masked = n * kBN + kBN - 1 > warp_pos;
    float a0, a1;
    online_softmax_tile<kBN>([&](int j, int e) -> float& { return s[4 * j + e]; }, p.scale_log2,
                             masked, n* kBN, lim0, lim1, m0, m1, l0, l1, a0, a1);
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      o[4 * j] *= a0, o[4 * j + 1] *= a0, o[4 * j + 2] *= a1, o[4 * j + 3] *= a1;
    }

    uint32_t pa[kBN / 16][4];  // P as bf16 A fragments, built before the fence
    pack_p<kBN>(s, pa);
    wgmma_fence();
#pragma unroll
    for (int kt = 0; kt < kBN / 16; ++kt) {
      const uint64_t dv = desc(vs + kt * 16 * 128, kBN * 128, 1024);
      if constexpr (D == 128)
        wgmma_rs_n128_tb(o, pa[kt], dv, 1);
      else
        wgmma_rs_n64_tb(o, pa[kt], dv, 1);
    }
    wgmma_commit();
    wgmma_wait<0>();
  }
  cp_async_wait<0>();

  const int row0 = tile.i0 + wg * 64 + wq * 16 + g, row1 = row0 + 8;
  store_o_rows<D>(o, l0, l1, p.out + (static_cast<int64_t>(tile.q0 + row0) * p.hq + h) * D,
                  row0 < tile.q_len, p.out + (static_cast<int64_t>(tile.q0 + row1) * p.hq + h) * D,
                  row1 < tile.q_len, t);
#else
  __trap();  // built without sm_90a: prefill_wgmma_available() is false
#endif
}

// Never launched: its static shared memory is kMarkerSmemBytes only in a device pass compiled
// with the sm_90a features (CEILING_WGMMA), so cudaFuncGetAttributes tells a host whether the
// image it would run has the wgmma kernels. (CEILING_WGMMA exists only in device passes; the
// device image's binaryVersion alone cannot tell compute_90 from compute_90a.)
constexpr int kMarkerSmemBytes = 1008;
__global__ void wgmma_build_marker(int* sink) {
#ifdef CEILING_WGMMA
  __shared__ int probe[kMarkerSmemBytes / 4];
  probe[threadIdx.x % (kMarkerSmemBytes / 4)] = static_cast<int>(threadIdx.x);
  __syncthreads();
  if (sink) sink[threadIdx.x] = probe[(threadIdx.x + 1) % (kMarkerSmemBytes / 4)];
#else
  (void)sink;
#endif
}

}  // namespace

bool prefill_wgmma_available(int head_dim, const char** why) {
  static const char* const kWhy[] = {
      nullptr,
      "head_dim is not 64 or 128",
      "no CUDA device",
      "the device is not compute capability 9.0",
      "cudaFuncGetAttributes failed on the wgmma marker kernel",
      "the device image was built without sm_90a features (configure with "
      "CMAKE_CUDA_ARCHITECTURES=90a)"};
  auto answer = [&](int code) {
    if (why) *why = kWhy[code];
    return code == 0;
  };
  if (head_dim != 64 && head_dim != 128) return answer(1);
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return answer(2);
  }
  // Probed once per device (plan_* may be called per step).
  static OnceMap<int, int> cache;
  return answer(*cache.get(dev, [dev] {
    int code = 0, major = 0, minor = 0;
    cudaFuncAttributes attr{};
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
      code = 2;
    } else if (major != 9 || minor != 0) {
      code = 3;
    } else if (cudaFuncGetAttributes(&attr, wgmma_build_marker) != cudaSuccess) {
      code = 4;
    } else if (attr.sharedSizeBytes < static_cast<size_t>(kMarkerSmemBytes)) {
      code = 5;
    }
    if (code != 0) cudaGetLastError();
    return std::optional<int>(code);
  }));
}

Status run_prefill_wgmma(const PrefillParams& p, int head_dim, int block_size, int hq,
                         int tile_slots, cudaStream_t stream) {
  return dispatch_head_block(head_dim, block_size, [&]<int D, int BS>() -> Status {
    constexpr int smem = wgmma_smem_bytes<D>();
    auto* kern = prefill_wgmma_kernel<D, BS>;
    CEILING_CUDA_RETURN(
        cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CEILING_CUDA_RETURN(
        detail::launch_pdl(kern, dim3(hq, tile_slots), dim3(kThreads), smem, stream, p));
    return Status::ok_status();
  });
}

}  // namespace ceiling::cuda::sm90
