// The large-M linear layer through cuBLASLt: out [M, N] = x [M, K] · W[N, K]^T (+ bias [N]),
// bf16 operands, fp32 compute, out bf16 or f32, bias fused into the epilogue (bf16 out only).
//
// plan → run: plan() does the host-only work (descriptors, heuristic algorithm query) once per
// shape and caches it; run() only sets the pointers and enqueues cublasLtMatmul on the stream —
// no allocation, no sync — so it can be captured in a CUDA graph. run() plans a shape it has not
// seen (host work only, still capture-safe). Not thread-safe: one thread owns an LtGemm.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <map>
#include <memory>
#include <tuple>

#include "core/dtype.h"
#include "core/status.h"

namespace ceiling::cuda {

class LtGemm {
 public:
  static constexpr size_t kDefaultWorkspaceBytes = size_t{32} << 20;
  // Creates the cuBLASLt handle and allocates the workspace. Throws ceiling::Error.
  explicit LtGemm(size_t workspace_bytes = kDefaultWorkspaceBytes);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  Status plan(int M, int N, int K, bool bias, DType out_dtype);
  // accumulate: out = out + x · W^T (+ bias), in place (beta = 1), rounded once.
  Status run(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* bias, void* out,
             DType out_dtype, int M, int N, int K, cudaStream_t stream, bool accumulate = false);

 private:
  struct Plan;
  using Key = std::tuple<int, int, int, bool, DType>;
  void* handle_ = nullptr;  // cublasLtHandle_t
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace ceiling::cuda
