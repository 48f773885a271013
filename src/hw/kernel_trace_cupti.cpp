// KernelTracer (hw/kernel_trace.h): CUPTI's CONCURRENT_KERNEL activity, CUPTI loaded with
// dlopen so that the binary runs without it. CUPTI's activity API is process-wide and its buffer
// callbacks carry no user pointer, so the records land in one file-local sink guarded by a mutex;
// start() refuses a second tracer while one is alive.
#include <cuda_runtime.h>
#include <cupti_activity.h>
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "core/check.h"
#include "hw/kernel_trace.h"

namespace ceiling::hw {
namespace {

// The CUPTI entry points used, resolved from the loaded library.
struct Cupti {
  void* lib = nullptr;
  CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc,
                                    CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*enable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*disable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*flush_all)(uint32_t) = nullptr;
  CUptiResult (*next_record)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult (*result_string)(CUptiResult, const char**) = nullptr;
  CUptiResult (*finalize)() = nullptr;
};

struct Sink {
  std::mutex mu;
  bool active = false;  // a KernelTracer is alive
  Cupti api;
  std::vector<KernelRecord> records;
};
Sink& sink() {
  static Sink s;
  return s;
}

constexpr size_t kBufferBytes = size_t{8} << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  Sink& s = sink();
  {
    const std::lock_guard<std::mutex> lock(s.mu);
    CUpti_Activity* rec = nullptr;
    while (s.api.next_record && s.api.next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
      if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
          rec->kind != CUPTI_ACTIVITY_KIND_KERNEL)
        continue;
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      KernelRecord r;
      r.name = k->name && *k->name ? k->name : "?";  // "": loaded before CUPTI was
      r.start_ns = k->start;
      r.end_ns = k->end;
      r.correlation = k->correlationId;
      r.grid = {k->gridX, k->gridY, k->gridZ};
      r.block = {k->blockX, k->blockY, k->blockZ};
      s.records.push_back(std::move(r));
    }
  }
  std::free(buffer);
}

void check(const Cupti& api, CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* msg = "unknown error";
  if (api.result_string) api.result_string(r, &msg);
  fail("kernel trace: {} failed: {} (CUPTI error {})", what, msg, static_cast<int>(r));
}

Cupti load_cupti() {
  Cupti api;
  for (const char* name : {"libcupti.so.13", "libcupti.so"})
    if ((api.lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
  CEILING_ENSURE(api.lib != nullptr,
                 "kernel trace: CUPTI not found (libcupti.so.13 or libcupti.so on the library "
                 "path; it ships with the CUDA toolkit, extras/CUPTI, and in the "
                 "nvidia-cuda-cupti wheel): {}",
                 dlerror());
  const auto sym = [&api](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(api.lib, name));
    CEILING_ENSURE(fn != nullptr, "kernel trace: CUPTI has no {}", name);
  };
  sym(api.register_callbacks, "cuptiActivityRegisterCallbacks");
  sym(api.enable, "cuptiActivityEnable");
  sym(api.disable, "cuptiActivityDisable");
  sym(api.flush_all, "cuptiActivityFlushAll");
  sym(api.next_record, "cuptiActivityGetNextRecord");
  sym(api.result_string, "cuptiGetResultString");
  sym(api.finalize, "cuptiFinalize");
  return api;
}

void flush(const Cupti& api) {
  CEILING_CUDA_CHECK(cudaDeviceSynchronize());
  check(api, api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
}

}  // namespace

std::unique_ptr<KernelTracer> KernelTracer::start() {
  Sink& s = sink();
  {
    const std::lock_guard<std::mutex> lock(s.mu);
    CEILING_ENSURE(!s.active, "kernel trace: another trace is running in this process");
    if (!s.api.lib) s.api = load_cupti();
    s.records.clear();
    s.active = true;
  }
  try {
    check(s.api, s.api.register_callbacks(buffer_requested, buffer_completed),
          "cuptiActivityRegisterCallbacks");
    check(s.api, s.api.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
          "cuptiActivityEnable(CONCURRENT_KERNEL)");
  } catch (...) {
    const std::lock_guard<std::mutex> lock(s.mu);
    s.active = false;
    throw;
  }
  return std::unique_ptr<KernelTracer>(new KernelTracer());
}

KernelTracer::~KernelTracer() {
  Sink& s = sink();
  cudaDeviceSynchronize();
  s.api.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  s.api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  const std::lock_guard<std::mutex> lock(s.mu);
  s.records.clear();
  s.active = false;
}

// Paused, CUPTI is detached from the process (cuptiFinalize): merely disabled, it kept costing
// the host 0.04–0.1 ms a decode step (r129–r130). What was collected stays in the sink; resume()
// attaches it again (CUPTI initializes lazily at its next call).
void KernelTracer::pause() {
  Sink& s = sink();
  check(s.api, s.api.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
        "cuptiActivityDisable(CONCURRENT_KERNEL)");
  flush(s.api);
  check(s.api, s.api.finalize(), "cuptiFinalize");
}

void KernelTracer::resume() {
  Sink& s = sink();
  check(s.api, s.api.register_callbacks(buffer_requested, buffer_completed),
        "cuptiActivityRegisterCallbacks");
  check(s.api, s.api.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
        "cuptiActivityEnable(CONCURRENT_KERNEL)");
}

void KernelTracer::clear() {
  Sink& s = sink();
  flush(s.api);
  const std::lock_guard<std::mutex> lock(s.mu);
  s.records.clear();
}

std::vector<KernelRecord> KernelTracer::collect() {
  Sink& s = sink();
  flush(s.api);
  const std::lock_guard<std::mutex> lock(s.mu);
  std::vector<KernelRecord> out;
  out.swap(s.records);
  return out;
}

}  // namespace ceiling::hw
