#include "hw/gpu_spec.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/status.h"

using namespace ceiling::hw;

TEST(GpuSpec, TableHasTheRequiredGpusWithSourcedFigures) {
  const std::set<std::string> want = {"h100-sxm",      "h100-pcie", "h200", "b200",   "b300",
                                      "a100-sxm-80gb", "l40s",      "l4",   "rtx4090"};
  std::set<std::string> got;
  for (const auto& g : gpu_specs()) {
    got.insert(g.id);
    const Figure* figs[] = {&g.sm_count, &g.boost_clock_mhz, &g.memory_bytes, &g.memory_bw,
                            &g.l2_bytes, &g.bf16_flops,      &g.fp8_flops,    &g.fp4_flops,
                            &g.int8_ops, &g.fp32_flops,      &g.nvlink_bw};
    for (const Figure* f : figs) {
      EXPECT_FALSE(f->source.empty()) << g.id << ": every figure names its source";
      EXPECT_GE(f->value, 0) << g.id;
    }
    // Figures that every GPU here has.
    EXPECT_GT(g.sm_count.value, 0) << g.id;
    EXPECT_GT(g.memory_bw.value, 1e11) << g.id;
    EXPECT_GT(g.bf16_flops.value, 1e14) << g.id;
    EXPECT_GT(g.fp32_flops.value, 1e13) << g.id;
    // Dense tensor rates: fp8 is 2x bf16 wherever it exists (no sparsity figure slipped in);
    // datasheets round (L40S: 733 / 362.05 = 2.02).
    if (g.fp8_flops.value > 0) {
      EXPECT_NEAR(g.fp8_flops.value / g.bf16_flops.value, 2.0, 0.03) << g.id;
    }
  }
  EXPECT_EQ(got, want);
}

TEST(GpuSpec, HopperFiguresMatchTheDatasheets) {
  const GpuSpec& h100 = gpu_by_id("h100-sxm");
  EXPECT_EQ(h100.sm_count.value, 132);
  EXPECT_DOUBLE_EQ(h100.memory_bw.value, 3.35e12);
  EXPECT_DOUBLE_EQ(h100.bf16_flops.value, 989.4e12);  // 1,979 sparse / 2
  EXPECT_DOUBLE_EQ(h100.nvlink_bw.value, 900e9);
  const GpuSpec& h200 = gpu_by_id("H200");  // ids are case-insensitive
  EXPECT_DOUBLE_EQ(h200.memory_bw.value, 4.8e12);
  EXPECT_DOUBLE_EQ(h200.bf16_flops.value, 989.4e12);
  EXPECT_EQ(gpu_by_id("a100-sxm-80gb").fp8_flops.value, 0);  // no fp8 on Ampere
  EXPECT_EQ(gpu_by_id("l40s").nvlink_bw.value, 0);
}

TEST(GpuSpec, UnknownIdFailsNamingIt) {
  EXPECT_EQ(find_gpu("h300"), nullptr);
  try {
    gpu_by_id("h300");
    FAIL();
  } catch (const ceiling::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'h300'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("h100-sxm"), std::string::npos) << "lists known ids";
  }
}

TEST(GpuSpec, CudaDeviceNamesMapToIds) {
  struct Case {
    const char* name;
    const char* id;
  };
  const Case cases[] = {
      {"NVIDIA H100 80GB HBM3", "h100-sxm"},
      {"NVIDIA H100 PCIe", "h100-pcie"},
      {"NVIDIA H200", "h200"},
      {"NVIDIA H200 NVL", "h200"},
      {"NVIDIA B200", "b200"},
      {"NVIDIA B300 SXM6 AC", "b300"},
      {"NVIDIA A100-SXM4-80GB", "a100-sxm-80gb"},
      {"NVIDIA L40S", "l40s"},
      {"NVIDIA L4", "l4"},
      {"NVIDIA GeForce RTX 4090", "rtx4090"},
      {"  nvidia h100 80gb hbm3\n", "h100-sxm"},
  };
  for (const auto& c : cases) {
    auto id = gpu_id_for_device_name(c.name);
    ASSERT_TRUE(id.has_value()) << c.name;
    EXPECT_EQ(*id, c.id) << c.name;
  }
  EXPECT_FALSE(gpu_id_for_device_name("NVIDIA L40").has_value()) << "L40 is not L4 nor L40S";
  EXPECT_FALSE(gpu_id_for_device_name("NVIDIA A100-SXM4-40GB").has_value());
  EXPECT_FALSE(gpu_id_for_device_name("").has_value());
}
