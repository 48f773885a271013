// The per-kernel model against hand-worked numbers (H100 SXM datasheet: 3.35e12 B/s,
// 989.4e12 bf16 FLOP/s, 132 SMs; default layer-2 parameters from roofline/parameters.h).
#include "roofline/kernel_cost.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/status.h"
#include "hw/measured.h"
#include "roofline/parameters.h"

using namespace ceiling;
using namespace ceiling::roofline;

namespace {
constexpr double kRel = 1e-9;  // closed-form arithmetic: only rounding error allowed

// Measured ceilings of an H100-like device (bf16 and fp8 at 0.8 and 0.7 of the datasheet's
// 989.4 and 1978.9), to be overridden field by field.
hw::MeasuredCeilings measured_base(const std::string& gpu_id, const std::string& device_name) {
  hw::MeasuredCeilings m;
  m.gpu_id = gpu_id;
  m.device_name = device_name;
  m.sm_count = 132;
  m.l2_bytes = 50 * 1048576.0;
  m.memory_bytes = 85520809984;
  m.read_bw = 3.0e12;
  m.copy_bw = 3.0e12;
  m.bf16_gemm_flops = 791.5e12;
  m.fp8_gemm_flops = 1385.2e12;
  m.launch_eager_s = 2.5e-6;
  m.launch_graph_s = 1.0e-6;
  m.small_kernel_s = 2.2e-6;
  m.date = "2026-11-21T00:00:00Z";
  return m;
}

// `m` written as a measured-ceilings file at a fresh temporary path (the caller removes it).
std::filesystem::path write_measured(const hw::MeasuredCeilings& m) {
  const std::filesystem::path f = std::filesystem::temp_directory_path() /
                                  ("ceil-" + std::to_string(std::random_device{}()) + ".json");
  std::ofstream(f) << hw::measured_ceilings_to_json(m);
  return f;
}

}  // namespace

TEST(KernelCost, MemoryBoundKernelHandWorked) {
  const GpuCeilings g = ceilings_for("h100-sxm", false);
  KernelCost k;
  k.bytes = 3.35e9;  // one millisecond of datasheet bandwidth
  k.flops = 1e9;     // intensity 0.3 FLOP/B, far under the ridge (295)
  const Prediction p = predict(g, k, DType::kBF16);
  EXPECT_NEAR(p.memory_s, 1e-3, 1e-3 * kRel);
  EXPECT_NEAR(p.compute_s, 1e9 / 989.4e12, 1e-15);
  EXPECT_NEAR(p.time_roofline_s, 1e-3, 1e-3 * kRel);
  EXPECT_EQ(p.roofline_limiter, Limiter::kMemory);
  // Layer 2: bytes / (bw * 0.90) + one loaded round trip + one graph launch.
  const Layer2Defaults& d = layer2_defaults();
  EXPECT_NEAR(p.time_predicted_s, 1e-3 / d.bw_efficiency + d.kernel_floor_s + d.launch_graph_s,
              1e-3 * kRel);
  EXPECT_EQ(p.limiter, Limiter::kMemory);
  // Each further dependent phase adds one round trip; fused work (no launch) pays none.
  k.round_trips = 3;
  EXPECT_NEAR(predict(g, k, DType::kBF16).time_predicted_s,
              1e-3 / d.bw_efficiency + d.kernel_floor_s + 2 * d.round_trip_s + d.launch_graph_s,
              1e-3 * kRel);
  k.launches = 0;
  EXPECT_NEAR(predict(g, k, DType::kBF16).time_predicted_s, 1e-3 / d.bw_efficiency, 1e-3 * kRel);
}

TEST(KernelCost, ComputeBoundKernelWithWaveQuantization) {
  const GpuCeilings g = ceilings_for("h100-sxm", false);
  KernelCost k;
  k.flops = 989.4e12 * 1e-3;  // one millisecond at the bf16 peak
  k.bytes = 1e6;
  k.tiles = 133;  // one tile more than 132 SMs: two waves, the second nearly empty
  const Prediction p = predict(g, k, DType::kBF16);
  EXPECT_NEAR(p.time_roofline_s, 1e-3, 1e-3 * kRel);
  EXPECT_EQ(p.roofline_limiter, Limiter::kCompute);
  EXPECT_NEAR(p.wave_efficiency, 133.0 / 264.0, kRel);
  const Layer2Defaults& d = layer2_defaults();
  EXPECT_NEAR(p.time_predicted_s, 1e-3 / (d.compute_efficiency * 133.0 / 264.0) + d.launch_graph_s,
              1e-3 * kRel);
  EXPECT_EQ(p.limiter, Limiter::kCompute);
  k.tiles = 264;  // exactly two full waves
  EXPECT_NEAR(predict(g, k, DType::kBF16).wave_efficiency, 1.0, kRel);
  // fp8 math about doubles the peak (1978.9 TFLOP/s); int8 the same as fp8 on Hopper; f32 runs
  // on CUDA cores (66.9 TFLOP/s).
  EXPECT_NEAR(predict(g, k, DType::kF8E4M3).compute_s, k.flops / 1978.9e12, 1e-3 * kRel);
  EXPECT_NEAR(predict(g, k, DType::kI8).compute_s, k.flops / 1978.9e12, 1e-3 * kRel);
  EXPECT_NEAR(predict(g, k, DType::kF32).compute_s, 989.4e12 * 1e-3 / 66.9e12, 1e-9);
}

