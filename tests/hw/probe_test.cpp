// GPU test: runs the probe with small sizes and checks its numbers are physically plausible and
// consistent with the datasheet (a measured rate can't exceed the peak by more than clock slack).
#include <gtest/gtest.h>

#include "hw/gpu_spec.h"
#include "hw/measured.h"
#if defined(CEILING_HW_PROBE)
#include "hw/probe.h"
#endif

using namespace ceiling::hw;

TEST(Probe, MeasuresTheLocalGpuBriefly) {
#if !defined(CEILING_HW_PROBE)
  GTEST_SKIP() << "built without CUDA: no probe";
#else
  if (!local_device_name()) GTEST_SKIP() << "no CUDA device";
  ProbeOptions opt;
  opt.read_bytes = size_t{512} << 20;
  opt.copy_bytes = size_t{256} << 20;
  opt.gemm_n = 4096;
  opt.repeats = 5;
  opt.launches = 2000;
  opt.graph_nodes = 200;
  const MeasuredCeilings m = run_probe(opt);
  const GpuSpec& spec = gpu_by_id(m.gpu_id);
  EXPECT_EQ(m.sm_count, spec.sm_count.value);
  EXPECT_GT(m.read_bw, 0.3 * spec.memory_bw.value);
  EXPECT_LT(m.read_bw, 1.05 * spec.memory_bw.value);
  EXPECT_GT(m.copy_bw, 0.3 * spec.memory_bw.value);
  EXPECT_GT(m.bf16_gemm_flops, 0.3 * spec.bf16_flops.value);
  EXPECT_LT(m.bf16_gemm_flops, 1.15 * spec.bf16_flops.value);  // boost clock above the rated one
  if (spec.fp8_flops.value > 0) {
    EXPECT_GT(m.fp8_gemm_flops, m.bf16_gemm_flops);
  }
  EXPECT_GT(m.launch_eager_s, 1e-7);
  EXPECT_LT(m.launch_eager_s, 1e-4);
  EXPECT_GT(m.launch_graph_s, 1e-8);
  EXPECT_LE(m.launch_graph_s, m.launch_eager_s * 1.5);
  EXPECT_GT(m.small_kernel_s, 0);
  // The file it would write loads back.
  const MeasuredCeilings r = parse_measured_ceilings(measured_ceilings_to_json(m), "probe");
  EXPECT_EQ(r.gpu_id, m.gpu_id);
  EXPECT_FALSE(r.date.empty());
#endif
}
