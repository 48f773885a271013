// Measured ceilings of one GPU: what `ceiling probe` measures and writes to
// data/ceilings/<gpu>.json, and what `ceiling roofline --ceilings measured` reads back.
//
// File format (JSON object; every rate is decimal, bandwidths count bytes moved):
//   "format": "ceiling-measured-ceilings/1"
//   "gpu": "h100-sxm"                       the table id (hw/gpu_spec.h)
//   "device": {"name", "sm_count", "l2_bytes", "memory_bytes", "sm_clock_mhz", "mem_clock_mhz",
//              "memory_bus_bits", "compute_capability"}
//   "ceilings": {"read_gbps", "copy_gbps", "bf16_gemm_tflops", "fp8_gemm_tflops",
//                "launch_eager_us", "launch_graph_us", "small_kernel_us",
//                optional: "stream_fixed_us", "stream_gbps", "rw_fixed_us", "rw_gbps",
//                "stream_serial_fixed_us", "stream_serial_gbps",
//                "stream_points", "rw_points", "stream_serial_points"}
//   "provenance": {"date", "driver", "cuda_runtime", "cublaslt", "tool", "method": {...}}
// copy_gbps counts bytes read plus bytes written. fp8_gemm_tflops may be 0 (no fp8 on the GPU).
// The optional six are the lines fitted to grid-wide probes (per-launch time = fixed + bytes /
// rate, src/bench/ceilings.h): a streaming read, a read → reduce → write kernel whose bytes and
// rate count reads plus writes (both launched with PDL), and the streaming read launched plainly
// (stream_serial: each launch waits for the previous one to drain, as cuBLASLt's kernels do).
// Files written before they existed lack them (0 = unknown); when present they must be
// positive. The three point lists are the probes' raw measurements the
// lines were fitted to: arrays of {"bytes", "us"} (per launch; other keys ignored), positive,
// distinct sizes; read back sorted by bytes (empty = not in the file).
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ceiling::hw {

// One measured size of a grid-wide probe.
struct LaunchPoint {
  double bytes = 0;    // moved per launch
  double seconds = 0;  // per launch, graph node included
};

struct MeasuredCeilings {
  std::string gpu_id;
  // Device facts read off the device by the probe.
  std::string device_name;
  int sm_count = 0;
  double l2_bytes = 0;
  double memory_bytes = 0;
  int sm_clock_mhz = 0;
  int mem_clock_mhz = 0;
  int memory_bus_bits = 0;
  std::string compute_capability;
  // Ceilings.
  double read_bw = 0;          // bytes/s, streaming read
  double copy_bw = 0;          // bytes/s, device-to-device copy, read + write bytes
  double bf16_gemm_flops = 0;  // FLOP/s, cuBLASLt 8192^3 on random data
  double fp8_gemm_flops = 0;   // FLOP/s, 0 where the GPU has no fp8
  double launch_eager_s = 0;   // per empty kernel, stream launches back to back
  double launch_graph_s = 0;   // per empty kernel, replayed from a CUDA graph
  double small_kernel_s = 0;   // per tiny memory-touching kernel in a graph (latency floor)
  // Grid-wide probes, one line each (0 = not in the file).
  double stream_fixed_s = 0;  // intercept of the streaming-read kernel's per-launch time
  double stream_bw = 0;       // bytes/s, its slope's inverse
  double rw_fixed_s = 0;      // intercept of the read → reduce → write kernel's per-launch time
  double rw_bw = 0;           // bytes/s read + written, its slope's inverse
  double stream_serial_fixed_s = 0;  // the streaming-read kernel launched without PDL
  double stream_serial_bw = 0;
  // One all-reduce of a decode-size message across this host's GPUs (the faster of NCCL and the
  // one-shot P2P kernel at the smallest size `ceiling bench allreduce` timed); 0 = not measured.
  double allreduce_latency_s = 0;
  std::vector<LaunchPoint> stream_points;  // the points behind each line (empty = not in file)
  std::vector<LaunchPoint> rw_points;
  std::vector<LaunchPoint> stream_serial_points;
  // Provenance.
  std::string date;
  std::string driver;
  std::string cuda_runtime;
  std::string cublaslt;
  std::string tool;
  std::map<std::string, std::string> method;  // field -> how it was measured
};

// Parses and validates (every ceiling positive, except fp8 which may be 0). Throws ceiling::Error
// naming `origin` and the field.
MeasuredCeilings parse_measured_ceilings(const std::string& json_text, const std::string& origin);
MeasuredCeilings load_measured_ceilings(const std::filesystem::path& file);
std::string measured_ceilings_to_json(const MeasuredCeilings& m);

// Least-squares line through (bytes, seconds) points: seconds = fixed_s + bytes / bytes_per_s.
// bytes_per_s is 0 when the fitted slope is not positive. fixed_s may come out negative (noise);
// callers decide what to keep. Throws ceiling::Error with fewer than two distinct sizes.
struct LineFit {
  double fixed_s = 0;
  double bytes_per_s = 0;
};
LineFit fit_fixed_plus_rate(const std::vector<std::pair<double, double>>& bytes_seconds);

// data/ceilings/<gpu_id>.json: looked up under $CEILING_DATA_DIR (if set), then under `data/`
// in the current directory and its parents, then beside the running executable and its parents,
// then in <prefix>/share/ceiling for an installed <prefix>/bin/ceiling (`cmake --install`).
// nullopt when no such file exists.
std::optional<std::filesystem::path> find_measured_ceilings_file(const std::string& gpu_id);

// The same search for any repository-relative path (e.g. "scripts/plot_roofline.py").
std::optional<std::filesystem::path> find_repo_file(const std::filesystem::path& relative);

}  // namespace ceiling::hw