TEST(KernelCost, TinyKernelIsOverheadBoundEagerOrGraph) {
  const GpuCeilings g = ceilings_for("h100-sxm", false);
  const Layer2Defaults& d = layer2_defaults();
  KernelCost k;
  k.bytes = 16384;  // 4.9 ns of bandwidth
  const Prediction graph = predict(g, k, DType::kF32, true);
  EXPECT_NEAR(graph.time_predicted_s,
              16384 / (3.35e12 * d.bw_efficiency) + d.kernel_floor_s + d.launch_graph_s, 1e-15);
  EXPECT_EQ(graph.limiter, Limiter::kOverhead);
  EXPECT_EQ(graph.roofline_limiter, Limiter::kMemory);
  const Prediction eager = predict(g, k, DType::kF32, false);
  EXPECT_NEAR(eager.time_predicted_s, std::max(graph.time_predicted_s, d.launch_eager_s), 1e-15);
  // Fused work (no launch of its own) pays neither floor nor launch.
  k.launches = 0;
  EXPECT_NEAR(predict(g, k, DType::kF32).time_predicted_s, 16384 / (3.35e12 * d.bw_efficiency),
              1e-18);
}

TEST(KernelCost, L2ReuseOnlyWhenItFits) {
  const GpuCeilings g = ceilings_for("h100-sxm", false);  // 50 MiB L2, half usable
  KernelCost k;
  k.bytes = 100e6;
  k.l2_reuse_bytes = 8e6;  // fits in 25 MiB: read from L2
  EXPECT_NEAR(predict(g, k, DType::kBF16).hbm_bytes, 92e6, 1);
  k.l2_reuse_bytes = 40e6;  // does not fit
  EXPECT_NEAR(predict(g, k, DType::kBF16).hbm_bytes, 100e6, 1);
  // Layer 1 ignores L2 either way.
  EXPECT_NEAR(predict(g, k, DType::kBF16).memory_s, 100e6 / 3.35e12, 1e-15);
}

TEST(KernelCost, CollectivesUseNvlinkPerDirection) {
  const GpuCeilings g = ceilings_for("h100-sxm", false);
  EXPECT_DOUBLE_EQ(g.nvlink_bw, 450e9);  // 900 GB/s datasheet total, both directions
  KernelCost k;
  k.nvlink_bytes = 450e6;  // one millisecond at 450 GB/s
  k.bytes = 1e6;
  k.collective = true;
  const Prediction p = predict(g, k, DType::kF32);
  EXPECT_NEAR(p.comm_s, 1e-3, 1e-12);
  EXPECT_EQ(p.roofline_limiter, Limiter::kCommunication);
  EXPECT_EQ(p.limiter, Limiter::kCommunication);
  const Layer2Defaults& d = layer2_defaults();
  EXPECT_NEAR(p.time_predicted_s,
              1e-3 / d.nvlink_efficiency + d.allreduce_latency_s + d.launch_graph_s, 1e-12);
  EXPECT_THROW(predict(ceilings_for("l40s", false), k, DType::kF32), Error);  // no NVLink
}

TEST(KernelCost, RejectsMissingPathsAndBadInput) {
  const GpuCeilings a100 = ceilings_for("a100-sxm-80gb", false);
  KernelCost k;
  k.flops = 1e9;
  k.bytes = 1e6;
  EXPECT_THROW(predict(a100, k, DType::kF8E4M3), Error);  // no fp8 on Ampere
  EXPECT_THROW(predict(a100, k, DType::kI4), Error);      // not a math dtype
  k.bytes = -1;
  EXPECT_THROW(predict(a100, k, DType::kBF16), Error);
  k.bytes = 1e6;
  k.l2_reuse_bytes = 2e6;  // more reuse than bytes
  EXPECT_THROW(predict(a100, k, DType::kBF16), Error);
  EXPECT_THROW(ceilings_for("h300", false), Error);
  KernelCost none;
  none.launches = 0;
  const Prediction p = predict(a100, none, DType::kBF16);
  EXPECT_EQ(p.time_predicted_s, 0);
  EXPECT_EQ(p.limiter, Limiter::kOverhead);
}

