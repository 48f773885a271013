// Causal varlen prefill attention on sm_90a, warp-specialized (FlashAttention-3's structure).
//
// One CTA per (query head, 128-row query tile), three warpgroups:
//  - WG0, the producer (setmaxnreg down to 40 registers): fills 128-key K and V tiles from the
//    paged cache into 128-byte-swizzled shared memory, kStages deep, and signals each on a "full"
//    mbarrier (K and V separately, so S = Q·K^T can start before V lands); it refills a stage once
//    both consumers arrived on its "empty" mbarrier. Consumers never barrier with each other for
//    data. Two producers (template kTma):
//     - cp.async: all 128 threads gather 16-byte chunks, each row's address from the block table;
//       completion by cp.async.mbarrier.arrive. Its issue rate bounds the kernel (run 6 of
//       bench/attention_notes.md: ~330 TFLOP/s, against ~527 with the loads removed).
//     - TMA: per (cache block, 64-column panel) one lane issues one tensor copy
//       (cp.async.bulk.tensor, 128B swizzle = the wgmma layout), the copies dealt round the four
//       producer warps (one per SM sub-partition: at block size 16 a tile takes 32 copies, and
//       one warp's issue loop for all of them shared a scheduler with consumer warps);
//       completion counted in bytes on the full barrier. A tile that ends past the sequence's
//       keys (V rows there may hold stale NaN, and 0·NaN = NaN in P·V) or names a block outside
//       the cache falls back to the zero-filling cp.async gather of all 128 producer threads;
//       that is at most the first (diagonal) tile of a CTA.
//  - WG1, WG2, the consumers (setmaxnreg up to 232): 64 query rows each, Q in shared memory.
//    Per key tile j a consumer issues S_j = Q·K_j^T and O += P_{j-1}·V_{j-1} back to back (two
//    wgmma groups), waits for S_j only, runs the online softmax of tile j while P·V of tile j-1
//    is still on the tensor cores (intra-warpgroup overlap), then waits for P·V, frees the stage
//    and converts P_j to bf16 A fragments. The two consumers take turns issuing their GEMMs
//    (ping-pong on two named barriers), so one's softmax overlaps the other's GEMMs.
// Tiles are walked from the diagonal down (only the first one or two are masked); CTAs start in
// the longest-first order of find_tile. Shared-memory layouts and descriptors: attention_sm90.cuh.
// Every thread waits on the previous kernel (PDL, pdl.cuh) before reading anything.
#include <cuda_bf16.h>

#include "core/check.h"
#include "kernels/cuda/attention_prefill_sm90.h"
#include "kernels/cuda/attention_sm90.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/tma.h"

