#include "kernels/cuda/linear.h"

#include <cmath>
#include <limits>

#include "kernels/cuda/gemv.h"

namespace ceiling::cuda {

namespace {

struct Crossover {
  int K, N;
  int m;  // smallest M where cuBLASLt was faster; kGemvMaxM + 1 = the GEMV won up to its limit
};

#include "kernels/cuda/linear_crossover.inc"  // kCrossovers[], kCrossoverSource

}  // namespace

int linear_crossover_m(int N, int K) {
  double best = std::numeric_limits<double>::infinity();
  int m = 1;
  for (const Crossover& c : kCrossovers) {
    const double d = std::fabs(std::log2(static_cast<double>(N) / c.N)) +
                     std::fabs(std::log2(static_cast<double>(K) / c.K));
    if (d < best) {
      best = d;
      m = c.m;
    }
  }
  return m;
}

std::string linear_crossover_source() {
  return kCrossoverSource;
}

LinearPath linear_path(int M, int N, int K) {
  return M <= kGemvMaxM && M < linear_crossover_m(N, K) ? LinearPath::kGemv : LinearPath::kCublasLt;
}

Status Linear::plan(int M, int N, int K, bool bias, DType out_dtype) {
  if (linear_path(M, N, K) == LinearPath::kGemv) return Status();
  return lt_.plan(M, N, K, bias, out_dtype);
}

Status Linear::run(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* bias,
                   void* out, DType out_dtype, int M, int N, int K, cudaStream_t stream,
                   bool accumulate) {
  if (accumulate && out_dtype != DType::kBF16)
    return Status::error("linear: accumulate needs a bf16 output (got {})", dtype_name(out_dtype));
  if (linear_path(M, N, K) == LinearPath::kGemv) {
    if (!accumulate) return gemv(x, w, bias, out, out_dtype, M, N, K, stream);
    GemvFusion f;
    f.accumulate = true;
    if (gemv_fused_supported(K, x, w))
      return gemv_fused(f, x, w, bias, static_cast<__nv_bfloat16*>(out), M, N, K, stream);
  }
  return lt_.run(x, w, bias, out, out_dtype, M, N, K, stream, accumulate);
}

}  // namespace ceiling::cuda
