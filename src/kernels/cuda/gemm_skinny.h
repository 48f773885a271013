// The decode-batch linear layer on sm_90a: out [M, N] (+)= x [M, K] · W[N, K]^T (+ bias [N]) for
// 1 ≤ M ≤ 64 (meaning: cpu::linear), bf16 operands and output, fp32 accumulation — a skinny GEMM
// for the rows between the GEMV (gemv.h, M ≤ 16) and cuBLASLt's large-M tiles.
//
// Status: a measured comparison, not on the engine's path. On an H200 (r64,
// bench/engine_notes.md) it ties cuBLASLt on the long 8B projections (gate/up, down) and takes
// 1.1–1.5× cuBLASLt's time on the short ones (QKV, o, the 1B's); a batch-64 decode step through
// it took 6.89 ms against cuBLASLt's 6.11 (r63). `ceiling bench kernels` times it beside cuBLASLt
// (linear_skinny, linear_skinny_cfg) so the comparison stays on record; the lead it was built
// for — fused epilogues (SiLU, RoPE + KV write) at M > 16 — starts from it.
//
// Why its own kernel: at M = 16…64 the step is still a weight stream (64 FLOP per weight byte at
// M = 64, a third of the H100's ridge), but cuBLASLt's tiles leave the small-N projections at
// 67–74 % of the read ceiling (bench/engine_notes.md, r52) and its kernels do not take PDL, so
// every one starts its weight stream only after its predecessor ended. Here one 64-row x tile
// covers every token, each CTA streams a 128·wide-row slice of W through a kStages-deep TMA ring
// (weights are loaded before the PDL wait: they overlap the previous kernel's tail), one wgmma
// warpgroup per 128 rows, and K is split over CTAs until the grid fills the SMs once — the
// splits of a tile one thread-block cluster that sums its partial tiles through distributed
// shared memory, in split order (deterministic; no global scratch).
//
// No state: skinny_gemm() encodes the TMA descriptors on the host and launches (capture-safe).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <string>

#include "core/status.h"

namespace ceiling::cuda {

inline constexpr int kSkinnyMaxM = 64;
inline constexpr int kSkinnyMaxSplits = 8;  // a tile's splits are one (portable-size) cluster

// A launch configuration; 0 fields: skinny_default_config's choice. wide: consumer warpgroups per
// CTA (1 or 2: a CTA's W slice is 128 or 256 rows); splits: CTAs sharing one slice's K (1…8).
// (Two 64-column panels a stage, and two CTAs an SM on 100 KB rings, were built and measured in
// r60–r63: no faster; bench/engine_notes.md.)
struct SkinnyConfig {
  int wide = 0;
  int splits = 0;
};
std::string skinny_config_name(const SkinnyConfig& c);  // e.g. "w1s4"

// Whether this process can run the kernel: an sm_90a device image on a compute capability 9.0
// device, and the driver's TMA descriptor encoder. why (if given) says what is missing.
bool skinny_gemm_available(const char** why = nullptr);
// The shapes it takes: 1 ≤ M ≤ kSkinnyMaxM, K % 64 == 0, N % 8 == 0 (pointers 16-byte aligned).
bool skinny_gemm_supported(int M, int N, int K);
// How many clusters of `splits` CTAs of the kernel with `wide` warpgroups the device holds at once
// (cudaOccupancyMaxActiveClusters: a cluster must fit in one GPC), active[wide − 1][splits − 1]; 0
// = unknown or unavailable.
struct SkinnyOccupancy {
  int active[2][kSkinnyMaxSplits] = {};
};
// The current device's (probed once per device).
SkinnyOccupancy skinny_occupancy();
// Measured (r60, H200): one CTA an SM streams about 84 GB/s, so ~54 busy SMs saturate a
// 4.5 TB/s read ceiling; CTAs beyond that share the bandwidth rather than add to it.
inline constexpr int kSkinnySaturatingSms = 54;
// The fixed time of a wave (ramp-up, reduction, epilogue), in the time one SM takes for a 16 KB
// block of W at 84 GB/s: ~3 µs, from r60's split sweep (8 splits of the 8B gate/up, 15 waves of
// clusters, took 50 µs more than one wave of 112 CTAs streaming the same bytes).
inline constexpr int kSkinnyWaveBlocks = 15;
// The (wide, splits) with the least modeled time: per wave of clusters (from
// occ), the 64-column blocks of a CTA × how far the wave's CTAs exceed kSkinnySaturatingSms, plus
// kSkinnyWaveBlocks. Near ties go to fewer splits, then to one warpgroup.
SkinnyConfig skinny_default_config(int N, int K, const SkinnyOccupancy& occ);
// splits limited to 1…kSkinnyMaxSplits, at least 4 k-blocks each where K has them, and reduced to
// the count of non-empty splits.
SkinnyConfig skinny_clamp(SkinnyConfig c, int K);
// The configuration a launch on the current device uses: cfg's non-zero fields over
// skinny_default_config's, skinny_clamp'ed.
SkinnyConfig skinny_resolve(int N, int K, const SkinnyConfig& cfg);

// accumulate: out = out + x · W^T (+ bias), in place, rounded once. bias may be null. Launched with
// PDL (pdl.cuh); errors name an unsupported shape or an unbuilt configuration.
Status skinny_gemm(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* bias,
                   __nv_bfloat16* out, int M, int N, int K, cudaStream_t stream,
                   bool accumulate = false, const SkinnyConfig& cfg = {});

}  // namespace ceiling::cuda