namespace ceiling::cuda::sm90 {
namespace {

using namespace attn;

constexpr int kBM = kPrefillBlockM, kBN = 128, kThreads = 384;
constexpr int kProducerRegs = 40, kConsumerRegs = 232;  // 128·40 + 256·232 ≤ 65536
constexpr int kBarSched = 1;                            // +consumer index: its turn to issue
constexpr int kBarQ = 3;                                // +consumer index: its Q rows landed

template <int D>
constexpr int ws_stages() {
  return D == 128 ? 3 : 4;
}
template <int D>
constexpr int ws_smem_bytes() {  // alignment slack + Q + stages × (K, V)
  return 1024 + kBM * D * 2 + ws_stages<D>() * 2 * kBN * D * 2;
}

// The K and V caches as 2-D tensors [num_blocks·Hkv·BS rows, D] for TMA, boxes of
// kv_box_rows<BS>() rows × 64 columns (one 128-byte panel row each).
struct KvTensorMaps {
  CUtensorMap k, v;
};
template <int BS>
constexpr int kv_box_rows() {
  return BS < kBN ? BS : kBN;
}

template <int D, int BS, bool kTma>
__global__ void __launch_bounds__(kThreads, 1)
    prefill_ws_kernel(const PrefillParams p, const __grid_constant__ KvTensorMaps maps) {
#ifdef CEILING_WGMMA
  constexpr int kStages = ws_stages<D>();
  constexpr int kChunks = D / 8;
  constexpr int kTileBytes = kBN * D * 2;
  extern __shared__ uint8_t smem_raw[];
  __shared__ QTile sh_tile;
  // Per stage: K landed, V landed, stage free. (Freeing K and V apart, with K loaded a tile ahead
  // of V as the consumers use them, measured 3–5 % slower: run 10 of bench/attention_notes.md.)
  __shared__ __align__(8) uint64_t bars[3 * kStages];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;

  detail::pdl_launch_dependents();
  detail::pdl_wait();
  const uint32_t bar0 = smem_addr(bars);
  auto full_k = [&](int st) { return bar0 + 8u * st; };
  auto full_v = [&](int st) { return bar0 + 8u * (kStages + st); };
  auto empty = [&](int st) { return bar0 + 8u * (2 * kStages + st); };
  if (warp == 0) {
    const QTile found = find_tile<kBM>(p, blockIdx.y);
    if (lane == 0) sh_tile = found;
  } else if (tid == 32) {
    for (int st = 0; st < kStages; ++st) {
      // cp.async: one arrival per producer thread; TMA: one per producer warp (warp 0's carries
      // the tile's expect_tx).
      mbar_init(full_k(st), kTma ? 4 : 128);
      mbar_init(full_v(st), kTma ? 4 : 128);
      mbar_init(empty(st), 256);  // every consumer thread
    }
  }
  __syncthreads();
  const QTile tile = sh_tile;
  if (tile.seq < 0) return;
  const int h = blockIdx.x, kvh = h / p.group, wg = warp / 4;
  const uint32_t sq = (smem_addr(smem_raw) + 1023u) & ~1023u;
  const uint32_t skv = sq + kBM * D * 2;
  const int n_kv = ceil_div(tile.kv_end, kBN);

  if (wg == 0) {  // ---- producer ----
    setmaxnreg_dec<kProducerRegs>();
    // TMA: the producer's four warps (one per SM sub-partition) share the tile's copies, so no
    // scheduler carries all of their issue loop beside its consumer warps.
    // Block-table entries of a key tile: lane j of each producer warp loads entry j of the
    // tile's kTableLanes (one coalesced load per warp, issued a tile ahead), rows get theirs by
    // shuffle. (Loading an entry per row was the bottleneck: a dependent global load before
    // every 16-byte copy kept the producer latency-bound at ~270 TFLOP/s; with no loads at all
    // the consumers ran at 527.)
    constexpr int kTableLanes = kBN / BS > 1 ? kBN / BS : 1;
    const int32_t* table = p.block_tables + static_cast<int64_t>(tile.seq) * p.max_blocks;
    auto load_pages = [&](int n) {
      const int b = n * kBN / BS + lane;
      return lane < kTableLanes && n >= 0 && b * BS < tile.kv_end ? __ldg(table + b) : -1;
    };
    // Key tile n into a stage's K or V buffer by cp.async, thread t of kN: 16-byte chunk t % 16
    // (D = 128) of rows t / 16, + kN / 16, ...; rows past kv_end or in a block outside the cache
    // are zero-filled.
    auto gather = [&]<int kN>(uint32_t dst, const __nv_bfloat16* src, int n, int pages, int t) {
      constexpr int kRowStep = kN / kChunks;
#pragma unroll 4
      for (int r = 0; r < kBN / kRowStep; ++r) {
        const int row = t / kChunks + r * kRowStep, ch = t % kChunks, tok = n * kBN + row;
        const int page = __shfl_sync(0xffffffffu, pages, kBN / BS > 1 ? row / BS : 0);
        const bool ok = tok < tile.kv_end && page >= 0 && page < p.num_blocks;
        const int cache_row = ok ? (page * p.hkv + kvh) * BS + tok % BS : 0;
        cp_async16(dst + sw128(kBN, row, ch), src + static_cast<int64_t>(cache_row) * D + ch * 8,
                   ok);
      }
    };
    if (kTma && tid == 0) {
      prefetch_tensor_map(&maps.k);
      prefetch_tensor_map(&maps.v);
    }
    int pages = load_pages(n_kv - 1);
    for (int it = 0; it < n_kv; ++it) {
      const int n = n_kv - 1 - it, st = it % kStages;
      const int pages_next = load_pages(n - 1);
      if (it >= kStages) mbar_wait(empty(st), ((it / kStages) + 1) & 1);
      const uint32_t ks = skv + st * 2 * kTileBytes, vs = ks + kTileBytes;
      // K first (S = Q·K^T can start on it), then V.
      if constexpr (kTma) {
        constexpr int kRows = kv_box_rows<BS>(), kPanels = D / 64;
        const bool bad =
            __any_sync(0xffffffffu, lane < kTableLanes && (pages < 0 || pages >= p.num_blocks));
        if ((n + 1) * kBN <= tile.kv_end && !bad) {
          // Copy i = b·kPanels + c (rows [b·kRows, +kRows) of the tile, columns [64c, +64)) is
          // lane i / 4 of warp i % 4. Warp 0's arrival expects the whole tile's bytes; copies
          // that land before it leave the phase waiting for it (and the other warps' arrivals).
          constexpr int kCopies = (kBN / kRows) * kPanels;
          const int i = lane * 4 + warp, box = i / kPanels, panel = i % kPanels;
          const int page = __shfl_sync(0xffffffffu, pages, kBN / BS > 1 ? box % 32 : 0);
          const int y = (page * p.hkv + kvh) * BS + (BS > kBN ? (n * kBN) % BS : 0);
          const uint32_t off = panel * kBN * 128 + box * kRows * 128;
          const bool issues = i < kCopies;
          auto arrive = [&](uint32_t bar) {
            if (i == 0) mbar_arrive_expect_tx(bar, kTileBytes);
            if (lane == 0 && warp != 0) mbar_arrive(bar);
            __syncwarp();
          };
          arrive(full_k(st));
          if (issues) tma_load_2d(ks + off, &maps.k, panel * 64, y, full_k(st));
          arrive(full_v(st));
          if (issues) tma_load_2d(vs + off, &maps.v, panel * 64, y, full_v(st));
        } else {
          auto finish = [&](uint32_t bar) {  // the warp's copies landed: one arrival
            cp_async_commit();
            cp_async_wait<0>();
            fence_proxy_async();
            __syncwarp();
            if (lane == 0) mbar_arrive(bar);
          };
          gather.template operator()<128>(ks, p.k, n, pages, tid);
          finish(full_k(st));
          gather.template operator()<128>(vs, p.v, n, pages, tid);
          finish(full_v(st));
        }
      } else {
        // Row addresses are recomputed for V (cheap: shuffles and integer math) rather than kept
        // in the producer's 40 registers.
        gather.template operator()<128>(ks, p.k, n, pages, tid);
        cp_async_mbar_arrive(full_k(st));
        gather.template operator()<128>(vs, p.v, n, pages, tid);
        cp_async_mbar_arrive(full_v(st));
      }
      pages = pages_next;
    }
    cp_async_commit();  // wait_group tracks committed groups only
    cp_async_wait<0>();
    return;
  }

  // ---- consumers ----
  setmaxnreg_inc<kConsumerRegs>();
  const int cw = wg - 1, wq = warp % 4, g = lane / 4, t = lane % 4, ctid = tid % 128;
  for (int c = ctid; c < 64 * kChunks; c += 128) {
    const int row = cw * 64 + c / kChunks, ch = c % kChunks, i = tile.i0 + row;
    const bool ok = i < tile.q_len;
    const __nv_bfloat16* src =
        p.q + static_cast<int64_t>(tile.q0 + (ok ? i : 0)) * p.q_stride + h * D + ch * 8;
    cp_async16(sq + sw128(kBM, row, ch), src, ok);
  }
  cp_async_commit();
  cp_async_wait<0>();
  fence_proxy_async();
  named_sync(kBarQ + cw, 128);
  // Ping-pong: GEMM phases alternate c0, c1, c0, c1, ...; each consumer has n_kv + 1 phases.
  // Consumer 1 opens consumer 0's first turn and skips its own last hand-over (nobody waits).
  if (cw == 1) named_arrive(kBarSched + 0, 256);

  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
  float s[kBN / 2];
#pragma unroll
  for (int i = 0; i < kBN / 2; ++i) s[i] = 0.0f;  // overwritten (scale-d 0); keeps it defined
  uint32_t pa[kBN / 16][4];
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f, a0 = 1.0f, a1 = 1.0f;
  const int warp_pos = tile.first_pos() + cw * 64 + wq * 16;
  const int lim0 = min(warp_pos + g, tile.len - 1), lim1 = min(warp_pos + g + 8, tile.len - 1);
  const uint32_t q_base = sq + cw * 64 * 128;  // this consumer's 64 rows in each panel

  auto issue_s = [&](int st) {
    const uint32_t ks = skv + st * 2 * kTileBytes;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint32_t koff = (kk % 4) * 32;  // k16 step inside a 128-byte row
      wgmma_ss_n128(s, desc(q_base + (kk / 4) * kBM * 128 + koff, 16, 1024),
                    desc(ks + (kk / 4) * kBN * 128 + koff, 16, 1024), kk > 0);
    }
    wgmma_commit();
  };
  auto issue_pv = [&](int st) {
    const uint32_t vs = skv + st * 2 * kTileBytes + kTileBytes;
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
  };
  // Online softmax of key tile n on s (in place, fp32, log2 domain): new m, l, and the factor
  // (a0, a1) that O must be scaled by before P·V of this tile is added.
  auto softmax = [&](int n) {
    const bool masked = n * kBN + kBN - 1 > warp_pos;
    online_softmax_tile<kBN>([&](int j, int e) -> float& { return s[4 * j + e]; }, p.scale_log2,
                             masked, n* kBN, lim0, lim1, m0, m1, l0, l1, a0, a1);
  };
  auto rescale_o = [&] {
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      o[4 * j] *= a0, o[4 * j + 1] *= a0, o[4 * j + 2] *= a1, o[4 * j + 3] *= a1;
    }
  };
  auto my_turn = [&] { named_sync(kBarSched + cw, 256); };
  auto hand_over = [&] { named_arrive(kBarSched + (cw ^ 1), 256); };

