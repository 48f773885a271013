#include "roofline/parameters.h"

#include <fmt/format.h>

#include "roofline/kernel_cost.h"

namespace ceiling::roofline {

const Layer2Defaults& layer2_defaults() {
  static const Layer2Defaults d;
  return d;
}

const ModelAssumptions& model_assumptions() {
  static const ModelAssumptions a;
  return a;
}

std::vector<ParameterDoc> describe_parameters(const GpuCeilings& g) {
  const char* measured_or = g.measured ? "measured: " : "";
  std::vector<ParameterDoc> r;
  auto add = [&](std::string name, std::string value, std::string source) {
    r.push_back({std::move(name), std::move(value), std::move(source)});
  };
  if (g.measured) {
    add("bw_efficiency", "1", "measured ceilings are achievable rates already");
    add("compute_efficiency", "1", "measured ceilings are achievable rates already");
  } else {
    add("bw_efficiency", fmt::format("{:.2f}", g.bw_efficiency),
        "streaming read / datasheet bandwidth seen on H100 SXM (3.04/3.35 = 0.91) and H200 "
        "(4.20/4.8 = 0.88), docs MEASURING.md; assumed for other GPUs");
    add("compute_efficiency", fmt::format("{:.2f}", g.compute_efficiency),
        "cuBLAS bf16 GEMM 8192^3 / datasheet dense rate seen on H100 SXM (793/989) and H200 "
        "(790/989); assumed for other GPUs and dtypes");
  }
  add("nvlink_efficiency", fmt::format("{:.2f}", g.nvlink_efficiency),
      "assumed: NCCL all-reduce bus bandwidth reaches ~80% of the NVLink per-direction rate on "
      "large messages; not measured here");
  add("launch_eager_us", fmt::format("{:.2f}", g.launch_eager_s * 1e6),
      std::string(measured_or) +
          (g.measured ? "empty kernels launched back to back on a stream"
                      : "`ceiling probe` on H100 SXM, 2026-11-21 (data/ceilings/h100-sxm.json: "
                        "3.12 us; H200: 3.14 us); use --ceilings measured for this GPU's own"));
  add("launch_graph_us", fmt::format("{:.2f}", g.launch_graph_s * 1e6),
      std::string(measured_or) +
          (g.measured ? "empty kernels replayed from one CUDA graph"
                      : "`ceiling probe` on H100 SXM, 2026-11-21 (0.79 us per empty-kernel graph "
                        "node; H200: 0.50 us)"));
  add("kernel_floor_us", fmt::format("{:.2f}", g.kernel_floor_s * 1e6),
      std::string(measured_or) +
          (g.measured ? "tiny memory-touching kernel in a graph minus the empty-kernel cost"
                      : "`ceiling probe` on H100 SXM, 2026-11-21: a tiny memory-touching kernel "
                        "node costs 1.40 us, 0.61 us more than an empty one (H200: 0.86 us)"));
  add("round_trip_us", fmt::format("{:.2f}", g.round_trip_s * 1e6),
      "one more dependent cold read inside a kernel: measured by `ceiling bench` at the start of "
      "each run (a graph of one-CTA kernels reading an index, then the element it names, minus "
      "the one-read kernel); assumed 0.7 us (about Hopper's loaded HBM latency) otherwise");
  const auto fixed = [&](const char* name, double v, const char* kernel) {
    add(name, v > 0 ? fmt::format("{:.2f}", v * 1e6) : "unknown",
        v > 0 ? fmt::format("measured: intercept of per-launch time against bytes of a grid-wide "
                            "{} kernel, back-to-back PDL launches in a CUDA graph (its graph node "
                            "included: a memory-bound kernel costs bytes / bandwidth + this); "
                            "replaces kernel_floor",
                            kernel)
              : std::string("not measured for these ceilings (`ceiling bench` and newer "
                            "`ceiling probe` files measure it); kernel_floor applies instead"));
  };
  fixed("stream_fixed_us", g.stream_fixed_s, "streaming-read (round_trips <= 1)");
  fixed("rw_fixed_us", g.rw_fixed_s, "read -> block reduce -> write (round_trips >= 2)");
  add("stream_serial_fixed_us",
      g.stream_serial_fixed_s > 0 ? fmt::format("{:.2f}", g.stream_serial_fixed_s * 1e6)
                                  : "unknown",
      g.stream_serial_fixed_s > 0
          ? std::string("measured: intercept of per-launch time against bytes of the "
                        "streaming-read probe launched without PDL in a CUDA graph (each launch "
                        "waits for the previous one to drain); prices kernels launched without "
                        "PDL (cuBLASLt) at any round_trips, plus (round_trips - 1) round trips")
          : std::string("not measured for these ceilings (`ceiling bench` and newer `ceiling "
                        "probe` files measure it); kernels launched without PDL are priced as "
                        "PDL ones"));
  const auto points = [&](const char* name, const std::vector<ProbePoint>& pts, double rate,
                          const char* line) {
    if (pts.empty() || !(rate > 0)) {
      add(name, "unknown",
          fmt::format("not measured for these ceilings; the {} intercept (if known) is the fixed "
                      "cost at every size",
                      line));
      return;
    }
    std::string v;
    for (const ProbePoint& p : pts)
      v += fmt::format("{}{:.0f} MiB: {:.2f} us", v.empty() ? "" : ", ", p.bytes / 1048576,
                       p.seconds * 1e6);
    add(name, v,
        fmt::format("measured: the same probe's per-launch times; the fixed cost at a kernel's "
                    "size is a point's time minus its bytes at the probe's rate, linear between "
                    "points and the largest point's above them; below the smallest point the "
                    "time is held at that point's; replaces the {} intercept",
                    line));
  };
  points("stream_points", g.stream_points, g.stream_bw, "stream_fixed");
  points("rw_points", g.rw_points, g.rw_bw, "rw_fixed");
  points("stream_serial_points", g.stream_serial_points, g.stream_serial_bw, "stream_serial_fixed");
  add("rw_gbps", g.rw_bw > 0 ? fmt::format("{:.0f}", g.rw_bw / 1e9) : "unknown",
      g.rw_bw > 0 ? std::string("measured: the rw probe's rate (reads + writes, one byte written "
                                "per byte read); written bytes move at the rate that makes such a "
                                "stream take bytes / rw_gbps with its reads at the read ceiling")
                  : std::string("not measured for these ceilings: written bytes are priced at the "
                                "read bandwidth"));
  add("sm_clock_mhz", g.sm_clock_hz > 0 ? fmt::format("{:.0f}", g.sm_clock_hz / 1e6) : "unknown",
      g.measured ? "measured ceilings' SM clock (nvidia-smi when measured; a `ceiling bench` run "
                   "records its own in \"clocks\"), else the GPU table's boost clock; prices "
                   "non-MMA work (the per-clock rates below)"
                 : "the GPU table's boost clock (src/hw/gpu_table.cpp); prices non-MMA work (the "
                   "per-clock rates below)");
  add("sm_pipes_per_clk",
      g.issue_per_clk > 0 ? fmt::format("MUFU {:.0f}, FP32 {:.0f}, issue {:.0f}", g.sfu_per_clk,
                                        g.fp32_per_clk, g.issue_per_clk)
                          : "unknown",
      "per SM per clock: special-function results, FP32 add/mul/FMA results, warp instructions "
      "issued (CUDA C++ Programming Guide throughput table, compute capability 9.0; four "
      "schedulers of one instruction per clock); price a kernel's non-MMA work (flash "
      "attention's softmax), overlapped with its MMAs as its warpgroups take turns");
  add("allreduce_latency_us", fmt::format("{:.1f}", g.allreduce_latency_s * 1e6),
      g.allreduce_latency_s != layer2_defaults().allreduce_latency_s
          ? "measured: `ceiling bench allreduce` (allreduce_us of the measured ceilings): one "
            "decode-size all-reduce across this host's GPUs, the faster of NCCL and the one-shot "
            "P2P kernel"
          : "assumed: fixed cost of a small NCCL all-reduce within one NVLink node; `ceiling "
            "bench allreduce --update-ceilings` measures it");
  add("l2_resident_fraction", fmt::format("{:.2f}", g.l2_resident_fraction),
      "assumed: a just-written activation no larger than this fraction of L2 is read back from "
      "L2, not HBM");
  add("gemm_tile", fmt::format("{}x{}", g.tile_m, g.tile_n),
      "output tile for wave quantization (a common Hopper cuBLAS/CUTLASS bf16 tile); one CTA per "
      "SM at a time");
  const ModelAssumptions& a = model_assumptions();
  add("memory_reserve_fraction", fmt::format("{:.2f}", a.memory_reserve_fraction),
      "device memory kept for activations, workspace and the CUDA context (vLLM's default "
      "gpu_memory_utilization 0.9)");
  add("kv_block_size", fmt::format("{}", a.kv_block_size),
      "assumed: the KV cache is allocated in blocks of 16 tokens (vLLM's default block size); "
      "a sequence's KV is rounded up to whole blocks");
  return r;
}

}  // namespace ceiling::roofline
