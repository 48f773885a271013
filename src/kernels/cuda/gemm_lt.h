// The large-M linear layer through cuBLASLt: out [M, N] = x [M, K] · W[N, K]^T (+ bias [N]),
// bf16 operands, fp32 compute, out bf16 or f32, bias fused into the epilogue (bf16 out only).
//
// plan → run: plan() does the host-only work (descriptors, heuristic algorithm query) once per
// shape and caches it; run() only sets the pointers and enqueues cublasLtMatmul on the stream —
// no allocation, no sync — so it can be captured in a CUDA graph. run() plans a shape it has not
// seen (host work only, still capture-safe). Not thread-safe: one thread owns an LtGemm.
//
// Tuning (plan(..., tune = true), for the shapes a CUDA graph replays every step): cuBLASLt's
// first heuristic is not always its fastest algorithm for decode-sized M (a tile grid that fills
// half the SMs, no split-K). The first run() of a tuned shape outside a stream capture times up to
// kTuneCandidates of the heuristic's algorithms on that call's own operands — into a scratch
// output, the L2 flushed before each timed run so the weights come from HBM as in a real step —
// and keeps the fastest; the heuristic's first stays unless another beats it by kTuneMargin.
// Different algorithms sum in different orders: the choice is per process, like the GPU's clocks.
// FP8 plans (one heuristic algorithm for outer-vector scales) also time that algorithm's split-K
// and other-tile variants (add_fp8_variants).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace ceiling::cuda {

class LtGemm {
 public:
  static constexpr size_t kDefaultWorkspaceBytes = size_t{32} << 20;
  static constexpr int kTuneCandidates = 16;
  static constexpr int kTuneRuns = 5;                      // timed runs per candidate (median kept)
  static constexpr double kTuneMargin = 0.02;              // a challenger must be 2 % faster
  static constexpr size_t kFlushBytes = size_t{64} << 20;  // > the 50 MB L2 of an H100 / H200

  // One tuned shape: the heuristic's first algorithm and the kept one, median µs of each.
  struct TuneRecord {
    int M, N, K;
    int candidates;   // algorithms timed
    int chosen;       // index in the heuristic's order (0: its first)
    double first_us;  // the heuristic's first
    double best_us;   // the kept algorithm
    // The kept algorithm's configuration (cublasLtMatmulAlgoConfigAttributes_t): algorithm id,
    // tile id (cublasLtMatmulTile_t) and split-K count; -1 where cuBLASLt does not say.
    int algo_id = -1, tile_id = -1, split_k = -1;
  };
  // Creates the cuBLASLt handle and allocates the workspace. Throws ceiling::Error.
  explicit LtGemm(size_t workspace_bytes = kDefaultWorkspaceBytes);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  Status plan(int M, int N, int K, bool bias, DType out_dtype, bool tune = false);
  // accumulate: out = out + x · W^T (+ bias), in place (beta = 1), rounded once.
  Status run(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* bias, void* out,
             DType out_dtype, int M, int N, int K, cudaStream_t stream, bool accumulate = false);
  // W8A8 (model/weights.h kFp8ActRowsMin): out [M, N] bf16 = (xq · wq^T) · x_scale[m] ·
  // w_scale[n] (+ bias) (+ out when accumulate), FP8 tensor cores, fp32 sums; xq [M, K] and
  // wq [N, K] E4M3 (quantize_act.h, the fp8 weight as uploaded), N and K multiples of 16.
  // cuBLASLt's outer-vector scale mode (CUDA 12.9+): an error from plan_fp8 means this
  // cuBLASLt or GPU has no such kernel, and the caller takes another path.
  Status plan_fp8(int M, int N, int K, bool bias, bool tune = false);
  // FP8 accumulation (CUBLASLT_MATMUL_DESC_FAST_ACCUM) of the plans made from now on, and the
  // plans run_fp8 uses: fast (on, the default) keeps the tensor cores' own partial sums, as
  // vLLM's CUTLASS FP8 kernels and TensorRT-LLM do; precise promotes them to fp32 every few k
  // steps (slower; the comparison the kernel benchmark runs).
  void set_fp8_fast_accum(bool on) { fp8_fast_accum_ = on; }
  Status run_fp8(const uint8_t* xq, const float* x_scale, const uint8_t* wq, const float* w_scale,
                 const __nv_bfloat16* bias, __nv_bfloat16* out, int M, int N, int K,
                 cudaStream_t stream, bool accumulate = false);
  // The shapes tuned so far, in the order they were tuned.
  const std::vector<TuneRecord>& tune_log() const { return tune_log_; }

 private:
  struct Plan;
  // Times p's candidates on the call's operands and keeps the fastest (see above). A failure to
  // get scratch memory leaves the heuristic's first in place.
  Status tune(Plan& p, const void* x, const void* w, DType out_dtype, int M, int N, int K,
              cudaStream_t stream, bool accumulate);
  // M, N, K, bias, out, kind (kBf16Plan or an FP8 plan and its accumulation)
  using Key = std::tuple<int, int, int, bool, DType, int>;
  static constexpr int kBf16Plan = 0, kFp8Precise = 1, kFp8Fast = 2;
  int fp8_kind() const { return fp8_fast_accum_ ? kFp8Fast : kFp8Precise; }
  Status plan_impl(int M, int N, int K, bool bias, DType out_dtype, int kind, bool tune);
  // Adds split-K and other-tile variants of p's FP8 candidates that cuBLASLt accepts (tuning).
  void add_fp8_variants(Plan& p);
  Status run_impl(Plan& p, const void* x, const void* w, const __nv_bfloat16* bias, void* out,
                  DType out_dtype, int M, int N, int K, cudaStream_t stream, bool accumulate);
  void* handle_ = nullptr;  // cublasLtHandle_t
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<Key, std::unique_ptr<Plan>> plans_;
  std::vector<TuneRecord> tune_log_;
  bool fp8_fast_accum_ = true;
};

}  // namespace ceiling::cuda
