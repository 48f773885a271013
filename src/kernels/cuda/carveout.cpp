#include "kernels/cuda/carveout.h"

#include <optional>
#include <utility>

#include "core/once_map.h"

namespace ceiling::cuda {
namespace {

// The kernels already set, per device: a handful of GEMV instantiations.
OnceMap<std::pair<const void*, int>, int>& requests() {
  static OnceMap<std::pair<const void*, int>, int> m;
  return m;
}

}  // namespace

cudaError_t prefer_l1_at_full_occupancy(const void* kernel, int threads) {
  int dev = 0;
  if (const cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  cudaError_t err = cudaSuccess;
  requests().get({kernel, dev}, [&]() -> std::optional<int> {
    cudaFuncAttributes a{};
    int ctas = 0, smem_per_sm = 0;
    if ((err = cudaFuncGetAttributes(&a, kernel)) != cudaSuccess ||
        (err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, kernel, threads, 0)) !=
            cudaSuccess ||
        (err = cudaDeviceGetAttribute(&smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor,
                                      dev)) != cudaSuccess)
      return std::nullopt;
    constexpr long kReservedPerCta = 1024;  // the SM's own shared memory per resident CTA (sm_80+)
    const long need =
        static_cast<long>(ctas) * (static_cast<long>(a.sharedSizeBytes) + kReservedPerCta);
    // Percent of the SM's shared memory, rounded up; the driver takes the next split it has.
    const int pct =
        smem_per_sm > 0 ? static_cast<int>((need * 100 + smem_per_sm - 1) / smem_per_sm) : 0;
    const int clamped = pct < 1 ? 1 : (pct > 100 ? 100 : pct);
    if ((err = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    clamped)) != cudaSuccess)
      return std::nullopt;
    return clamped;
  });
  return err;
}

std::vector<CarveoutRequest> carveout_requests() {
  std::vector<CarveoutRequest> out;
  for (const auto& [key, pct] : requests().entries()) out.push_back({key.first, key.second, pct});
  return out;
}

}  // namespace ceiling::cuda
