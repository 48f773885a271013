// The skinny GEMM of gemm_skinny.h on sm_90a: TMA loads, one wgmma warpgroup per 128 weight rows,
// split-K reduced through distributed shared memory.
//
// CTA (tile, split): W rows [tile·BN, +BN) × k-blocks [split·kb_per_split, +kb_per_split) of 64
// columns. Threads: `wide` consumer warpgroups, then one producer warp.
//  - The producer's lane 0 fills a kStages-deep ring (200 KB): per k-block one TMA box of W (BN
//    rows × 64) and one of x (64 rows × 64; rows ≥ M read as zeros), both 128-byte swizzled (the
//    wgmma layout, attention_sm90.cuh), completion counted in bytes on the stage's "full"
//    mbarrier. The first kStages weight boxes are issued before the PDL wait (no kernel of the
//    step writes weights).
//  - Consumer warpgroup c: per k-block four wgmma m64n128k16 (A = the x tile, B = W rows
//    [128c, +128) of the slice, both K-major), one commit group; once group i is issued it waits
//    for group i − 1 and frees that stage on its "empty" mbarrier.
//  - Epilogue, accumulator rows g and g + 8 of each warp's 16 (wgmma's D layout): one split writes
//    bf16 out directly (+ bias, + out's old values when accumulating: both loaded before the main
//    loop). Several splits of a tile run as one thread-block cluster: each CTA parks its fp32
//    accumulators in its own (now idle) ring, the cluster synchronizes, and CTA rank r sums column
//    groups j ≡ r (mod splits) over the cluster's shared memories in rank order — deterministic,
//    no global scratch — and writes them.
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "core/check.h"
#include "core/once_map.h"
#include "kernels/cuda/attention_prefill_sm90.h"
#include "kernels/cuda/attention_sm90.cuh"
#include "kernels/cuda/gemm_skinny.h"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/tma.h"

