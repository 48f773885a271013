#include "engine/ops_factory.h"

#include "core/status.h"
#include "engine/cpu_ops.h"

#if defined(HAVE_CEILING_ENGINE_CUDA)
#include "engine/cuda/cuda_ops.h"
#endif

namespace ceiling::engine {

bool has_cuda_backend() {
#if defined(HAVE_CEILING_ENGINE_CUDA)
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Ops> make_ops(std::string_view device, const OpsOptions& options) {
  if (device == "cpu") {
    CpuOpsOptions o;
    o.n_threads = options.n_threads;
    o.fp8_kv_cache = options.fp8_kv_cache;
    return std::make_unique<CpuOps>(o);
  }
  if (device == "cuda") {
#if defined(HAVE_CEILING_ENGINE_CUDA)
    return make_cuda_ops(options);
#else
    fail(
        "device 'cuda': this ceiling binary was built without the CUDA backend (rebuild with "
        "nvcc on PATH and -DCEILING_CUDA=ON)");
#endif
  }
  fail("unknown device '{}' (supported: cpu, cuda)", device);
}

}  // namespace ceiling::engine
