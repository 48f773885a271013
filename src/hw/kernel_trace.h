// Where the time of a replayed decode step goes, kernel by kernel, in the step itself.
//
// `ceiling bench kernels` times each kernel chained with itself, and ncu serializes kernels, so
// neither shows what a kernel costs between its real neighbours: under programmatic dependent
// launch a kernel starts (and loads its weights) while its predecessor drains, so its cost in the
// step is not its duration. This file turns CUPTI's kernel activity records of N back-to-back
// replays of one CUDA graph into that cost:
//   - per replay, kernels in start order; the frontier F is the latest end among the kernels
//     before k (the replay's first start for the first);
//   - exposed(k) = max(0, end_k − max(F, start_k)): how far kernel k pushes the step's end;
//   - idle(k)    = max(0, start_k − F): time no kernel of the replay ran before k started;
//   Σ exposed + Σ idle = the replay's span (first start to last end).
// With the model's layer count it finds the per-layer pattern (the same kernels, grids and blocks
// repeated num_layers times) and averages each slot of it over layers and replays.
//
// The collector (KernelTracer) loads CUPTI at run time (libcupti.so.13, then libcupti.so): the
// binary does not depend on it, and `bench latency --kernel-trace` says so clearly when it is
// missing.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ceiling::hw {

// One kernel execution, as CUPTI reports it (times in ns on CUPTI's clock).
struct KernelRecord {
  std::string name;  // as reported (mangled)
  uint64_t start_ns = 0, end_ns = 0;
  uint32_t correlation = 0;  // the launching API call's id: one graph launch = one id
  std::array<int32_t, 3> grid{}, block{};
};

// One kernel slot (a position in the step, or a slot of the layer pattern), means in µs.
struct TraceSlot {
  std::string kernel;  // short_kernel_name()
  std::array<int32_t, 3> grid{}, block{};
  int position = 0;  // in the step (for a layer slot: its position in the first layer)
  double duration_us = 0, exposed_us = 0, idle_us = 0;
};

struct TraceSummary {
  int replays = 0, kernels_per_step = 0;
  double step_us = 0;     // mean span of a replay
  double exposed_us = 0;  // mean Σ exposed, and Σ idle: their sum is step_us
  double idle_us = 0;
  std::vector<TraceSlot> positions;  // every kernel of the step, in start order
  // The layer pattern; layer_kernels == 0 when none was found.
  int layer_first = 0, layer_kernels = 0, layers = 0;
  double per_layer_us = 0;  // Σ (exposed + idle) of a layer's slots
  std::vector<TraceSlot> layer_slots;
  nlohmann::json to_json() const;
};

// The demangled name without its return type, its namespaces (`ceiling::cuda::`, `(anonymous
// namespace)::`, also inside template arguments) and its argument list; a name that does not
// demangle (cuBLASLt's kernels) comes back as is.
std::string short_kernel_name(const std::string& mangled);

// Groups `records` into `replays` replays (by correlation id when that gives `replays` groups of
// equal size, else in start order by count) and summarizes them; `num_layers` (> 0) asks for the
// layer pattern. Throws ceiling::Error when the records do not split into equal replays.
TraceSummary summarize_replays(std::vector<KernelRecord> records, int replays, int num_layers);

// The layer pattern and the kernels outside it, as a text table.
std::string trace_table(const TraceSummary& s);

// CUPTI's kernel activity (CONCURRENT_KERNEL: kernels are not serialized), process-wide: one
// tracer at a time. CUPTI learns a kernel's name when its module loads, so start the tracer before
// the kernels of interest first run (the CUDA runtime loads modules lazily, at first launch); a
// kernel loaded earlier comes back named "?". Launches while tracing cost host time (CUPTI's
// launch callbacks): pause() around what is timed on the host clock. pause() detaches CUPTI from
// the process (cuptiFinalize), because merely disabled it still cost the host 0.04–0.1 ms a
// decode step on an H200 (r129–r130); detached, a traced run's host figures equal an untraced
// run's (r133: fp8 8B batch 1 2.451 / 2.458 ms a token against 2.434 / 2.460), and the names
// learned before the pause stay known after resume().
class KernelTracer {
 public:
  // Throws ceiling::Error when CUPTI cannot be loaded or enabled, or a tracer is alive.
  static std::unique_ptr<KernelTracer> start();
  ~KernelTracer();  // disables the activity
  KernelTracer(const KernelTracer&) = delete;
  KernelTracer& operator=(const KernelTracer&) = delete;
  void pause();   // disables the kernel activity and detaches CUPTI (what is collected stays)
  void resume();  // attaches it again and enables the activity
  // Waits for the device, flushes CUPTI's buffers and drops what was collected so far.
  void clear();
  // Waits for the device, flushes and returns what was collected since start() or clear().
  std::vector<KernelRecord> collect();

 private:
  KernelTracer() = default;
};

}  // namespace ceiling::hw