TEST(KernelCost, RidgePoints) {
  // Ridge = dense bf16 peak / bandwidth: H100 SXM 989.4e12 / 3.35e12 = 295.3 FLOP/B;
  // H200 989.4e12 / 4.8e12 = 206.1 FLOP/B.
  const GpuCeilings h100 = ceilings_for("h100-sxm", false);
  const GpuCeilings h200 = ceilings_for("h200", false);
  EXPECT_NEAR(h100.bf16_flops / h100.mem_bw, 295.3, 0.1);
  EXPECT_NEAR(h200.bf16_flops / h200.mem_bw, 206.1, 0.1);
}

TEST(KernelCost, MeasuredCeilingsOverrideTheDatasheet) {
  namespace fs = std::filesystem;
  hw::MeasuredCeilings m = measured_base("h100-sxm", "NVIDIA H100 80GB HBM3");
  std::mt19937 rng(std::random_device{}());
  m.read_bw = std::uniform_real_distribution<double>(2.9e12, 3.1e12)(rng);
  const fs::path f = write_measured(m);
  const GpuCeilings g = ceilings_from_file("h100-sxm", f.string());
  EXPECT_TRUE(g.measured);
  EXPECT_NEAR(g.mem_bw, m.read_bw, 1e-3);
  EXPECT_NEAR(g.bf16_flops, 791.5e12, 1);
  EXPECT_NEAR(g.fp8_flops, 1385.2e12, 1);
  // Unmeasured paths scale with the measured/datasheet ratio of the nearest measured one:
  // int8 like fp8 (1385.2 / 1978.9), fp32 like bf16 (791.5 / 989.4).
  EXPECT_NEAR(g.int8_ops, 1978.9e12 * (1385.2 / 1978.9), 1e3);
  EXPECT_NEAR(g.fp32_flops, 66.9e12 * (791.5 / 989.4), 1e3);
  EXPECT_EQ(g.bw_efficiency, 1);
  EXPECT_EQ(g.compute_efficiency, 1);
  EXPECT_NEAR(g.kernel_floor_s, 1.2e-6, 1e-15);  // small kernel - empty kernel
  EXPECT_NEAR(g.launch_eager_s, 2.5e-6, 1e-15);
  // Memory-bound kernel under measured ceilings: no efficiency factor; one measured round trip
  // (the floor) and one graph launch.
  KernelCost k;
  k.bytes = 1e9;
  EXPECT_NEAR(predict(g, k, DType::kBF16).time_predicted_s, 1e9 / m.read_bw + 1.2e-6 + 1e-6, 1e-12);
  // A file for another GPU is refused.
  EXPECT_THROW(ceilings_from_file("h200", f.string()), Error);
  fs::remove(f);
  // No file for this GPU: the error names the file it looked for.
  try {
    ceilings_for("l4", true);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("data/ceilings/l4.json"), std::string::npos) << e.what();
  }
}

// The grid-wide probes' intercepts (stream for round_trips ≤ 1, rw for ≥ 2) replace kernel_floor
// and the first extra round trip; the graph launch is part of the intercept, so a memory-bound
// kernel costs exactly bytes / bw + fixed.
TEST(KernelCost, GridWideFixedCostsReplaceTheFloor) {
  GpuCeilings g = ceilings_for("h200", false);
  g.launch_graph_s = 0.5e-6;
  g.launch_eager_s = 3.1e-6;
  g.kernel_floor_s = 0.3e-6;
  g.round_trip_s = 0.26e-6;
  g.stream_fixed_s = 2.5e-6;
  g.rw_fixed_s = 3.1e-6;
  const double bw = g.mem_bw * g.bw_efficiency;
  KernelCost k;
  k.bytes = 117e6;
  const double mem2 = 117e6 / bw;
  auto t = [&](int round_trips, bool graphs = true) {
    k.round_trips = round_trips;
    return predict(g, k, DType::kBF16, graphs).time_predicted_s;
  };
  EXPECT_NEAR(t(1), mem2 + (2.5e-6 - 0.5e-6) + 0.5e-6, 1e-15);
  EXPECT_NEAR(t(0), mem2 + 2.5e-6, 1e-15);
  EXPECT_NEAR(t(2), mem2 + (3.1e-6 - 0.5e-6) + 0.5e-6, 1e-15);
  EXPECT_NEAR(t(3), mem2 + 3.1e-6 + 1 * 0.26e-6, 1e-15);  // the embedding: one more round trip
  EXPECT_NEAR(t(5), mem2 + 3.1e-6 + 3 * 0.26e-6, 1e-15);
  // A decode-sized kernel: the fixed cost is nearly all of it, and is overhead.
  k.bytes = 40960;
  k.round_trips = 2;
  const Prediction tiny = predict(g, k, DType::kF32);
  EXPECT_NEAR(tiny.time_predicted_s, 40960 / bw + 3.1e-6, 1e-15);
  EXPECT_EQ(tiny.limiter, Limiter::kOverhead);
  EXPECT_NEAR(t(2, false), std::max(40960 / bw + 3.1e-6, 3.1e-6), 1e-15);  // eager: launch rate
  // A compute-bound kernel hides the fixed cost under its math but still pays its launch.
  k.bytes = 1e6;
  k.flops = g.bf16_flops * g.compute_efficiency * 1e-3;  // one millisecond
  EXPECT_NEAR(t(2), 1e-3 + 0.5e-6, 1e-12);
  k.flops = 0;
  // An intercept below the graph launch is not a negative latency.
  g.rw_fixed_s = 0.2e-6;
  EXPECT_NEAR(t(2), 1e6 / bw + 0.5e-6, 1e-15);
  // Nothing from device memory (all of it an L2 hit): the floor formula, no fixed cost.
  k.l2_reuse_bytes = k.bytes;
  EXPECT_NEAR(t(2), 0.3e-6 + 0.5e-6, 1e-15);
  k.l2_reuse_bytes = 0;
  // Only the other line known: the floor formula for this kernel.
  g.rw_fixed_s = 0;
  EXPECT_NEAR(t(2), 1e6 / bw + 0.3e-6 + 0.26e-6 + 0.5e-6, 1e-15);
  EXPECT_NEAR(t(1), 1e6 / bw + 2.5e-6, 1e-15);
}

