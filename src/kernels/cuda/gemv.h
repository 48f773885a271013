// Decode-shaped linear layer written by ceiling: a GEMV (M = 1, CUDA cores) / skinny GEMM (2 ≤ M ≤
// 16, mma.sync tensor cores) streaming the weights once for all M rows (meaning: cpu::linear).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/status.h"

namespace ceiling::cuda {

inline constexpr int kGemvMaxM = 16;

// out [M, N] = x [M, K] · W[N, K]^T (+ bias [N]); x, W, bias bf16 (W row-major, K contiguous),
// fp32 accumulation, out bf16 or f32 (`out_dtype`). bias may be null. 1 ≤ M ≤ 16.
// Fast path: K % 8 == 0 and x, W 16-byte aligned (otherwise a slow scalar kernel runs).
// Launched with programmatic dependent launch (kernels/cuda/pdl.cuh).
Status gemv(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* bias, void* out,
            DType out_dtype, int M, int N, int K, cudaStream_t stream);

// What the rows of x are for gemv_fused (decode-time fusions of the op before the GEMV).
enum class GemvInput {
  kPlain,    // x [M, K]
  kRmsNorm,  // x [M, K] = residual rows r: the GEMV reads RMSNorm(r) · γ, i.e. out =
             // rsqrt(mean(r²) + eps) · ((r ⊙ γ) · W^T) (rms_norm's math, without its bf16 rounding)
};
// The RoPE + KV-cache write epilogue of a fused QKV projection (rope_kv_write's meaning for one
// decode token per row of x, without q/k norm): W = [Wq; Wk; Wv], N = (Hq + 2·Hkv)·D. Rotated q
// goes to out [M, N] (its k and v columns are left unwritten); rotated k and v go to the paged
// cache [num_blocks, Hkv, block_size, D] at slot_mapping[m] (negative or ≥ num_blocks·block_size:
// skipped). D == 0: off.
struct GemvRope {
  const int32_t* positions = nullptr;     // [M]
  const int32_t* slot_mapping = nullptr;  // [M]
  const float* inv_freq = nullptr;        // [D/2]
  __nv_bfloat16* k_cache = nullptr;
  __nv_bfloat16* v_cache = nullptr;
  int num_blocks = 0, block_size = 0;
  int Hq = 0, Hkv = 0, D = 0;
};
struct GemvFusion {
  GemvInput input = GemvInput::kPlain;
  const __nv_bfloat16* norm_weight = nullptr;  // γ [K], kRmsNorm
  float eps = 0;                               // kRmsNorm
  bool accumulate = false;  // out = bf16(out + bf16(result)): a residual add into out, in place
  // W = [gate; up] (N even): out [M, N/2] = silu(bf16(x·gateᵀ)) · bf16(x·upᵀ), what silu_mul
  // makes of the gate/up projection's output (each CTA takes a gate row and its up row).
  bool silu_pairs = false;
  GemvRope rope;  // RoPE + KV write epilogue (excludes accumulate and silu_pairs)
};
// out [M, N] bf16 (N/2 columns with silu_pairs) = (x as `f.input` says) · W[N, K]^T (+ bias),
// 1 ≤ M ≤ 16, fp32 accumulation, the register kernel under PDL. Needs
// gemv_fused_supported(K, x, W). With f.accumulate, out is read and written (each element by one
// thread); silu_pairs excludes accumulate.
Status gemv_fused(const GemvFusion& f, const __nv_bfloat16* x, const __nv_bfloat16* w,
                  const __nv_bfloat16* bias, __nv_bfloat16* out, int M, int N, int K,
                  cudaStream_t stream);
bool gemv_fused_supported(int K, const void* x, const void* w);
// Why the fusions `f` cannot run on an output of N columns (SiLU pairs, the RoPE epilogue's
// arguments, the RMS-norm input's), or "": the rules gemv_fused and gemv_fused_quant share.
std::string gemv_fusion_unsupported(const GemvFusion& f, int N);
// Whether the RMS-norm input (GemvInput::kRmsNorm) is the faster way to run a norm before an
// M-row GEMV, against rms_norm followed by the plain-input kernel: M = 1 only. Above it the
// tensor-core kernel redoes x·γ (as hi + lo bf16 terms) in every warp. H100, bench r13, 8B
// shapes, M = 4 / 16: the fused QKV 22.4 / 27.2 µs against 19.0 / 21.5 for the plain kernel (+
// ~2.3 for rms_norm at a few rows, r12); gate/up with SiLU 85.1 / 94.6 against 79.6 / 83.4.
inline bool gemv_norm_input_pays(int M) {
  return M <= 1;
}

// CTAs of the fast kernel for a shape (for the roofline's wave model).
int gemv_ctas(int M, int N);

// Benchmark only: the M = 1 kernel with an explicit configuration, so `ceiling bench kernels`
// can compare configurations side by side in one run; gemv() uses the measured best.
//   Register kernel: threads per CTA, weight rows per CTA, 16-byte loads in flight per row and
//   thread. Built: t128 r2 u2 (the default), t128 r2 u4, t256 r2 u2, t128 r4 u2, t64 r2 u2,
//   t64 r4 u2, t64 r8 u1, t32 r8 u1.
//   Tensor-core kernel: warp_tiles 16-row tiles a warp (gemv_mma.cuh kWarpTiles; rows counts
//   all of a CTA's).
struct GemvConfig {
  int threads = 128, rows = 2, unroll = 2, warp_tiles = 1;
};
// "t128r2u4", with warp tiles "t256r32u1w2" (bench shape strings).
std::string gemv_config_name(const GemvConfig& cfg);
// out [1, N] (bf16 or f32) = x [1, K] · W^T (+ bias) with `cfg`; an error names a configuration
// that is not built.
Status gemv_with_config(const GemvConfig& cfg, const __nv_bfloat16* x, const __nv_bfloat16* w,
                        const __nv_bfloat16* bias, void* out, DType out_dtype, int N, int K,
                        cudaStream_t stream);

// Benchmark only: the tensor-core kernel (2 ≤ M ≤ 16; gemv() and gemv_fused() take it for every
// M > 1) with an explicit configuration: threads = 32 · (16-row tiles per CTA) · (k slices), rows
// = 16 · tiles, unroll = 64-wide k chunks per stage and lane. Built: t512 r16 u1, t128 r16 u2,
// t256 r16 u1, t256 r16 u2, t512 r32 u1 (gemv() picks t512r16u1, t512r32u1 or t256r16u1 by N), and
// with 2 tiles a warp t256r32u1w2. bf16 out, plain input.
Status gemv_mma_with_config(const GemvConfig& cfg, const __nv_bfloat16* x, const __nv_bfloat16* w,
                            const __nv_bfloat16* bias, __nv_bfloat16* out, int M, int N, int K,
                            cudaStream_t stream);

// Benchmark only: gemv_fused at M = 1 with the RMS-norm input and an explicit configuration.
// Built: t128 r2 u2, t128 r4 u2, t64 r2 u2, t64 r4 u2, t128 r8 u1, t64 r8 u1, t32 r8 u1
// (gemv_fused dispatches: at K ≤ 2048 t32r8u1 when N / 8 ≥ 2048, else t128r8u1; above, t128r2u2,
// and for the RoPE epilogue t128r8u1 at K ≥ 4096, t64r2u2 between).
Status gemv_fused_with_config(const GemvConfig& cfg, const GemvFusion& f, const __nv_bfloat16* x,
                              const __nv_bfloat16* w, const __nv_bfloat16* bias, __nv_bfloat16* out,
                              int N, int K, cudaStream_t stream);

}  // namespace ceiling::cuda
