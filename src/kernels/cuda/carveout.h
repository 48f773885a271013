// How a kernel that reads an operand through L1 asks for its SM's unified L1 / shared memory
// split: as little shared memory as still holds as many of its CTAs as its registers allow, the
// rest L1.
//
// Why (H200, bench/lowprec_notes.md r164–r165): with no preference — CUDA's default — the driver
// keeps an SM's split across launches unless a kernel needs more shared memory, so a kernel that
// follows one with large rings runs with that kernel's small L1. The GEMVs at 9–16 tokens read x
// through L1 (each lane's 16-byte x loads feed two token tiles; ~3/4 of them hit L1 lines its own
// earlier loads brought, ncu r72): after gemm_int4's 3 × 68 KB rings the int4 down projection at
// batch 16 took 29.6 µs instead of 19.8, and every GEMV ran ~40 % slower with the split forced to
// the largest shared memory. Asking for the least shared memory took that back; asking for it at
// one token tile (batch ≤ 8, where x is small) gained nothing. Asking for no shared memory at all
// (the plain "prefer L1") cost the GEMVs half their resident CTAs and was slower still.
#pragma once

#include <cuda_runtime_api.h>

namespace ceiling::cuda {

// Sets `kernel`'s preferred shared-memory carveout on the current device to its resident CTAs of
// `threads` (cudaOccupancyMaxActiveBlocksPerMultiprocessor, no dynamic shared memory) times its
// static shared memory plus the 1 KB the SM reserves per CTA. Done once per kernel and device
// (later calls only look it up); the first error is returned and not cached.
cudaError_t prefer_l1_at_full_occupancy(const void* kernel, int threads);

}  // namespace ceiling::cuda
