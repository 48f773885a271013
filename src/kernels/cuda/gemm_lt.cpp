#include "kernels/cuda/gemm_lt.h"

#include <cublasLt.h>

#include <algorithm>
#include <vector>

#include "core/check.h"

namespace ceiling::cuda {

namespace {

cudaDataType_t cuda_type(DType t) {
  return t == DType::kF32 ? CUDA_R_32F : CUDA_R_16BF;
}

template <typename T>
bool set_config(cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr, T v) {
  return cublasLtMatmulAlgoConfigSetAttribute(&algo, attr, &v, sizeof(v)) == CUBLAS_STATUS_SUCCESS;
}

// A configuration attribute of `algo`, or `missing` where cuBLASLt does not say.
template <typename T>
T get_config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr,
             T missing) {
  T v{};
  size_t written = 0;
  return cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof(v), &written) ==
                 CUBLAS_STATUS_SUCCESS
             ? v
             : missing;
}

template <typename T>
T cap(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr) {
  T v{};
  size_t written = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, &v, sizeof(v), &written) !=
      CUBLAS_STATUS_SUCCESS)
    return T{};
  return v;
}

}  // namespace

struct LtGemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::vector<cublasLtMatmulAlgo_t> candidates;  // the heuristic's order; filled for tuning
  bool tune_pending = false;                     // tune at the next run() outside a capture
  bool tuned = false;
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
Status LtGemm::plan(int M, int N, int K, bool bias, DType out_dtype, bool tune) {
  return plan_impl(M, N, K, bias, out_dtype, kBf16Plan, tune);
}

Status LtGemm::plan_fp8(int M, int N, int K, bool bias, bool tune) {
  if (!workspace_)
    return Status::error("LtGemm: FP8 plans need a workspace (constructed with 0 bytes)");
  if (K % 16 != 0 || N % 16 != 0)
    return Status::error("LtGemm: FP8 needs N and K multiples of 16 (N {} K {})", N, K);
  return plan_impl(M, N, K, bias, DType::kBF16, fp8_kind(), tune);
}

Status LtGemm::plan_impl(int M, int N, int K, bool bias, DType out_dtype, int kind, bool tune) {
  const bool fp8 = kind != kBf16Plan;
  if (M < 1 || N < 1 || K < 1) return Status::error("LtGemm: bad shape M {} N {} K {}", M, N, K);
  if (out_dtype != DType::kBF16 && out_dtype != DType::kF32)
    return Status::error("LtGemm: out dtype {} not supported (bf16, f32)", dtype_name(out_dtype));
  if (bias && out_dtype != DType::kBF16)
    return Status::error("LtGemm: a bias needs bf16 out (got {})", dtype_name(out_dtype));
  const Key key{M, N, K, bias, out_dtype, kind};
  auto it = plans_.find(key);
  if (it != plans_.end() && (!tune || it->second->tuned || it->second->tune_pending))
    return Status();
  std::unique_ptr<Plan> fresh;
  Plan* p = nullptr;
  if (it != plans_.end()) {
    p = it->second.get();
  } else {
    fresh = std::make_unique<Plan>();
    p = fresh.get();
    CEILING_CUBLAS_RETURN(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CEILING_CUBLAS_RETURN(
        cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    CEILING_CUBLAS_RETURN(
        cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    if (bias) {
      const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
      const cudaDataType_t bt = CUDA_R_16BF;
      CEILING_CUBLAS_RETURN(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                           &epi, sizeof(epi)));
      CEILING_CUBLAS_RETURN(cublasLtMatmulDescSetAttribute(
          p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)));
    }
    if (fp8) {  // A = W's rows scaled by w_scale[n], B = x's rows by x_scale[m]: outer vectors
      const int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
      CEILING_CUBLAS_RETURN(cublasLtMatmulDescSetAttribute(
          p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode)));
      CEILING_CUBLAS_RETURN(cublasLtMatmulDescSetAttribute(
          p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode)));
      const int8_t fast = kind == kFp8Fast ? 1 : 0;
      CEILING_CUBLAS_RETURN(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM,
                                                           &fast, sizeof(fast)));
    }
    const cudaDataType_t in = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
    CEILING_CUBLAS_RETURN(cublasLtMatrixLayoutCreate(&p->a, in, K, N, K));
    CEILING_CUBLAS_RETURN(cublasLtMatrixLayoutCreate(&p->b, in, K, M, K));
    CEILING_CUBLAS_RETURN(cublasLtMatrixLayoutCreate(&p->c, cuda_type(out_dtype), N, M, N));
  }

  if (fp8) {
    // cuBLASLt finds no outer-vector-scale algorithm while the scale pointers are null: plan
    // with a stand-in device address (run_fp8 sets the real ones before each call).
    const void* stand_in = workspace_;
    CEILING_CUBLAS_RETURN(cublasLtMatmulDescSetAttribute(
        p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &stand_in, sizeof(stand_in)));
    CEILING_CUBLAS_RETURN(cublasLtMatmulDescSetAttribute(
        p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &stand_in, sizeof(stand_in)));
  }
  cublasLtMatmulPreference_t pref = nullptr;
  CEILING_CUBLAS_RETURN(cublasLtMatmulPreferenceCreate(&pref));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                       &workspace_bytes_, sizeof(workspace_bytes_));
  std::vector<cublasLtMatmulHeuristicResult_t> results(tune ? kTuneCandidates : 1);
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
      static_cast<cublasLtHandle_t>(handle_), p->desc, p->a, p->b, p->c, p->c, pref,
      static_cast<int>(results.size()), results.data(), &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0)
    return Status::error("LtGemm: no cuBLASLt {} algorithm for M {} N {} K {} ({})",
                         fp8 ? "FP8 (E4M3, outer-vector scales)" : "bf16", M, N, K,
                         cublasGetStatusString(st));
  if (fresh) p->algo = results[0].algo;  // a plan already run keeps its algorithm until tuned
  p->candidates.clear();
  for (int i = 0; i < found; ++i)
    if (results[i].state == CUBLAS_STATUS_SUCCESS) p->candidates.push_back(results[i].algo);
  if (tune && fp8) add_fp8_variants(*p);
  p->tune_pending = tune && p->candidates.size() > 1;
  if (tune && !p->tune_pending) p->tuned = true;  // one candidate: nothing to time
  if (fresh) plans_.emplace(key, std::move(fresh));
  return Status();
}

