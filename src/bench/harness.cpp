#include "bench/harness.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <regex>

#include "bench/case.h"
#include "bench/ceilings.h"
#include "bench/device_util.h"
#include "bench/run_info.h"
#include "bench/timing.h"
#include "core/check.h"
#include "roofline/kernel_cost.h"

namespace ceiling::bench {
namespace {

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// Datasheet layer-2 parameters for this GPU with the rates replaced by the ones just measured.
nlohmann::json run_case(KernelCase& c, const BenchOptions& opt, const roofline::GpuCeilings& gpu,
                        const MeasuredCeilings& m, size_t rotate_bytes, cudaStream_t s) {
  nlohmann::json j;
  j["op"] = c.op();
  j["shape"] = c.shape();
  j["dtype"] = c.dtype();
  j["params"] = c.params();
  const int copies = copies_for(c.set_bytes(), rotate_bytes);
  c.setup(copies, opt.seed, s);
  const CheckResult chk = c.check(s);
  j["max_rel_err"] =
      std::isfinite(chk.max_rel_err) ? nlohmann::json(chk.max_rel_err) : nlohmann::json("inf");
  j["tolerance"] = chk.tolerance;
  j["check_detail"] = chk.detail;
  j["passed"] = chk.passed();

  TimingOptions topt;
  topt.reps = opt.reps;
  const Timing t = time_case(c, copies, topt, s);
  const Cost cost = c.cost();
  const double sec = t.median_ms * 1e-3;
  j["time_ms_median"] = t.median_ms;
  j["time_ms_min"] = t.min_ms;
  j["time_ms_max"] = t.max_ms;
  j["reps"] = t.reps;
  j["runs_per_replay"] = t.per_rep;
  j["input_sets"] = copies;
  j["bytes"] = cost.bytes;
  j["write_bytes"] = cost.write_bytes;
  j["tiles"] = cost.tiles;
  j["flops"] = cost.flops;
  j["math"] = std::string(dtype_name(cost.math));
  j["launches"] = cost.launches;
  j["round_trips"] = cost.round_trips;
  j["pdl"] = cost.pdl;
  j["mma_flops"] = cost.non_mma.mma_flops;
  j["sfu_ops"] = cost.non_mma.sfu_ops;
  j["fp32_ops"] = cost.non_mma.fp32_ops;
  j["issue_slots"] = cost.non_mma.issue_slots;
  j["mma_groups"] = cost.non_mma.mma_groups;
  j["dispatched"] = c.dispatched();
  j["gbps"] = cost.bytes / sec / 1e9;
  j["tflops"] = cost.flops / sec / 1e12;
  j["pct_read_bw"] = 100.0 * cost.bytes / sec / (m.read_gbps * 1e9);
  j["pct_peak_compute"] = 100.0 * cost.flops / sec / (m.bf16_gemm_tflops * 1e12);

  roofline::KernelCost kc;
  kc.flops = cost.flops;
  kc.bytes = cost.bytes;
  kc.write_bytes = cost.write_bytes;
  kc.tiles = cost.tiles;
  kc.launches = cost.launches;
  kc.round_trips = cost.round_trips;
  kc.pdl = cost.pdl;
  kc.non_mma = cost.non_mma;
  const roofline::Prediction p = roofline::predict(gpu, kc, cost.math, true);
  j["predicted_ms"] = p.time_predicted_s * 1e3;
  j["roofline_ms"] = p.time_roofline_s * 1e3;
  j["predicted_limiter"] = std::string(roofline::limiter_name(p.limiter));
  j["gap"] = t.median_ms / (p.time_predicted_s * 1e3);  // measured / predicted
  j["baseline_name"] = c.baseline_name();
  j["baseline_ms"] = nullptr;  // filled by bench/torch_baseline.py --merge
  j["speedup_vs_baseline"] = nullptr;
  return j;
}

// `path` replaced by `j` in one step (a temporary beside it, then a rename): a reader or a kill
// mid-write never sees half a file.
void write_json_atomically(const std::string& path, const nlohmann::json& j) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    CEILING_ENSURE(f.good(), "bench kernels: cannot write {}", tmp);
    f << j.dump(1) << "\n";
    CEILING_ENSURE(f.good(), "bench kernels: writing {} failed", tmp);
  }
  CEILING_ENSURE(std::rename(tmp.c_str(), path.c_str()) == 0,
                 "bench kernels: cannot rename {} to {}", tmp, path);
}

}  // namespace