namespace ceiling::cuda {
namespace {

namespace cg = cooperative_groups;
using bf16 = __nv_bfloat16;
using attn::smem_addr;

constexpr int kBM = 64;  // x rows: every token of the batch
constexpr int kBK = 64;  // a k-block: one 128-byte row of a swizzled panel
constexpr int kRingBytes = 200 * 1024;

template <int kWide>
struct Shape {
  static constexpr int kBN = 128 * kWide;
  static constexpr int kConsumers = 128 * kWide;
  static constexpr int kThreads = kConsumers + 32;
  static constexpr int kWBytes = kBN * 128, kXBytes = kBM * 128;
  static constexpr int kStageBytes = kWBytes + kXBytes;
  static constexpr int kStages = kRingBytes / kStageBytes;
  static constexpr int kSmem = 1024 + kStages * kStageBytes + 2 * kStages * 8;
  static_assert(kStages >= 2, "a ring of at least two stages");
  static_assert(16 * kConsumers * 16 <= kStages * kStageBytes, "the reduction fits the ring");
};

struct SkinnyParams {
  const bf16* bias;  // [N] or null
  bf16* out;         // [M, N]
  int M, N;
  int kb_total, kb_per_split, splits;  // splits > 1: a cluster of `splits` CTAs along y
  bool accumulate;
};

template <int kWide>
__global__ void __launch_bounds__(Shape<kWide>::kThreads, 1)
    skinny_gemm_kernel(const __grid_constant__ CUtensorMap wmap,
                       const __grid_constant__ CUtensorMap xmap, const SkinnyParams p) {
#ifdef CEILING_WGMMA
  using namespace sm90;
  using S = Shape<kWide>;
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const uint32_t ring = (smem_addr(smem_raw) + 1023u) & ~1023u;
  const uint32_t bars = ring + S::kStages * S::kStageBytes;
  auto full = [&](int st) { return bars + 8u * st; };
  auto empty = [&](int st) { return bars + 8u * (S::kStages + st); };
  auto w_tile = [&](int st) { return ring + st * S::kStageBytes; };
  auto x_tile = [&](int st) { return ring + st * S::kStageBytes + S::kWBytes; };
  const int tile = blockIdx.x, split = blockIdx.y;
  const int kb0 = split * p.kb_per_split, nkb = min(p.kb_per_split, p.kb_total - kb0);
  const int n0 = tile * S::kBN;
  if (tid == 0) {
    for (int st = 0; st < S::kStages; ++st) {
      mbar_init(full(st), 1);               // the producer's expect_tx arrival
      mbar_init(empty(st), S::kConsumers);  // every consumer thread
    }
  }
  __syncthreads();
  detail::pdl_launch_dependents();

  if (tid >= S::kConsumers) {  // ---- producer warp ----
    if (lane == 0) {
      prefetch_tensor_map(&wmap);
      prefetch_tensor_map(&xmap);
      auto load = [&](int i, bool w, bool x) {
        const int st = i % S::kStages, k = (kb0 + i) * kBK;
        if (w) tma_load_2d(w_tile(st), &wmap, k, n0, full(st));
        if (x) tma_load_2d(x_tile(st), &xmap, k, 0, full(st));
      };
      const int pre = min(nkb, S::kStages);
      for (int i = 0; i < pre; ++i) {
        mbar_arrive_expect_tx(full(i), S::kStageBytes);
        load(i, true, false);
      }
      detail::pdl_wait();
      for (int i = 0; i < pre; ++i) load(i, false, true);
      for (int i = pre; i < nkb; ++i) {
        const int st = i % S::kStages;
        mbar_wait(empty(st), ((i / S::kStages) + 1) & 1);
        mbar_arrive_expect_tx(full(st), S::kStageBytes);
        load(i, true, true);
      }
    } else {
      detail::pdl_wait();
    }
    if (p.splits > 1) {  // the cluster barriers of the reduction count every thread
      cg::this_cluster().sync();
      cg::this_cluster().sync();
    }
    return;
  }

  // ---- consumers ----
  detail::pdl_wait();
  const int wg = tid / 128, g = lane / 4, t = lane % 4;
  // Column group j (8 columns) of this thread: rows r0 = 16·(warp % 4) + g and r1 = r0 + 8,
  // columns col(j), +1 — one float4 (r0's pair, r1's pair). The groups this CTA writes: all, or
  // with split K those with j ≡ split (mod splits).
  const int r0 = (warp % 4) * 16 + g, r1 = r0 + 8;
  auto col = [&](int j) { return n0 + wg * 128 + 8 * j + 2 * t; };
  auto owns = [&](int j) { return col(j) < p.N && (p.splits == 1 || j % p.splits == split); };
  // What the stores add (bias; out's old values when accumulating) in the groups this CTA
  // writes, loaded before the main loop so their latency hides behind it and the epilogue is
  // stores only. Kept apart from the accumulators: a load defining an accumulator register would
  // make ptxas serialize the wgmmas (C7515).
  float add[64];
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (owns(j)) {  // N % 8 == 0: the pair (n, n + 1) is in or out together
      const int n = col(j);
      if (p.bias) {
        const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p.bias + n));
        a = make_float4(b.x, b.y, b.x, b.y);
      }
      if (p.accumulate) {
        if (r0 < p.M) {
          const float2 o = __bfloat1622float2(
              *reinterpret_cast<const __nv_bfloat162*>(p.out + size_t(r0) * p.N + n));
          a.x += o.x;
          a.y += o.y;
        }
        if (r1 < p.M) {
          const float2 o = __bfloat1622float2(
              *reinterpret_cast<const __nv_bfloat162*>(p.out + size_t(r1) * p.N + n));
          a.z += o.x;
          a.w += o.y;
        }
      }
    }
    add[4 * j] = a.x;
    add[4 * j + 1] = a.y;
    add[4 * j + 2] = a.z;
    add[4 * j + 3] = a.w;
  }
  fence_regs(add);  // loaded here, not sunk to the stores
  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
  for (int i = 0; i < nkb; ++i) {
    const int st = i % S::kStages;
    mbar_wait(full(st), (i / S::kStages) & 1);
    fence_regs(acc);  // no register move of the accumulators inside the wgmma pipeline
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk) {  // a k16 step inside the panel: +32 bytes
      const uint32_t a = x_tile(st) + kk * 32, b = w_tile(st) + wg * 128 * 128 + kk * 32;
      wgmma_ss_n128(acc, desc(a, 16, 1024), desc(b, 16, 1024), 1);
    }
    wgmma_commit();
    fence_regs(acc);
    wgmma_wait<1>();
    if (i > 0) mbar_arrive(empty((i - 1) % S::kStages));
  }
  wgmma_wait<0>();
  fence_regs(acc);

  auto store = [&](int j, float v0, float v1, float v2, float v3) {
    const int n = col(j);
    if (r0 < p.M)
      *reinterpret_cast<__nv_bfloat162*>(p.out + size_t(r0) * p.N + n) =
          __floats2bfloat162_rn(v0, v1);
    if (r1 < p.M)
      *reinterpret_cast<__nv_bfloat162*>(p.out + size_t(r1) * p.N + n) =
          __floats2bfloat162_rn(v2, v3);
  };
  if (p.splits == 1) {
#pragma unroll
    for (int j = 0; j < 16; ++j)
      if (owns(j))
        store(j, acc[4 * j] + add[4 * j], acc[4 * j + 1] + add[4 * j + 1],
              acc[4 * j + 2] + add[4 * j + 2], acc[4 * j + 3] + add[4 * j + 3]);
    return;
  }
  // Split K through the cluster: [16 groups][consumer threads] float4 in each CTA's ring; the
  // owned groups summed into add over the cluster's CTAs in rank order.
  named_sync(1, S::kConsumers);  // every warp's wgmmas have read the ring
  float4* park = reinterpret_cast<float4*>(smem_raw + (ring - smem_addr(smem_raw)));