// cuBLASLt's heuristic offers one algorithm for FP8 with outer-vector scales, on a tile grid that
// can leave SMs idle at decode sizes (M = 256, N = 4096: 64 CTAs of 128 × 128 on 132 SMs). The
// tuner also gets that algorithm with a split K (2–4) and with its other tiles, as far as
// cublasLtMatmulAlgoCheck accepts them for this plan; timing decides.
void LtGemm::add_fp8_variants(Plan& p) {
  const auto h = static_cast<cublasLtHandle_t>(handle_);
  const auto accept = [&](const cublasLtMatmulAlgo_t& algo) {
    cublasLtMatmulHeuristicResult_t r{};
    if (p.candidates.size() < static_cast<size_t>(kTuneCandidates) &&
        cublasLtMatmulAlgoCheck(h, p.desc, p.a, p.b, p.c, p.c, &algo, &r) ==
            CUBLAS_STATUS_SUCCESS &&
        r.workspaceSize <= workspace_bytes_)
      p.candidates.push_back(algo);
  };
  const std::vector<cublasLtMatmulAlgo_t> base = p.candidates;
  for (const cublasLtMatmulAlgo_t& b : base) {
    if (cap<int32_t>(b, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT) != 0) {
      const uint32_t mask = cap<uint32_t>(b, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK);
      const uint32_t scheme = (mask & CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE)
                                  ? CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE
                                  : CUBLASLT_REDUCTION_SCHEME_INPLACE;
      for (uint32_t split : {2u, 3u, 4u}) {
        cublasLtMatmulAlgo_t a = b;
        if (set_config(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, split) &&
            set_config(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, scheme))
          accept(a);
      }
    }
    size_t bytes = 0;
    if (cublasLtMatmulAlgoCapGetAttribute(&b, CUBLASLT_ALGO_CAP_TILE_IDS, nullptr, 0, &bytes) !=
        CUBLAS_STATUS_SUCCESS)
      continue;
    std::vector<uint32_t> tiles(bytes / sizeof(uint32_t));
    if (tiles.empty() ||
        cublasLtMatmulAlgoCapGetAttribute(&b, CUBLASLT_ALGO_CAP_TILE_IDS, tiles.data(), bytes,
                                          &bytes) != CUBLAS_STATUS_SUCCESS)
      continue;
    const uint32_t own = get_config<uint32_t>(b, CUBLASLT_ALGO_CONFIG_TILE_ID, 0);
    for (uint32_t t : tiles) {
      if (t == own || t == CUBLASLT_MATMUL_TILE_UNDEFINED) continue;
      cublasLtMatmulAlgo_t a = b;
      if (set_config(a, CUBLASLT_ALGO_CONFIG_TILE_ID, t)) accept(a);
    }
  }
}

