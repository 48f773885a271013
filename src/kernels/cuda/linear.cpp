#include "kernels/cuda/linear.h"

#include <cmath>
#include <limits>

#include "core/status.h"
#include "kernels/cuda/gemv.h"

namespace ceiling::cuda {

namespace {

#include "kernels/cuda/linear_crossover.inc"  // kCrossoverTables[]

}  // namespace

const CrossoverTable& crossover_table(std::string_view device_name) {
  for (const CrossoverTable& t : kCrossoverTables)
    if (device_name.find(t.gpu) != std::string_view::npos) return t;
  return kCrossoverTables[0];
}

const CrossoverTable& current_crossover_table() {
  int dev = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
    const cudaError_t e = cudaGetLastError();
    fail("linear: no current CUDA device to pick a crossover table for ({})",
         cudaGetErrorString(e));
  }
  return crossover_table(prop.name);
}

int linear_crossover_m(const CrossoverTable& t, int N, int K) {
  double best = std::numeric_limits<double>::infinity();
  int m = 1;
  for (const Crossover& c : t.rows) {
    const double d = std::fabs(std::log2(static_cast<double>(N) / c.N)) +
                     std::fabs(std::log2(static_cast<double>(K) / c.K));
    if (d < best) {
      best = d;
      m = c.m;
    }
  }
  return m;
}

LinearPath linear_path(const CrossoverTable& t, int M, int N, int K) {
  return M <= kGemvMaxM && M < linear_crossover_m(t, N, K) ? LinearPath::kGemv
                                                           : LinearPath::kCublasLt;
}

Status Linear::plan(int M, int N, int K, bool bias, DType out_dtype, bool tune) {
  if (path(M, N, K) == LinearPath::kGemv) return Status();
  return lt_.plan(M, N, K, bias, out_dtype, tune);
}

Status Linear::run(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* bias,
                   void* out, DType out_dtype, int M, int N, int K, cudaStream_t stream,
                   bool accumulate) {
  if (accumulate && out_dtype != DType::kBF16)
    return Status::error("linear: accumulate needs a bf16 output (got {})", dtype_name(out_dtype));
  if (path(M, N, K) == LinearPath::kGemv) {
    if (!accumulate) return gemv(x, w, bias, out, out_dtype, M, N, K, stream);
    GemvFusion f;
    f.accumulate = true;
    if (gemv_fused_supported(K, x, w))
      return gemv_fused(f, x, w, bias, static_cast<__nv_bfloat16*>(out), M, N, K, stream);
  }
  return lt_.run(x, w, bias, out, out_dtype, M, N, K, stream, accumulate);
}

}  // namespace ceiling::cuda