TEST(KernelCost, UnknownFixedCostsKeepTheFloorFormula) {
  const GpuCeilings g = ceilings_for("h200", false);
  EXPECT_EQ(g.stream_fixed_s, 0);
  EXPECT_EQ(g.rw_fixed_s, 0);
  const Layer2Defaults& d = layer2_defaults();
  KernelCost k;
  k.bytes = 117e6;
  const double mem2 = 117e6 / (g.mem_bw * d.bw_efficiency);
  for (int rt : {1, 2, 3}) {
    k.round_trips = rt;
    EXPECT_NEAR(predict(g, k, DType::kBF16).time_predicted_s,
                mem2 + d.kernel_floor_s + (rt - 1) * d.round_trip_s + d.launch_graph_s, 1e-15);
  }
  // The parameter list says they are unknown.
  int rows = 0;
  for (const ParameterDoc& p : describe_parameters(g)) {
    if (p.name == "stream_fixed_us" || p.name == "rw_fixed_us") {
      EXPECT_EQ(p.value, "unknown");
      ++rows;
    }
  }
  EXPECT_EQ(rows, 2);
}

TEST(KernelCost, MeasuredFileCarriesTheFixedCosts) {
  namespace fs = std::filesystem;
  hw::MeasuredCeilings m = measured_base("h200", "NVIDIA H200");
  m.read_bw = 4.65e12;
  m.launch_graph_s = 0.5e-6;
  m.stream_fixed_s = 2.4e-6;
  m.stream_bw = 4.55e12;
  m.rw_fixed_s = 2.7e-6;
  m.rw_bw = 4.1e12;
  const fs::path f = write_measured(m);
  const GpuCeilings g = ceilings_from_file("h200", f.string());
  fs::remove(f);
  EXPECT_NEAR(g.stream_fixed_s, 2.4e-6, 1e-15);
  EXPECT_NEAR(g.rw_fixed_s, 2.7e-6, 1e-15);
  // The rates stay the 4 GiB read ceiling: only the fixed terms are new.
  EXPECT_NEAR(g.mem_bw, 4.65e12, 1e-3);
  KernelCost k;
  k.bytes = 235e6;
  k.round_trips = 2;
  EXPECT_NEAR(predict(g, k, DType::kBF16).time_predicted_s, 235e6 / 4.65e12 + 2.7e-6, 1e-12);
  for (const ParameterDoc& p : describe_parameters(g)) {
    if (p.name == "rw_fixed_us") {
      EXPECT_EQ(p.value, "2.70");
    }
  }
}

// Measured H200-like ceilings with the rw probe's rate: reads at 4.6e12, and a 1:1 read/write
// stream at 3.9e12 counting both.
GpuCeilings rw_measured() {
  GpuCeilings g = ceilings_for("h200", false);
  g.bw_efficiency = 1;
  g.mem_bw = 4.6e12;
  g.launch_graph_s = 0.5e-6;
  g.round_trip_s = 0.25e-6;
  g.rw_fixed_s = 1.3e-6;
  g.rw_bw = 3.9e12;
  return g;
}