Status LtGemm::tune(Plan& p, const void* x, const void* w, DType out_dtype, int M, int N, int K,
                    cudaStream_t stream, bool accumulate) {
  p.tune_pending = false;
  p.tuned = true;
  const size_t out_bytes = dtype_bytes(out_dtype, size_t(M) * N);
  void* scratch = nullptr;
  void* flush = nullptr;
  if (cudaMalloc(&scratch, out_bytes) != cudaSuccess ||
      cudaMalloc(&flush, kFlushBytes) != cudaSuccess) {
    (void)cudaGetLastError();  // no room to tune: keep the heuristic's first
    if (scratch) cudaFree(scratch);
    return Status();
  }
  const int n = static_cast<int>(p.candidates.size());
  std::vector<cudaEvent_t> ev(2 * kTuneRuns, nullptr);
  std::vector<double> median(n, -1.0);
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  Status status = [&]() -> Status {
    for (auto& e : ev) CEILING_CUDA_RETURN(cudaEventCreate(&e));
    CEILING_CUDA_RETURN(cudaMemsetAsync(scratch, 0, out_bytes, stream));
    for (int i = 0; i < n; ++i) {
      auto launch = [&] {
        return cublasLtMatmul(static_cast<cublasLtHandle_t>(handle_), p.desc, &alpha, w, p.a, x,
                              p.b, &beta, scratch, p.c, scratch, p.c, &p.candidates[i], workspace_,
                              workspace_bytes_, stream);
      };
      if (launch() != CUBLAS_STATUS_SUCCESS) continue;  // not runnable here: not a candidate
      for (int r = 0; r < kTuneRuns; ++r) {
        CEILING_CUDA_RETURN(cudaMemsetAsync(flush, r, kFlushBytes, stream));
        CEILING_CUDA_RETURN(cudaEventRecord(ev[2 * r], stream));
        CEILING_CUBLAS_RETURN(launch());
        CEILING_CUDA_RETURN(cudaEventRecord(ev[2 * r + 1], stream));
      }
      CEILING_CUDA_RETURN(cudaEventSynchronize(ev.back()));
      std::vector<double> us(kTuneRuns);
      for (int r = 0; r < kTuneRuns; ++r) {
        float ms = 0;
        CEILING_CUDA_RETURN(cudaEventElapsedTime(&ms, ev[2 * r], ev[2 * r + 1]));
        us[r] = ms * 1e3;
      }
      std::sort(us.begin(), us.end());
      median[i] = us[kTuneRuns / 2];
    }
    return Status();
  }();
  for (auto& e : ev)
    if (e) cudaEventDestroy(e);
  cudaFree(flush);
  cudaFree(scratch);
  CEILING_RETURN_IF_ERROR(status);
  if (median[0] < 0) return Status();  // the first did not run: leave it to run() to report
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (median[i] >= 0 && median[i] < median[best]) best = i;
  if (best != 0 && median[best] > median[0] * (1.0 - kTuneMargin)) best = 0;
  p.algo = p.candidates[best];
  int timed = 0;
  for (double m : median) timed += m >= 0;
  TuneRecord rec{M, N, K, timed, best, median[0], median[best]};
  rec.algo_id = get_config<int32_t>(p.algo, CUBLASLT_ALGO_CONFIG_ID, -1);
  rec.tile_id = static_cast<int>(get_config<uint32_t>(p.algo, CUBLASLT_ALGO_CONFIG_TILE_ID, ~0u));
  rec.split_k = get_config<int32_t>(p.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, -1);
  tune_log_.push_back(rec);
  return Status();
}

Status LtGemm::run(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* bias,
                   void* out, DType out_dtype, int M, int N, int K, cudaStream_t stream,
                   bool accumulate) {
  CEILING_RETURN_IF_ERROR(plan(M, N, K, bias != nullptr, out_dtype));
  Plan& p = *plans_.at(Key{M, N, K, bias != nullptr, out_dtype, kBf16Plan});
  return run_impl(p, x, w, bias, out, out_dtype, M, N, K, stream, accumulate);
}

Status LtGemm::run_fp8(const uint8_t* xq, const float* x_scale, const uint8_t* wq,
                       const float* w_scale, const __nv_bfloat16* bias, __nv_bfloat16* out, int M,
                       int N, int K, cudaStream_t stream, bool accumulate) {
  CEILING_RETURN_IF_ERROR(plan_fp8(M, N, K, bias != nullptr));
  Plan& p = *plans_.at(Key{M, N, K, bias != nullptr, DType::kBF16, fp8_kind()});
  CEILING_CUBLAS_RETURN(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                       &w_scale, sizeof(w_scale)));
  CEILING_CUBLAS_RETURN(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                       &x_scale, sizeof(x_scale)));
  return run_impl(p, xq, wq, bias, out, DType::kBF16, M, N, K, stream, accumulate);
}

Status LtGemm::run_impl(Plan& p, const void* x, const void* w, const __nv_bfloat16* bias, void* out,
                        DType out_dtype, int M, int N, int K, cudaStream_t stream,
                        bool accumulate) {
  if (bias)
    CEILING_CUBLAS_RETURN(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                         &bias, sizeof(bias)));
  if (p.tune_pending) {
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    CEILING_CUDA_RETURN(cudaStreamIsCapturing(stream, &cs));
    if (cs == cudaStreamCaptureStatusNone)
      CEILING_RETURN_IF_ERROR(tune(p, x, w, out_dtype, M, N, K, stream, accumulate));
  }
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;  // C = D = out: in place
  CEILING_CUBLAS_RETURN(cublasLtMatmul(static_cast<cublasLtHandle_t>(handle_), p.desc, &alpha, w,
                                       p.a, x, p.b, &beta, out, p.c, out, p.c, &p.algo, workspace_,
                                       workspace_bytes_, stream));
  return Status();
}

}  // namespace ceiling::cuda