#pragma unroll
  for (int j = 0; j < 16; ++j)
    park[j * S::kConsumers + tid] =
        make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]);
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
#pragma unroll
  for (int s = 0; s < kSkinnyMaxSplits; ++s) {
    if (s >= p.splits) break;
    const float4* part = cluster.map_shared_rank(park, s);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      if (j % p.splits != split) continue;
      const float4 v = part[j * S::kConsumers + tid];
      add[4 * j] += v.x;
      add[4 * j + 1] += v.y;
      add[4 * j + 2] += v.z;
      add[4 * j + 3] += v.w;
    }
  }
  cluster.sync();  // no CTA leaves while another reads its shared memory
#pragma unroll
  for (int j = 0; j < 16; ++j)
    if (owns(j)) store(j, add[4 * j], add[4 * j + 1], add[4 * j + 2], add[4 * j + 3]);
#else
  (void)wmap;
  (void)xmap;
  (void)p;
  __trap();  // built without sm_90a: skinny_gemm_available() is false
#endif
}

int ceil_div_i(int a, int b) {
  return (a + b - 1) / b;
}

template <int kWide>
Status launch(const CUtensorMap& wmap, const CUtensorMap& xmap, const SkinnyParams& p, int tiles,
              cudaStream_t stream) {
  using S = Shape<kWide>;
  auto* kern = skinny_gemm_kernel<kWide>;
  CEILING_CUDA_RETURN(
      cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmem));
  CEILING_CUDA_RETURN(detail::launch_pdl_cluster(kern, dim3(tiles, p.splits), dim3(S::kThreads),
                                                 S::kSmem, stream, dim3(1, p.splits, 1), wmap, xmap,
                                                 p));
  return Status::ok_status();
}

// Clusters of `splits` CTAs the device holds at once; 0 if it cannot say.
template <int kWide>
int active_clusters(int splits) {
  using S = Shape<kWide>;
  auto* kern = skinny_gemm_kernel<kWide>;
  if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmem) !=
      cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(1, splits);
  cfg.blockDim = dim3(S::kThreads);
  cfg.dynamicSmemBytes = S::kSmem;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 1;
  attr[0].val.clusterDim.y = splits;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, kern, &cfg) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

}  // namespace

std::string skinny_config_name(const SkinnyConfig& c) {
  return fmt::format("w{}s{}", c.wide, c.splits);
}

bool skinny_gemm_available(const char** why) {
  // The wgmma marker probe of the prefill kernels answers for every sm_90a kernel of the image.
  return sm90::prefill_wgmma_available(64, why) && sm90::prefill_tma_available(why);
}

bool skinny_gemm_supported(int M, int N, int K) {
  return M >= 1 && M <= kSkinnyMaxM && N >= 8 && N % 8 == 0 && K >= 64 && K % 64 == 0;
}