// Written bytes move at the rate that makes a 1:1 stream take bytes / rw_bw with its reads at
// the read ceiling; unsplit or unknown, everything is priced as reads.
TEST(KernelCost, WrittenBytesMoveAtTheRwRate) {
  GpuCeilings g = rw_measured();
  KernelCost k;
  k.bytes = 100e6;
  k.round_trips = 2;
  auto t = [&] { return predict(g, k, DType::kF32).time_predicted_s; };
  k.write_bytes = 50e6;  // as many written as read: the rw probe's own mix
  EXPECT_NEAR(t(), 100e6 / 3.9e12 + 1.3e-6, 1e-15);
  const double per_written = 2 / 3.9e12 - 1 / 4.6e12;  // seconds per written byte
  k.write_bytes = 25e6;
  EXPECT_NEAR(t(), 75e6 / 4.6e12 + 25e6 * per_written + 1.3e-6, 1e-15);
  k.write_bytes = 0;  // not split: all at the read ceiling
  EXPECT_NEAR(t(), 100e6 / 4.6e12 + 1.3e-6, 1e-15);
  // Reads served from L2 leave the HBM reads, not the writes.
  k.write_bytes = 50e6;
  k.l2_reuse_bytes = 10e6;
  const Prediction p = predict(g, k, DType::kF32);
  EXPECT_NEAR(p.hbm_bytes, 90e6, 1e-6);
  EXPECT_NEAR(p.time_predicted_s, 40e6 / 4.6e12 + 50e6 * per_written + 1.3e-6, 1e-15);
  EXPECT_NEAR(p.memory_s, 100e6 / 4.6e12, 1e-15);  // layer 1: every byte at the read peak
  k.l2_reuse_bytes = 60e6;                         // reads and writes would overlap
  EXPECT_THROW(predict(g, k, DType::kF32), Error);
  k.l2_reuse_bytes = 0;
  k.write_bytes = -1;
  EXPECT_THROW(predict(g, k, DType::kF32), Error);
  // rw rate unknown (datasheet ceilings, older files): writes at the read rate.
  k.write_bytes = 50e6;
  g.rw_bw = 0;
  EXPECT_NEAR(t(), 100e6 / 4.6e12 + 1.3e-6, 1e-15);
  const GpuCeilings sheet = ceilings_for("h200", false);
  const double split = predict(sheet, k, DType::kF32).time_predicted_s;
  k.write_bytes = 0;
  EXPECT_EQ(predict(sheet, k, DType::kF32).time_predicted_s, split);
}

// With the probe's points, the fixed cost is the probe's at the kernel's own size: a kernel with
// the probe's structure and read/write mix is predicted at the probe's measured time at each
// point, linearly between them, at the smallest point's time below it, and with the largest
// point's fixed cost above it.
TEST(KernelCost, ProbePointsPriceTheFixedCostAtTheKernelsSize) {
  GpuCeilings g = rw_measured();
  g.rw_bw = 4.0e12;
  // Fixed costs (time - bytes / 4e12): 1.55, 1.6 and 1.4 us.
  g.rw_points = {{1e6, 1.8e-6}, {8e6, 3.6e-6}, {256e6, 65.4e-6}};
  KernelCost k;
  k.round_trips = 2;
  auto t = [&](double bytes, int round_trips = 2) {
    k.bytes = bytes;
    k.write_bytes = bytes / 2;  // 1:1, so the bytes cost exactly bytes / rw_bw
    k.round_trips = round_trips;
    return predict(g, k, DType::kF32).time_predicted_s;
  };
  EXPECT_NEAR(t(1e6), 1.8e-6, 1e-15);
  EXPECT_NEAR(t(8e6), 3.6e-6, 1e-15);
  EXPECT_NEAR(t(256e6), 65.4e-6, 1e-15);
  EXPECT_NEAR(t(4.5e6), 4.5e6 / 4e12 + 1.575e-6, 1e-15);  // halfway between 1.55 and 1.6
  EXPECT_NEAR(t(132e6), 132e6 / 4e12 + 1.5e-6, 1e-15);    // halfway between 1.6 and 1.4
  EXPECT_NEAR(t(0.1e6), 1.8e-6, 1e-15);                   // below: the smallest point's time
  EXPECT_NEAR(t(40960), 1.8e-6, 1e-15);
  EXPECT_NEAR(t(512e6), 512e6 / 4e12 + 1.4e-6, 1e-15);  // above: the largest point's fixed cost
  EXPECT_NEAR(t(8e6, 3), 3.6e-6 + 0.25e-6, 1e-15);      // a third phase: one round trip more
  t(40960);
  EXPECT_EQ(predict(g, k, DType::kF32).limiter, Limiter::kOverhead);
  // Points without the probe's rate cannot be split into bytes and fixed cost: the intercept.
  g.rw_bw = 0;
  k.write_bytes = 0;
  k.bytes = 8e6;
  k.round_trips = 2;
  EXPECT_NEAR(predict(g, k, DType::kF32).time_predicted_s, 8e6 / 4.6e12 + 1.3e-6, 1e-15);
  g.rw_bw = 4.0e12;
  // A read-only kernel uses the stream probe: no stream points here, so its intercept.
  g.stream_fixed_s = 1.4e-6;
  k.round_trips = 1;
  EXPECT_NEAR(predict(g, k, DType::kF32).time_predicted_s, 8e6 / 4.6e12 + 1.4e-6, 1e-15);
  g.stream_bw = 4.5e12;
  g.stream_points = {{1e6, 1.75e-6}};  // one point: its fixed cost at every size above it
  EXPECT_NEAR(predict(g, k, DType::kF32).time_predicted_s, 8e6 / 4.6e12 + (1.75e-6 - 1e6 / 4.5e12),
              1e-15);
  // Points must be sorted by distinct sizes.
  g.rw_points = {{8e6, 3.6e-6}, {1e6, 1.8e-6}};
  EXPECT_THROW(predict(g, k, DType::kF32), Error);
}