int run_kernel_bench(const BenchOptions& opt) {
  const std::regex re(opt.filter);
  CaseList cases = all_cases();
  std::vector<std::unique_ptr<KernelCase>> selected;
  for (auto& c : cases)
    if (std::regex_search(c->op() + " " + c->shape(), re)) selected.push_back(std::move(c));
  if (opt.list) {
    for (const auto& c : selected) fmt::print("{:<22} {}\n", c->op(), c->shape());
    return 0;
  }
  CEILING_ENSURE(!selected.empty(), "bench kernels: no case matches --filter '{}'", opt.filter);

  cudaStream_t s = nullptr;
  CEILING_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  nlohmann::json run;
  run["tool"] = "ceiling bench kernels";
  run["date"] = utc_now();
  run["git_sha"] = git_sha();
  const nlohmann::json dev = device_info();
  run["gpu"] = dev.value("gpu", "unknown");
  run["driver"] = dev.value("driver", "unknown");
  run["device"] = dev;
  run["clocks"] = clocks();
  fmt::print("ceiling bench kernels: {} ({}), driver {}, git {}\n", run["gpu"].get<std::string>(),
             dev.value("sm_count", 0), run["driver"].get<std::string>(),
             run["git_sha"].get<std::string>());
  const MeasuredCeilings m =
      measure_ceilings(s, opt.quick_ceilings ? size_t{1} << 30 : size_t{4} << 30);
  run["clocks_after_ceilings"] = clocks();
  run["measured_ceilings"] = m.to_json();
  fmt::print(
      "measured: read {:.0f} GB/s, bf16 GEMM {:.0f} TFLOP/s, graph launch {:.2f} us, small kernel "
      "{:.2f} us, grid-wide fixed {:.2f} us stream / {:.2f} us rw / {:.2f} us stream without PDL "
      "({:.0f} / {:.0f} / {:.0f} GB/s)\n",
      m.read_gbps, m.bf16_gemm_tflops, m.launch_graph_us, m.small_kernel_us,
      m.fixed.stream.fixed_us, m.fixed.rw.fixed_us, m.fixed.stream_serial.fixed_us,
      m.fixed.stream.gbps, m.fixed.rw.gbps, m.fixed.stream_serial.gbps);
  const roofline::GpuCeilings gpu = gpu_ceilings(dev, m);
  run["roofline"] = {{"gpu_id", gpu.gpu_id},
                     {"layer", 2},
                     {"launch_graph_us", gpu.launch_graph_s * 1e6},
                     {"kernel_floor_us", gpu.kernel_floor_s * 1e6},
                     {"round_trip_us", gpu.round_trip_s * 1e6},
                     {"stream_fixed_us", gpu.stream_fixed_s * 1e6},
                     {"rw_fixed_us", gpu.rw_fixed_s * 1e6},
                     {"stream_serial_fixed_us", gpu.stream_serial_fixed_s * 1e6},
                     {"fp32_tflops", gpu.fp32_flops / 1e12}};
  run["reps"] = opt.reps;
  run["min_replay_us"] = TimingOptions{}.min_rep_us;
  const size_t rotate = 4 * l2_bytes();
  run["rotation_bytes"] = rotate;

  fmt::print("{:<22} {:<34} {:>10} {:>8} {:>6} {:>7} {:>10} {:>6} {:>9} {}\n", "op", "shape",
             "median_us", "GB/s", "%BW", "TFLOP/s", "pred_us", "gap", "rel_err", "check");
  bool all_ok = true;
  run["cases_total"] = selected.size();
  run["cases"] = nlohmann::json::array();
  // Written after every case ("complete": false until the last), so a run that is stopped or
  // times out keeps what it measured.
  const auto save = [&](bool complete) {
    if (opt.out.empty()) return;
    run["complete"] = complete;
    write_json_atomically(opt.out, run);
  };
  save(false);
  for (auto& c : selected) {
    nlohmann::json j;
    try {
      j = run_case(*c, opt, gpu, m, rotate, s);
    } catch (const Error& e) {
      j = {{"op", c->op()},
           {"shape", c->shape()},
           {"dtype", c->dtype()},
           {"passed", false},
           {"error", e.what()}};
      fmt::print("{:<22} {:<34} ERROR {}\n", c->op(), c->shape(), e.what());
      cudaGetLastError();
    }
    c.reset();  // frees the case's device memory
    all_ok = all_ok && j.value("passed", false);
    if (j.contains("time_ms_median")) {
      const double rel = j["max_rel_err"].is_number() ? j["max_rel_err"].get<double>() : INFINITY;
      fmt::print(
          "{:<22} {:<34} {:>10.2f} {:>8.0f} {:>6.1f} {:>7.2f} {:>10.2f} {:>6.2f} {:>9.2e} {}\n",
          j["op"].get<std::string>(), j["shape"].get<std::string>(),
          j["time_ms_median"].get<double>() * 1e3, j["gbps"].get<double>(),
          j["pct_read_bw"].get<double>(), j["tflops"].get<double>(),
          j["predicted_ms"].get<double>() * 1e3, j["gap"].get<double>(), rel,
          j["passed"].get<bool>() ? "ok" : "FAIL " + j["check_detail"].get<std::string>());
    }
    std::fflush(stdout);
    run["cases"].push_back(std::move(j));
    save(false);
  }
  run["clocks_end"] = clocks();
  cudaStreamDestroy(s);
  save(true);
  if (!opt.out.empty()) fmt::print("wrote {}\n", opt.out);
  return all_ok ? 0 : 1;
}

}  // namespace ceiling::bench