SkinnyConfig skinny_clamp(SkinnyConfig c, int K) {
  const int kb_total = ceil_div_i(K, kBK);
  // At most kSkinnyMaxSplits, none empty, each at least 4 k-blocks where K has them.
  c.splits = std::clamp(c.splits, 1, std::min(kSkinnyMaxSplits, std::max(1, kb_total / 4)));
  c.splits = ceil_div_i(kb_total, ceil_div_i(kb_total, c.splits));
  return c;
}

SkinnyConfig skinny_default_config(int N, int K, const SkinnyOccupancy& occ) {
  // Time of (wide, splits), in units of one 128-row × 64-column block streamed by one SM: per
  // wave, the blocks of a CTA, stretched by how far the wave's CTAs exceed the SMs that saturate
  // HBM, plus the wave's fixed cost.
  SkinnyConfig best{1, 1};
  double best_t = 0;
  for (int wide = 1; wide <= 2; ++wide)
    for (int want = 1; want <= kSkinnyMaxSplits; ++want) {
      const SkinnyConfig c = skinny_clamp({wide, want}, K);
      const int active = occ.active[wide - 1][c.splits - 1];
      if (c.splits != want || active <= 0) continue;
      const int tiles = ceil_div_i(N, 128 * wide), kb = ceil_div_i(K, kBK);
      const int waves = ceil_div_i(tiles, active);
      const int ctas = std::min(tiles, active) * c.splits;
      const double t = waves * (double(wide) * ceil_div_i(kb, c.splits) *
                                    std::max(ctas, kSkinnySaturatingSms) / kSkinnySaturatingSms +
                                kSkinnyWaveBlocks);
      if (best_t == 0 || t < best_t * 0.98) {  // near ties: the fewer splits, then one warpgroup
        best = c;
        best_t = t;
      }
    }
  return best;
}

SkinnyOccupancy skinny_occupancy() {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return {};
  }
  // Probed once per device (a query per launch would cost host time on every eager step).
  static OnceMap<int, SkinnyOccupancy> cache;
  return *cache.get(dev, [] {
    SkinnyOccupancy occ{};
    if (skinny_gemm_available()) {
      for (int s = 1; s <= kSkinnyMaxSplits; ++s) {
        occ.active[0][s - 1] = active_clusters<1>(s);
        occ.active[1][s - 1] = active_clusters<2>(s);
      }
    }
    return std::optional<SkinnyOccupancy>(occ);
  });
}

SkinnyConfig skinny_resolve(int N, int K, const SkinnyConfig& cfg) {
  SkinnyConfig d = skinny_default_config(N, K, skinny_occupancy());
  if (cfg.wide != 0) d.wide = cfg.wide;
  if (cfg.splits != 0) d.splits = cfg.splits;
  return skinny_clamp(d, K);
}

Status skinny_gemm(const bf16* x, const bf16* w, const bf16* bias, bf16* out, int M, int N, int K,
                   cudaStream_t stream, bool accumulate, const SkinnyConfig& cfg) {
  if (!skinny_gemm_supported(M, N, K))
    return Status::error(
        "skinny GEMM: M {} N {} K {} unsupported (needs 1 ≤ M ≤ {}, N % 8 == 0, K % 64 == 0)", M, N,
        K, kSkinnyMaxM);
  const SkinnyConfig c = skinny_resolve(N, K, cfg);
  if (c.wide != 1 && c.wide != 2)
    return Status::error("skinny GEMM: configuration {} not built (wide 1 or 2)",
                         skinny_config_name(c));
  const int tiles = ceil_div_i(N, 128 * c.wide), kb_total = K / kBK;
  CUtensorMap wmap{}, xmap{};
  CEILING_RETURN_IF_ERROR(encode_bf16_map(w, N, K, K, 128 * c.wide, &wmap, "skinny GEMM weight"));
  CEILING_RETURN_IF_ERROR(encode_bf16_map(x, M, K, K, kBM, &xmap, "skinny GEMM input"));
  const SkinnyParams p{bias,     out,       M, N, kb_total, ceil_div_i(kb_total, c.splits),
                       c.splits, accumulate};
  return c.wide == 1 ? launch<1>(wmap, xmap, p, tiles, stream)
                     : launch<2>(wmap, xmap, p, tiles, stream);
}

}  // namespace ceiling::cuda