TEST(KernelCost, MeasuredFileCarriesTheProbePointsAndRates) {
  namespace fs = std::filesystem;
  hw::MeasuredCeilings m = measured_base("h200", "NVIDIA H200");
  m.read_bw = 4.6e12;
  m.launch_graph_s = 0.5e-6;
  m.rw_fixed_s = 1.3e-6;
  m.rw_bw = 4.0e12;
  m.rw_points = {{8e6, 3.6e-6}, {1e6, 1.8e-6}};
  const fs::path f = write_measured(m);
  const GpuCeilings g = ceilings_from_file("h200", f.string());
  fs::remove(f);
  EXPECT_NEAR(g.rw_bw, 4.0e12, 1);
  EXPECT_EQ(g.stream_bw, 0);
  ASSERT_EQ(g.rw_points.size(), 2u);
  EXPECT_DOUBLE_EQ(g.rw_points[0].bytes, 1e6);  // read back sorted
  KernelCost k;
  k.bytes = 1e6;
  k.write_bytes = 0.5e6;
  k.round_trips = 2;
  EXPECT_NEAR(predict(g, k, DType::kF32).time_predicted_s, 1.8e-6, 1e-15);
  int rows = 0;
  for (const ParameterDoc& p : describe_parameters(g)) {
    if (p.name == "rw_points") {
      EXPECT_NE(p.value.find("1 MiB"), std::string::npos) << p.value;
      ++rows;
    }
    if (p.name == "stream_points") {
      EXPECT_EQ(p.value, "unknown");
      ++rows;
    }
    if (p.name == "rw_gbps") {
      EXPECT_EQ(p.value, "4000");
      ++rows;
    }
  }
  EXPECT_EQ(rows, 3);
}

// A kernel launched without PDL (cuBLASLt) is priced with the stream probe launched plainly, at
// its own size, at any round_trips (one round trip per phase beyond the probe's one); a PDL
// kernel is not affected by that probe.
TEST(KernelCost, NonPdlKernelsUseTheSerialProbe) {
  GpuCeilings g = rw_measured();
  g.stream_fixed_s = 1.4e-6;
  g.stream_bw = 4.5e12;
  g.stream_points = {{1e6, 1.75e-6}, {256e6, 58.3e-6}};
  g.rw_bw = 4.0e12;
  g.rw_points = {{1e6, 1.8e-6}, {256e6, 65.4e-6}};
  g.stream_serial_fixed_s = 3.0e-6;
  g.stream_serial_bw = 4.4e12;
  // Fixed costs (time - bytes / 4.4e12): 3.2 and 3.0 us.
  g.stream_serial_points = {{1e6, 1e6 / 4.4e12 + 3.2e-6}, {256e6, 256e6 / 4.4e12 + 3.0e-6}};
  KernelCost k;
  k.bytes = 128.5e6;  // halfway: fixed cost 3.1 us
  k.pdl = false;
  const double mem2 = 128.5e6 / 4.6e12;
  auto t = [&](int round_trips) {
    k.round_trips = round_trips;
    return predict(g, k, DType::kF32);
  };
  EXPECT_NEAR(t(1).time_predicted_s, mem2 + 3.1e-6, 1e-15);
  EXPECT_NEAR(t(1).latency_s, 3.1e-6 - 0.5e-6, 1e-15);
  EXPECT_NEAR(t(2).time_predicted_s, mem2 + 3.1e-6 + 0.25e-6, 1e-15);  // stores: one round trip
  EXPECT_NEAR(t(3).time_predicted_s, mem2 + 3.1e-6 + 2 * 0.25e-6, 1e-15);
  k.bytes = 40960;  // below the smallest point: that point's time, its bytes at the probe's rate
  EXPECT_NEAR(t(1).time_predicted_s, 1e6 / 4.4e12 + 3.2e-6 + 40960 / 4.6e12 - 40960 / 4.4e12,
              1e-15);
  // Points without a rate: the serial intercept.
  g.stream_serial_bw = 0;
  k.bytes = 128.5e6;
  EXPECT_NEAR(t(1).time_predicted_s, mem2 + 3.0e-6, 1e-15);
  g.stream_serial_bw = 4.4e12;
  // A PDL kernel keeps the PDL probes.
  k.pdl = true;
  const double e1 = 1.75e-6 - 1e6 / 4.5e12, e256 = 58.3e-6 - 256e6 / 4.5e12;
  EXPECT_NEAR(t(1).time_predicted_s, mem2 + (e1 + e256) / 2, 1e-15);  // halfway between them
  // Nothing from device memory: the floor formula, as for a PDL kernel.
  k.pdl = false;
  k.l2_reuse_bytes = k.bytes;
  g.l2_resident_fraction = 1;
  g.l2_bytes = 1e9;
  EXPECT_NEAR(t(2).time_predicted_s, g.kernel_floor_s + 0.5e-6, 1e-15);
  k.l2_reuse_bytes = 0;
  // Unsorted serial points are rejected like the others.
  g.stream_serial_points = {{8e6, 5e-6}, {1e6, 3e-6}};
  EXPECT_THROW(t(1), Error);
}

