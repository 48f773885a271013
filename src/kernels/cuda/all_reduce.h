// One-shot all-reduce over NVLink peer-to-peer memory, for the small messages of decode (a few KB
// to a few hundred KB), in the spirit of vLLM's custom all-reduce, written as a push: every rank
// stores its input into its own slot of every rank's receive buffer (remote NVLink stores, which
// post without waiting, unlike remote loads), raises one flag per peer, waits for the peers'
// flags in its own memory, and sums the N slots of its own buffer locally in rank order (fp32
// accumulation: every rank gets the same bits). Small messages skip the flags: their data travel
// in LL words that carry the call's epoch (kOneShotLLMaxBytes). The receive buffers are
// double-buffered by the call's parity, so no second barrier is needed: a rank reaches call e only
// after every peer has raised its flag for call e-1, i.e. finished reading call e-2's half. One
// kernel per rank, no host involvement: graph-capturable (epochs are counted on the device).
//
// Memory (allocated by the caller, dist/nccl_communicator.cpp): per rank, a receive buffer of
// one_shot_stage_bytes(max_bytes, world) and a flag array of kOneShotFlagWords words on its GPU,
// both zeroed, reachable from every peer (cudaDeviceEnablePeerAccess); a counter array of
// kOneShotMaxBlocks words, zeroed.
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
// Messages up to this size (a multiple of 8 bytes) take the flag-free LL kernel (all_reduce.cu).
inline constexpr int64_t kOneShotLLMaxBytes = 64 * 1024;

struct OneShotPeers {
  void* stage[kOneShotMaxRanks] = {};      // rank q's receive buffer [2][world][max_bytes] (GPU q)
  uint32_t* flags[kOneShotMaxRanks] = {};  // rank q's flags (on GPU q)
  int64_t slot_bytes = 0;                  // max_bytes: one rank's slot in a receive buffer
};

// Bytes of one rank's receive buffer for messages up to max_bytes: two halves of world slots of
// max_bytes for the flag path, then two halves of world slots of LL words (2 · kOneShotLLMaxBytes)
// for the LL path (separate, so that no LL reader can take a flag-path message for its words).
inline size_t one_shot_stage_bytes(size_t max_bytes, int world) {
  return 2 * static_cast<size_t>(world) * (max_bytes + 2 * kOneShotLLMaxBytes);
}

// x [n] (f32 or bf16, on this rank's GPU) <- Σ over the `world` ranks, in place. `counters` is
// this rank's [kOneShotMaxBlocks] epoch counters. n · dtype bytes must fit peers.slot_bytes.
Status one_shot_all_reduce(void* x, DType dtype, int64_t n, int rank, int world,
                           const OneShotPeers& peers, uint32_t* counters, cudaStream_t stream);

}  // namespace ceiling::cuda
