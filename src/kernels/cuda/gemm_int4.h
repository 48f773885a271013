// The linear layer with int4 weights past the GEMV (M > 16: serving batches and prefill chunks),
// and gate/up with SiLU at small decode batches (kGemmInt4SiluMaxM):
// out [M, N] = x [M, K] · Wᵀ (+ bias) (+ out), W in gemv_quant.h's device layout, read as it is
// (no bf16 image), bf16 activations, fp32 accumulation. Before it, every such call dequantized the
// whole weight to bf16 and ran cuBLASLt (gemv_quant.h dequantize_weights): 4.5 bytes moved per
// weight instead of 0.5 + the groups. The meaning is QuantLinear's (model/weights.h), as the GEMV:
//   W[n, k] = (q[n, k] − zero[n, k/G]) · scale[n, k/G]
// with (q − zero) exact in bf16 on the tensor cores and the group scale applied in fp32 to each
// 128-wide k tile's partial sums (so the products round no more than the GEMV's).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/cuda/gemv_quant.h"

namespace ceiling::cuda {

// A CTA's tile: `rows` of W (N) × `tokens` of x (M), in warps of 32 rows × 32 tokens (8 or 16
// in the one-warp-wide tiles for decode batches ≤ 16), repeated over `slices` k slices (their sums
// added at the end); k in tiles of 128 through a `stages`-deep cp.async ring in shared memory, each
// stage one k tile per slice.
struct GemmInt4Config {
  int rows = 128;   // 32, 64 or 128
  int tokens = 64;  // 8, 16, 32 or 64
  int slices = 1;   // 1, 2, 4 or 8
  int stages = 4;   // 3 or 4
};
std::string gemm_int4_config_name(const GemmInt4Config& c);  // "n128m64k1s4"
// Every configuration built (for the benchmark's sweep).
std::vector<GemmInt4Config> gemm_int4_configs();
// The configuration gemm_int4 runs at (M, N) on a device of `sms` SMs.
GemmInt4Config gemm_int4_default_config(int M, int N, int sms);

// Rows up to which the engine (CudaOps::linear) runs int4 projections past the GEMV through
// gemm_int4; above, the dequantize + cuBLASLt path. r78/r79 (H200, the 8B's projections): gemm_int4
// faster on all four at 32, 64 and 128 rows (per layer 3.6×, 2.6×, 1.5×), the dequantizing path
// faster on three of four at 256 and on all at 2048 (2.6–3.6×): this kernel's mma.sync at ~200
// TFLOP/s against cuBLASLt's wgmma once the image's cost is amortized.
inline constexpr int kGemmInt4MaxM = 128;

// Rows up to which CudaOps runs int4 gate/up as gemm_int4 with the SiLU-pairs epilogue after a
// separate RMSNorm, instead of the GEMV with both fused: every decode batch the GEMV takes (≤ 16).
// Alone: 27.1 + 2.3 µs against 33.6 at M = 1, 27.4 against 30.4 at 4 (r85, H200, the 8B); in the
// decode step (r89–r90): batch 1 2.287 ms against 2.414, batch 8 2.714 against 2.857. Batches
// 9–16 kept the GEMV until r165 (bench/lowprec_notes.md): gemm_int4 won its own slot there too
// (29.8 against 42.0 µs), but the down GEMV after it lost as much (29.6 against 19.8) — it ran in
// the small L1 that gemm_int4's rings left on the SM, until the tensor-core GEMV asked for its own
// split (carveout.h). With that, batch 16 took 3.147 / 3.141 ms a step against 3.400 /
// 3.406 (replay, A/B in one start).
inline constexpr int kGemmInt4SiluMaxM = 16;

// Why `w` cannot run gemm_int4 at (N, K), or "": int4 weights, K a multiple of 128, the group
// size a multiple of 128 (one group per k tile; smaller groups keep the dequantize + GEMM path),
// the pointers set and 16-byte aligned.
std::string gemm_int4_unsupported(const GemvWeights& w, int N, int K);

// out [M, N] (bf16) = x [M, K] · Wᵀ (+ bias [N]) (+ out when `accumulate`); M ≥ 1, x 16-byte
// aligned. `silu_pairs` (W = [gate; up], N even, no accumulation): out [M, N/2] =
// silu(bf16(gate)) · bf16(up), silu_mul's values, without writing gate / up. Launched with PDL
// (pdl.cuh): graph- and stream-safe.
Status gemm_int4(const __nv_bfloat16* x, const GemvWeights& w, const __nv_bfloat16* bias,
                 __nv_bfloat16* out, int M, int N, int K, bool accumulate, cudaStream_t stream,
                 bool silu_pairs = false);
Status gemm_int4_with_config(const GemmInt4Config& cfg, const __nv_bfloat16* x,
                             const GemvWeights& w, const __nv_bfloat16* bias, __nv_bfloat16* out,
                             int M, int N, int K, bool accumulate, cudaStream_t stream,
                             bool silu_pairs = false);

}  // namespace ceiling::cuda