// Without the serial probe (older runs and files) a non-PDL kernel is priced exactly as a PDL
// one, whichever of the PDL probes, line or floor applies.
TEST(KernelCost, NonPdlKernelsWithoutTheSerialProbeArePricedAsBefore) {
  GpuCeilings measured = rw_measured();
  measured.rw_points = {{1e6, 1.8e-6}, {256e6, 65.4e-6}};
  measured.stream_fixed_s = 1.4e-6;
  for (const GpuCeilings& g : {measured, ceilings_for("h200", false)}) {
    for (int rt : {0, 1, 2, 3}) {
      for (double bytes : {0.0, 40960.0, 3.4e7}) {
        KernelCost k;
        k.bytes = bytes;
        k.flops = 1e9;
        k.tiles = 32;
        k.round_trips = rt;
        const double pdl = predict(g, k, DType::kBF16).time_predicted_s;
        k.pdl = false;
        EXPECT_DOUBLE_EQ(predict(g, k, DType::kBF16).time_predicted_s, pdl)
            << g.source << " rt " << rt << " bytes " << bytes;
      }
    }
  }
}

TEST(KernelCost, MeasuredFileCarriesTheSerialProbe) {
  namespace fs = std::filesystem;
  hw::MeasuredCeilings m = measured_base("h200", "NVIDIA H200");
  m.read_bw = 4.6e12;
  m.launch_graph_s = 0.5e-6;
  m.stream_serial_fixed_s = 3.0e-6;
  m.stream_serial_bw = 4.4e12;
  m.stream_serial_points = {{8e6, 8e6 / 4.4e12 + 3.1e-6}, {1e6, 1e6 / 4.4e12 + 3.2e-6}};
  const fs::path f = write_measured(m);
  const GpuCeilings g = ceilings_from_file("h200", f.string());
  fs::remove(f);
  EXPECT_NEAR(g.stream_serial_fixed_s, 3.0e-6, 1e-15);
  EXPECT_NEAR(g.stream_serial_bw, 4.4e12, 1);
  ASSERT_EQ(g.stream_serial_points.size(), 2u);
  EXPECT_DOUBLE_EQ(g.stream_serial_points[0].bytes, 1e6);  // read back sorted
  KernelCost k;
  k.bytes = 8e6;
  k.pdl = false;
  EXPECT_NEAR(predict(g, k, DType::kF32).time_predicted_s, 8e6 / 4.6e12 + 3.1e-6, 1e-12);
  int rows = 0;
  for (const ParameterDoc& p : describe_parameters(g)) {
    if (p.name == "stream_serial_fixed_us") {
      EXPECT_EQ(p.value, "3.00");
      ++rows;
    }
    if (p.name == "stream_serial_points") {
      EXPECT_NE(p.value.find("1 MiB"), std::string::npos) << p.value;
      ++rows;
    }
  }
  EXPECT_EQ(rows, 2);
  for (const ParameterDoc& p : describe_parameters(ceilings_for("h200", false))) {
    if (p.name == "stream_serial_fixed_us" || p.name == "stream_serial_points") {
      EXPECT_EQ(p.value, "unknown");
    }
  }
}

TEST(KernelCost, DeviceNameLookup) {
  EXPECT_EQ(gpu_id_for_device("NVIDIA H100 80GB HBM3"), "h100-sxm");
  EXPECT_EQ(gpu_id_for_device("NVIDIA H200"), "h200");
  EXPECT_THROW(gpu_id_for_device("NVIDIA T4"), Error);
}

