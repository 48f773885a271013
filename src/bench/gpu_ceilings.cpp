#include <algorithm>

#include "bench/ceilings.h"
#include "core/status.h"

namespace ceiling::bench {

roofline::GpuCeilings gpu_ceilings(const nlohmann::json& dev, const MeasuredCeilings& m) {
  roofline::GpuCeilings g;
  try {
    g = roofline::ceilings_for(roofline::gpu_id_for_device(dev.value("gpu", "")), false);
  } catch (const Error&) {
    g.gpu_id = "unknown";
    g.gpu_name = dev.value("gpu", "unknown");
    g.fp32_flops = 60e12;
  }
  g.measured = true;
  g.source = "measured at the start of this run";
  g.sm_count = dev.value("sm_count", g.sm_count);
  g.l2_bytes = dev.value("l2_bytes", g.l2_bytes);
  g.mem_bw = m.read_gbps * 1e9;
  g.bf16_flops = m.bf16_gemm_tflops * 1e12;
  g.bw_efficiency = 1;
  g.compute_efficiency = 1;
  g.launch_graph_s = m.launch_graph_us * 1e-6;
  g.kernel_floor_s = std::max(0.0, (m.small_kernel_us - m.launch_graph_us) * 1e-6);
  if (m.round_trip_us > 0) g.round_trip_s = m.round_trip_us * 1e-6;
  // A non-positive intercept is noise, not a cost: left 0 (unknown), the floor formula applies.
  g.stream_fixed_s = std::max(0.0, m.fixed.stream.fixed_us * 1e-6);
  g.rw_fixed_s = std::max(0.0, m.fixed.rw.fixed_us * 1e-6);
  return g;
}

}  // namespace ceiling::bench
