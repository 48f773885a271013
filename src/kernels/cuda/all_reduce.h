// One-shot all-reduce over NVLink peer-to-peer memory, for the small messages of decode (a few KB
// to a few hundred KB), as vLLM's custom all-reduce does: every rank copies its input into its
// own staging buffer, a flag barrier tells the peers it is there, every rank reads all N staging
// buffers through P2P and sums them in rank order (fp32 accumulation: every rank gets the same
// bits), and a second barrier keeps the staging buffers alive until all have read them. One
// kernel per rank, no host involvement: graph-capturable (epochs are counted on the device).
//
// Memory (allocated by the caller, dist/custom_all_reduce.h): per rank, a staging buffer of
// max_bytes and a flag array of kOneShotFlagWords words on its GPU, both zeroed, reachable from
// every peer (cudaDeviceEnablePeerAccess); a counter array of kOneShotMaxBlocks words, zeroed.
// A peer that never arrives makes the kernel trap after kOneShotTimeoutNs (a sticky CUDA error,
// which the caller reports) instead of spinning forever.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"

namespace ceiling::cuda {

inline constexpr int kOneShotMaxRanks = 8;
inline constexpr int kOneShotMaxBlocks = 32;
inline constexpr int kOneShotFlagWords = kOneShotMaxBlocks * 2 * kOneShotMaxRanks;
inline constexpr uint64_t kOneShotTimeoutNs = 10'000'000'000ull;  // 10 s

struct OneShotPeers {
  void* stage[kOneShotMaxRanks] = {};      // rank q's staging buffer (on GPU q)
  uint32_t* flags[kOneShotMaxRanks] = {};  // rank q's flags (on GPU q)
};

// x [n] (f32 or bf16, on this rank's GPU) <- Σ over the `world` ranks, in place. `counters` is
// this rank's [kOneShotMaxBlocks] epoch counters. n · dtype bytes must fit the staging buffers.
Status one_shot_all_reduce(void* x, DType dtype, int64_t n, int rank, int world,
                           const OneShotPeers& peers, uint32_t* counters, cudaStream_t stream);

}  // namespace ceiling::cuda