// The warp-specialized prefill kernel's score tiles, by hand: 128 query rows per CTA, 128 keys per
// tile, the causal diagonal tile computed in full.
TEST(KernelCost, PrefillWsScoreTilesFollowTheKernelsTiles) {
  // q_len 300 from an empty cache: query tiles [0,128), [128,256), [256,300) see 128, 256 and
  // 300 keys: 1 + 2 + 3 tiles.
  EXPECT_EQ(prefill_ws_score_tiles(300, 300), 6);
  // 100 new tokens after a 900-token prefix: one query tile seeing 1000 keys: 8 tiles.
  EXPECT_EQ(prefill_ws_score_tiles(100, 1000), 8);
  EXPECT_EQ(prefill_ws_score_tiles(0, 50), 0);
  EXPECT_THROW(prefill_ws_score_tiles(10, 5), Error);
  EXPECT_THROW(prefill_ws_loop_sass(96), Error);

  // Two heads of the q_len 300 sequence: 12 tiles; per tile 8 consumer warps run the loop body.
  const PrefillWsLoopSass loop = prefill_ws_loop_sass(128);
  const NonMmaWork w = prefill_ws_work({{300, 300}}, 2, 128);
  EXPECT_DOUBLE_EQ(w.mma_flops, 12.0 * 4 * 128 * 128 * 128);  // S and P·V of 128 x 128 x 128
  EXPECT_DOUBLE_EQ(w.sfu_ops, 12.0 * 8 * 32 * loop.mufu_ex2);
  EXPECT_DOUBLE_EQ(w.fp32_ops, 12.0 * 8 * 32 * loop.fp32);
  EXPECT_DOUBLE_EQ(w.issue_slots, 12.0 * 8 * loop.instructions);
  EXPECT_EQ(w.mma_groups, 2);
}

// Non-MMA work on the H100 SXM datasheet (132 SMs, 1980 MHz boost clock, per SM per clock 16
// MUFU, 128 FP32, 4 issued warp instructions; bf16 989.4e12 at compute_efficiency 0.8): the
// busiest non-tensor pipe, added to the MMAs with one warpgroup and with two (the overlap across
// groups the ping-pong intends is not what was measured).
TEST(KernelCost, NonMmaWorkIsPricedAtThePipesRatesAndAddedToTheMmas) {
  const GpuCeilings g = ceilings_for("h100-sxm", false);
  const Layer2Defaults d = layer2_defaults();
  ASSERT_DOUBLE_EQ(g.sm_clock_hz, 1980e6);
  const double sm_clocks = 132 * 1980e6;
  KernelCost k;
  k.flops = 1.0e12;  // what the op must do
  k.non_mma.mma_flops = 1.1e12;
  k.non_mma.sfu_ops = 2.0e10;     // 2e10 / (16 · sm_clocks)
  k.non_mma.fp32_ops = 8.0e10;    // 8e10 / (128 · sm_clocks): less
  k.non_mma.issue_slots = 6.0e9;  // 6e9 / (4 · sm_clocks): the busiest
  const double mma = 1.1e12 / (989.4e12 * d.compute_efficiency);
  const double x =
      std::max({2.0e10 / (16 * sm_clocks), 8.0e10 / (128 * sm_clocks), 6.0e9 / (4 * sm_clocks)});
  ASSERT_GT(x, mma);  // the non-MMA work is the larger here
  k.non_mma.mma_groups = 2;
  Prediction p = predict(g, k, DType::kBF16);
  EXPECT_NEAR(p.non_mma_s, x, x * kRel);
  EXPECT_NEAR(p.time_predicted_s, mma + x + d.launch_graph_s, 1e-12);
  EXPECT_EQ(p.limiter, Limiter::kCompute);
  EXPECT_NEAR(p.compute_s, 1.0e12 / 989.4e12, 1e-15);  // layer 1: the op's FLOPs at the peak
  k.non_mma.mma_groups = 1;
  p = predict(g, k, DType::kBF16);
  EXPECT_NEAR(p.time_predicted_s, mma + x + d.launch_graph_s, 1e-12);
  // Without non-MMA work the executed MMAs alone price compute.
  k.non_mma = {.mma_flops = 1.1e12};
  EXPECT_NEAR(predict(g, k, DType::kBF16).time_predicted_s, mma + d.launch_graph_s, 1e-12);
  // A GPU whose non-tensor rates are unknown cannot price it.
  k.non_mma.sfu_ops = 1;
  EXPECT_THROW(predict(ceilings_for("a100-sxm-80gb", false), k, DType::kBF16), Error);
  k.non_mma.mma_groups = 0;
  EXPECT_THROW(predict(g, k, DType::kBF16), Error);
}
