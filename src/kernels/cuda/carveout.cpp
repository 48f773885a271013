#include "kernels/cuda/carveout.h"

#include <mutex>
#include <utility>
#include <vector>

namespace ceiling::cuda {

cudaError_t prefer_l1_at_full_occupancy(const void* kernel, int threads) {
  int dev = 0;
  if (const cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  // The kernels already set on each device: a handful of GEMV instantiations, so a short list.
  static std::mutex mu;
  static std::vector<std::pair<const void*, int>> done;
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& [k, d] : done)
    if (k == kernel && d == dev) return cudaSuccess;
  cudaFuncAttributes a{};
  if (const cudaError_t e = cudaFuncGetAttributes(&a, kernel); e != cudaSuccess) return e;
  int ctas = 0;
  if (const cudaError_t e =
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, kernel, threads, 0);
      e != cudaSuccess)
    return e;
  int smem_per_sm = 0;
  if (const cudaError_t e =
          cudaDeviceGetAttribute(&smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev);
      e != cudaSuccess)
    return e;
  constexpr long kReservedPerCta = 1024;  // the SM's own shared memory per resident CTA (sm_80+)
  const long need =
      static_cast<long>(ctas) * (static_cast<long>(a.sharedSizeBytes) + kReservedPerCta);
  // Percent of the SM's shared memory, rounded up; the driver takes the next split it has.
  const int pct =
      smem_per_sm > 0 ? static_cast<int>((need * 100 + smem_per_sm - 1) / smem_per_sm) : 0;
  if (const cudaError_t e =
          cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                               pct < 1 ? 1 : (pct > 100 ? 100 : pct));
      e != cudaSuccess)
    return e;
  done.emplace_back(kernel, dev);
  return cudaSuccess;
}

}  // namespace ceiling::cuda