  // Phase 0: S of the diagonal tile.
  mbar_wait(full_k(0), 0);
  fence_proxy_async();
  my_turn();
  issue_s(0);
  hand_over();
  wgmma_wait<0>();
  fence_regs(s);
  softmax(n_kv - 1);
  pack_p<kBN>(s, pa);
  // Phases 1 .. n_kv - 1: S of tile it with P·V of tile it - 1.
  for (int it = 1; it < n_kv; ++it) {
    const int st = it % kStages, pst = (it - 1) % kStages;
    mbar_wait(full_k(st), (it / kStages) & 1);
    mbar_wait(full_v(pst), ((it - 1) / kStages) & 1);
    fence_proxy_async();
    rescale_o();
    my_turn();
    issue_s(st);
    issue_pv(pst);
    hand_over();
    wgmma_wait<1>();
    fence_regs(s);
    softmax(n_kv - 1 - it);
    wgmma_wait<0>();
    fence_regs(o);
    fence_regs(s);
    mbar_arrive(empty(pst));
    pack_p<kBN>(s, pa);
  }
  // Phase n_kv: P·V of the last tile.
  const int lst = (n_kv - 1) % kStages;
  mbar_wait(full_v(lst), ((n_kv - 1) / kStages) & 1);
  fence_proxy_async();
  rescale_o();
  my_turn();
  issue_pv(lst);
  if (cw == 0) hand_over();
  wgmma_wait<0>();
  fence_regs(o);
  mbar_arrive(empty(lst));

