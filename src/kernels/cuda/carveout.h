// How a kernel that reads an operand through L1 asks for its SM's unified L1 / shared memory
// split: as little shared memory as still holds as many of its CTAs as its registers allow, the
// rest L1.
//
// Why (H200, bench/lowprec_notes.md r164–r169): with no preference — CUDA's default — the driver
// keeps an SM's split across launches unless a kernel needs more shared memory, so a kernel that
// follows one with large rings runs with that kernel's small L1. The tensor-core GEMV
// (gemv_mma.cuh) reads x through L1: each lane's 16-byte x loads feed its mma fragments, ~3/4 of
// them hitting lines its own earlier loads brought (ncu r72). After gemm_int4's 3 × 68 KB rings
// the int4 down projection at batch 16 took 29.6 µs instead of 19.8, and with the split forced to
// the largest shared memory every GEMV at batch 16 ran ~40 % slower. Asking for the least shared
// memory took that back: int4 decode at batch 16 −7.5 %, 12 −5 %, 8 −2.5 %, 4 −1.5 %; fp8 at 16
// −1 to −1.4 %, at 8 and 1 a tie. The register GEMV (one row at the engine's shapes, x ≤ 16 KB)
// gained nothing and does not ask. Asking for no shared memory at all (the plain
// "prefer L1") cost the GEMVs half their resident CTAs and was slower still.
#pragma once

#include <cuda_runtime_api.h>

#include <vector>

namespace ceiling::cuda {

// Sets `kernel`'s preferred shared-memory carveout on the current device to its resident CTAs of
// `threads` (cudaOccupancyMaxActiveBlocksPerMultiprocessor, no dynamic shared memory) times its
// static shared memory plus the 1 KB the SM reserves per CTA. Done once per kernel and device
// (later calls only look it up); the first error is returned and not cached.
cudaError_t prefer_l1_at_full_occupancy(const void* kernel, int threads);

// What prefer_l1_at_full_occupancy has set so far: kernel, device, percent (for tests).
struct CarveoutRequest {
  const void* kernel;
  int device, percent;
};
std::vector<CarveoutRequest> carveout_requests();

}  // namespace ceiling::cuda
