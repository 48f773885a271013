#include "kernels/cuda/gemm_lt.h"

#include <cublasLt.h>

#include "core/check.h"

namespace ceiling::cuda {

namespace {

cudaDataType_t cuda_type(DType t) {
  return t == DType::kF32 ? CUDA_R_32F : CUDA_R_16BF;
}

}  // namespace

struct LtGemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

LtGemm::LtGemm(size_t workspace_bytes) : workspace_bytes_(workspace_bytes) {
  cublasLtHandle_t h = nullptr;
  CEILING_CUBLAS_CHECK(cublasLtCreate(&h));
  handle_ = h;
  if (workspace_bytes_ > 0) {
    const cudaError_t e = cudaMalloc(&workspace_, workspace_bytes_);
    if (e != cudaSuccess) {
      cublasLtDestroy(h);
      fail("LtGemm: cudaMalloc of a {} byte workspace failed: {}", workspace_bytes_,
           cudaGetErrorString(e));
    }
  }
}

LtGemm::~LtGemm() {
  plans_.clear();
  if (workspace_) cudaFree(workspace_);
  if (handle_) cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
}

// Row-major out [M, N] = x [M, K] · W[N, K]^T is, column-major, out^T [N, M] = W^T^T · x^T:
// A = W seen as [K, N] (ld K) transposed, B = x seen as [K, M] (ld K), C = D = out^T [N, M] (ld N).
Status LtGemm::plan(int M, int N, int K, bool bias, DType out_dtype) {
  if (M < 1 || N < 1 || K < 1) return Status::error("LtGemm: bad shape M {} N {} K {}", M, N, K);
  if (out_dtype != DType::kBF16 && out_dtype != DType::kF32)
    return Status::error("LtGemm: out dtype {} not supported (bf16, f32)", dtype_name(out_dtype));
  if (bias && out_dtype != DType::kBF16)
    return Status::error("LtGemm: a bias needs bf16 out (got {})", dtype_name(out_dtype));
  const Key key{M, N, K, bias, out_dtype};
  if (plans_.count(key)) return Status();
  auto p = std::make_unique<Plan>();
  CEILING_CUBLAS_RETURN(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  CEILING_CUBLAS_RETURN(
      cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  CEILING_CUBLAS_RETURN(
      cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  if (bias) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    const cudaDataType_t bt = CUDA_R_16BF;
    CEILING_CUBLAS_RETURN(
        cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    CEILING_CUBLAS_RETURN(cublasLtMatmulDescSetAttribute(
        p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)));
  }
  CEILING_CUBLAS_RETURN(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, K, N, K));
  CEILING_CUBLAS_RETURN(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, K, M, K));
  CEILING_CUBLAS_RETURN(cublasLtMatrixLayoutCreate(&p->c, cuda_type(out_dtype), N, M, N));

  cublasLtMatmulPreference_t pref = nullptr;
  CEILING_CUBLAS_RETURN(cublasLtMatmulPreferenceCreate(&pref));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                       &workspace_bytes_, sizeof(workspace_bytes_));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(handle_), p->desc, p->a, p->b,
                                     p->c, p->c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0)
    return Status::error("LtGemm: no cuBLASLt algorithm for M {} N {} K {} ({})", M, N, K,
                         cublasGetStatusString(st));
  p->algo = result.algo;
  plans_.emplace(key, std::move(p));
  return Status();
}

Status LtGemm::run(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* bias,
                   void* out, DType out_dtype, int M, int N, int K, cudaStream_t stream,
                   bool accumulate) {
  CEILING_RETURN_IF_ERROR(plan(M, N, K, bias != nullptr, out_dtype));
  Plan& p = *plans_.at(Key{M, N, K, bias != nullptr, out_dtype});
  if (bias)
    CEILING_CUBLAS_RETURN(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                         &bias, sizeof(bias)));
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;  // C = D = out: in place
  CEILING_CUBLAS_RETURN(cublasLtMatmul(static_cast<cublasLtHandle_t>(handle_), p.desc, &alpha, w,
                                       p.a, x, p.b, &beta, out, p.c, out, p.c, &p.algo, workspace_,
                                       workspace_bytes_, stream));
  return Status();
}

}  // namespace ceiling::cuda