  const int row0 = tile.i0 + cw * 64 + wq * 16 + g, row1 = row0 + 8;
  store_o_rows<D>(o, l0, l1, p.out + (static_cast<int64_t>(tile.q0 + row0) * p.hq + h) * D,
                  row0 < tile.q_len, p.out + (static_cast<int64_t>(tile.q0 + row1) * p.hq + h) * D,
                  row1 < tile.q_len, t);
#else
  __trap();  // built without sm_90a: prefill_wgmma_available() is false
#endif
}

}  // namespace

bool prefill_tma_available(const char** why) {
  if (tensor_map_encoder() != nullptr) return true;
  if (why) *why = "the driver has no cuTensorMapEncodeTiled";
  return false;
}

Status run_prefill_wgmma_ws(const PrefillParams& p, int head_dim, int block_size, int hq,
                            int tile_slots, bool tma, cudaStream_t stream) {
  return dispatch_head_block(head_dim, block_size, [&]<int D, int BS>() -> Status {
    constexpr int smem = ws_smem_bytes<D>();
    KvTensorMaps maps{};
    if (tma) {
      const int64_t rows = static_cast<int64_t>(p.num_blocks) * p.hkv * BS;
      if (rows > INT32_MAX)  // the kernel's row coordinates are int
        return Status::error("prefill attention: a cache of {} rows exceeds the TMA kernel's {}",
                             rows, INT32_MAX);
      if (!prefill_tma_available(nullptr))
        return Status::error("prefill attention: TMA unavailable (no cuTensorMapEncodeTiled)");
      CEILING_RETURN_IF_ERROR(encode_bf16_map(p.k, rows, D, D, kv_box_rows<BS>(), &maps.k,
                                              "prefill attention K cache"));
      CEILING_RETURN_IF_ERROR(encode_bf16_map(p.v, rows, D, D, kv_box_rows<BS>(), &maps.v,
                                              "prefill attention V cache"));
    }
    auto* kern = tma ? prefill_ws_kernel<D, BS, true> : prefill_ws_kernel<D, BS, false>;
    CEILING_CUDA_RETURN(
        cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CEILING_CUDA_RETURN(
        detail::launch_pdl(kern, dim3(hq, tile_slots), dim3(kThreads), smem, stream, p, maps));
    return Status::ok_status();
  });
}

}  // namespace ceiling::cuda::sm90
