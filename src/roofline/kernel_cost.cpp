#include "roofline/kernel_cost.h"

#include <algorithm>
#include <cmath>

#include "core/status.h"
#include "hw/gpu_spec.h"
#include "hw/measured.h"
#include "roofline/parameters.h"

namespace ceiling::roofline {

std::string_view limiter_name(Limiter l) {
  switch (l) {
    case Limiter::kCompute:
      return "compute";
    case Limiter::kMemory:
      return "memory";
    case Limiter::kOverhead:
      return "overhead";
    case Limiter::kCommunication:
      return "communication";
  }
  return "?";
}

double GpuCeilings::peak(DType math) const {
  double p = 0;
  const char* path = "";
  switch (math) {
    case DType::kBF16:
    case DType::kF16:
      p = bf16_flops;
      path = "bf16 tensor";
      break;
    case DType::kF8E4M3:
    case DType::kF8E5M2:
      p = fp8_flops;
      path = "fp8 tensor";
      break;
    case DType::kI8:
      p = int8_ops;
      path = "int8 tensor";
      break;
    case DType::kF32:
      p = fp32_flops;
      path = "fp32";
      break;
    default:
      fail("no compute peak for math dtype {}", dtype_name(math));
  }
  if (!(p > 0)) fail("GPU '{}' has no {} path", gpu_id, path);
  return p;
}

namespace {

void apply_defaults(GpuCeilings& c) {
  const Layer2Defaults d = layer2_defaults();
  c.bw_efficiency = d.bw_efficiency;
  c.compute_efficiency = d.compute_efficiency;
  c.nvlink_efficiency = d.nvlink_efficiency;
  c.launch_eager_s = d.launch_eager_s;
  c.launch_graph_s = d.launch_graph_s;
  c.kernel_floor_s = d.kernel_floor_s;
  c.round_trip_s = d.round_trip_s;
  c.allreduce_latency_s = d.allreduce_latency_s;
  c.l2_resident_fraction = d.l2_resident_fraction;
  c.tile_m = d.tile_m;
  c.tile_n = d.tile_n;
}

GpuCeilings datasheet(const hw::GpuSpec& s) {
  GpuCeilings c;
  c.gpu_id = s.id;
  c.gpu_name = s.name;
  c.measured = false;
  c.source = "datasheet (src/hw/gpu_table.cpp)";
  c.sm_count = static_cast<int>(s.sm_count.value);
  c.l2_bytes = s.l2_bytes.value;
  c.memory_bytes = s.memory_bytes.value;
  c.mem_bw = s.memory_bw.value;
  c.bf16_flops = s.bf16_flops.value;
  c.fp8_flops = s.fp8_flops.value;
  c.fp4_flops = s.fp4_flops.value;
  c.int8_ops = s.int8_ops.value;
  c.fp32_flops = s.fp32_flops.value;
  c.nvlink_bw = s.nvlink_bw.value / 2;  // datasheets add both directions
  apply_defaults(c);
  return c;
}

// Measured rates replace the datasheet's and the efficiency factors become 1. Paths the probe
// does not measure are scaled by the ratio it saw on the nearest measured path: int8 and fp4 by
// fp8's (bf16's where fp8 is absent), fp32 by bf16's.
GpuCeilings apply_measured(GpuCeilings c, const hw::MeasuredCeilings& m, const std::string& path) {
  if (m.gpu_id != c.gpu_id)
    fail("{}: measured ceilings are for GPU '{}', not '{}'", path, m.gpu_id, c.gpu_id);
  const double bf16_ratio = m.bf16_gemm_flops / c.bf16_flops;
  const double fp8_ratio =
      (m.fp8_gemm_flops > 0 && c.fp8_flops > 0) ? m.fp8_gemm_flops / c.fp8_flops : bf16_ratio;
  c.measured = true;
  c.source = "measured (" + path + ", " + m.date + ")";
  c.sm_count = m.sm_count;
  c.l2_bytes = m.l2_bytes;
  c.memory_bytes = m.memory_bytes;
  c.mem_bw = m.read_bw;
  c.bf16_flops = m.bf16_gemm_flops;
  if (c.fp8_flops > 0)
    c.fp8_flops = m.fp8_gemm_flops > 0 ? m.fp8_gemm_flops : c.fp8_flops * fp8_ratio;
  c.int8_ops *= fp8_ratio;
  c.fp4_flops *= fp8_ratio;
  c.fp32_flops *= bf16_ratio;
  c.bw_efficiency = 1;
  c.compute_efficiency = 1;
  c.launch_eager_s = m.launch_eager_s;
  c.launch_graph_s = m.launch_graph_s;
  c.kernel_floor_s = std::max(0.0, m.small_kernel_s - m.launch_graph_s);
  c.stream_fixed_s = m.stream_fixed_s;  // 0 in files written before the grid-wide probes
  c.rw_fixed_s = m.rw_fixed_s;
  c.stream_bw = m.stream_bw;
  c.rw_bw = m.rw_bw;
  for (const hw::LaunchPoint& p : m.stream_points) c.stream_points.push_back({p.bytes, p.seconds});
  for (const hw::LaunchPoint& p : m.rw_points) c.rw_points.push_back({p.bytes, p.seconds});
  c.stream_serial_fixed_s = m.stream_serial_fixed_s;
  c.stream_serial_bw = m.stream_serial_bw;
  for (const hw::LaunchPoint& p : m.stream_serial_points)
    c.stream_serial_points.push_back({p.bytes, p.seconds});
  return c;
}

}  // namespace

GpuCeilings ceilings_from_file(const std::string& gpu_id, const std::string& path) {
  GpuCeilings c = datasheet(hw::gpu_by_id(gpu_id));
  return apply_measured(c, hw::load_measured_ceilings(path), path);
}

GpuCeilings ceilings_for(const std::string& gpu_id, bool measured) {
  const hw::GpuSpec& spec = hw::gpu_by_id(gpu_id);
  if (!measured) return datasheet(spec);
  auto file = hw::find_measured_ceilings_file(spec.id);
  if (!file)
    fail(
        "no measured ceilings for GPU '{}': data/ceilings/{}.json not found (run `ceiling probe "
        "--out data/ceilings/{}.json` on that GPU, or use --ceilings datasheet)",
        spec.id, spec.id, spec.id);
  return apply_measured(datasheet(spec), hw::load_measured_ceilings(*file), file->string());
}

std::string gpu_id_for_device(const std::string& cuda_device_name) {
  auto id = hw::gpu_id_for_device_name(cuda_device_name);
  if (!id)
    fail("CUDA device '{}' is not in the GPU table (see `ceiling roofline --list-gpus`)",
         cuda_device_name);
  return *id;
}

int64_t gemm_tiles(const GpuCeilings& gpu, int64_t m, int64_t n) {
  CEILING_ENSURE(m >= 0 && n >= 0 && gpu.tile_m > 0 && gpu.tile_n > 0,
                 "gemm_tiles: invalid shape {}x{} or tile {}x{}", m, n, gpu.tile_m, gpu.tile_n);
  return ((m + gpu.tile_m - 1) / gpu.tile_m) * ((n + gpu.tile_n - 1) / gpu.tile_n);
}

namespace {

// A grid-wide probe's fixed cost at `bytes`: each point's time minus its bytes at the probe's own
// fitted rate (the line's intercept plus that point's residual), linear in bytes between points
// and the largest point's above them. Below the smallest point (already less than one wave of
// CTAs) the per-launch time is held at that point's: a partial wave's time is its CTAs' latency
// chain, which does not shrink with the bytes the grid moves; the line's intercept, fitted
// mostly by large sizes, lies below it.
double probe_fixed(const std::vector<ProbePoint>& pts, double rate, double bytes) {
  const auto excess = [rate](const ProbePoint& p) { return p.seconds - p.bytes / rate; };
  if (bytes <= pts.front().bytes) return pts.front().seconds - bytes / rate;
  if (bytes >= pts.back().bytes) return excess(pts.back());
  const auto hi = std::upper_bound(pts.begin(), pts.end(), bytes,
                                   [](double b, const ProbePoint& p) { return b < p.bytes; });
  const auto lo = hi - 1;  // lo->bytes <= bytes < hi->bytes
  const double f = (bytes - lo->bytes) / (hi->bytes - lo->bytes);
  return excess(*lo) + f * (excess(*hi) - excess(*lo));
}

bool valid_points(const std::vector<ProbePoint>& pts) {
  for (size_t i = 0; i < pts.size(); ++i)
    if (!(pts[i].bytes > 0 && pts[i].seconds > 0) || (i > 0 && !(pts[i].bytes > pts[i - 1].bytes)))
      return false;
  return true;
}

// Bytes/s at which written bytes move. The rw probe moves as many bytes as it reads, at rw_bw
// counting both: b / rw_bw = (b/2) / read + (b/2) / write. Without it, writes go at the read rate.
double write_rate(const GpuCeilings& gpu, double read_bw) {
  if (gpu.rw_bw > 0) {
    const double inv = 2 / gpu.rw_bw - 1 / read_bw;
    if (inv > 0) return 1 / inv;
  }
  return read_bw;
}

// What a launched kernel pays beyond its bytes at the rate, before the graph launch is added.
// Counted as overhead (latency) in the limiter, not as memory time.
double launch_latency(const GpuCeilings& gpu, const KernelCost& k, double hbm_bytes) {
  // A kernel launched without PDL waits for its predecessor to drain and ramps up alone: the
  // plainly launched stream probe prices it, whatever its phases (there is no plain rw probe).
  // Without that probe it falls through to the PDL probes below, as before it existed.
  const bool serial = !k.pdl && ((!gpu.stream_serial_points.empty() && gpu.stream_serial_bw > 0) ||
                                 gpu.stream_serial_fixed_s > 0);
  if (serial && hbm_bytes > 0) {
    // As below; the probe has one dependent phase, so each further phase is one round trip.
    const double fixed =
        !gpu.stream_serial_points.empty() && gpu.stream_serial_bw > 0
            ? probe_fixed(gpu.stream_serial_points, gpu.stream_serial_bw, hbm_bytes)
            : gpu.stream_serial_fixed_s;
    return std::max(0.0, fixed - gpu.launch_graph_s) +
           std::max(0, k.round_trips - 1) * gpu.round_trip_s;
  }
  const bool stream = k.round_trips <= 1;
  const std::vector<ProbePoint>& pts = stream ? gpu.stream_points : gpu.rw_points;
  const double rate = stream ? gpu.stream_bw : gpu.rw_bw;
  const double line = stream ? gpu.stream_fixed_s : gpu.rw_fixed_s;
  const bool by_points = !pts.empty() && rate > 0;
  if (hbm_bytes > 0 && (by_points || line > 0)) {
    // Measured grid-wide: the probe's fixed cost is its whole per-launch cost beyond bytes / rate
    // (launch-to-first-byte, the first wave's ramp, the last wave's drain) and, since it is timed
    // as a graph node, the node cost too. The launch term below adds launch_graph back, so it is
    // taken out here: a memory-bound kernel costs exactly bytes / bw + fixed, and a compute-bound
    // one still pays its launch. A third dependent phase and beyond (the embedding's gather after
    // its index) is one round trip each: the rw probe has two.
    const double fixed = by_points ? probe_fixed(pts, rate, hbm_bytes) : line;
    return std::max(0.0, fixed - gpu.launch_graph_s) +
           std::max(0, k.round_trips - 2) * gpu.round_trip_s;
  }
  // Without the grid-wide probes: the memory stream reaches its rate only after its first loads
  // return (kernel_floor, a tiny read-only kernel's node time minus an empty one's), and each
  // further dependent phase (stores after the loads they depend on, a gather after its index)
  // adds one round trip.
  return gpu.kernel_floor_s +
         (hbm_bytes > 0 ? std::max(0, k.round_trips - 1) * gpu.round_trip_s : 0.0);
}

}  // namespace

Prediction predict(const GpuCeilings& gpu, const KernelCost& k, DType math, bool cuda_graphs) {
  // Reads served from L2 are reads: they and the writes are disjoint parts of `bytes`.
  CEILING_ENSURE(k.flops >= 0 && k.bytes >= 0 && k.nvlink_bytes >= 0 && k.tiles >= 0 &&
                     k.launches >= 0 && k.l2_reuse_bytes >= 0 && k.write_bytes >= 0 &&
                     k.l2_reuse_bytes + k.write_bytes <= k.bytes && k.round_trips >= 0,
                 "predict: invalid kernel cost (flops {}, bytes {}, write_bytes {}, l2_reuse_bytes "
                 "{}, tiles {}, launches {}, nvlink_bytes {}, round_trips {})",
                 k.flops, k.bytes, k.write_bytes, k.l2_reuse_bytes, k.tiles, k.launches,
                 k.nvlink_bytes, k.round_trips);
  CEILING_ENSURE(gpu.mem_bw > 0 && gpu.sm_count > 0, "predict: GPU '{}' has no bandwidth or SMs",
                 gpu.gpu_id);
  CEILING_ENSURE(valid_points(gpu.stream_points) && valid_points(gpu.rw_points) &&
                     valid_points(gpu.stream_serial_points),
                 "predict: GPU '{}': probe points must be positive and sorted by distinct sizes",
                 gpu.gpu_id);
  Prediction p;
  const double peak = k.flops > 0 ? gpu.peak(math) : 1.0;
  if (k.nvlink_bytes > 0 && !(gpu.nvlink_bw > 0))
    fail("GPU '{}' has no NVLink: tensor-parallel collectives are not modelled over PCIe",
         gpu.gpu_id);

  // Layer 1: the three roofs at their peaks.
  p.compute_s = k.flops / peak;
  p.memory_s = k.bytes / gpu.mem_bw;
  p.comm_s = k.nvlink_bytes > 0 ? k.nvlink_bytes / gpu.nvlink_bw : 0;
  p.time_roofline_s = std::max({p.compute_s, p.memory_s, p.comm_s});
  if (p.time_roofline_s <= 0)
    p.roofline_limiter = Limiter::kOverhead;
  else if (p.comm_s >= std::max(p.compute_s, p.memory_s))
    p.roofline_limiter = Limiter::kCommunication;
  else
    p.roofline_limiter = p.compute_s > p.memory_s ? Limiter::kCompute : Limiter::kMemory;

  // Layer 2: achievable rates, waves, L2 reuse, floor, launches.
  if (k.tiles > 0) {
    const double waves = std::ceil(static_cast<double>(k.tiles) / gpu.sm_count);
    p.wave_efficiency = static_cast<double>(k.tiles) / (waves * gpu.sm_count);
  }
  const bool l2_hit =
      k.l2_reuse_bytes > 0 && k.l2_reuse_bytes <= gpu.l2_resident_fraction * gpu.l2_bytes;
  p.hbm_bytes = k.bytes - (l2_hit ? k.l2_reuse_bytes : 0);
  const double comp2 = k.flops / (peak * gpu.compute_efficiency * p.wave_efficiency);
  const double read_bw = gpu.mem_bw * gpu.bw_efficiency;
  const double mem2 =
      (p.hbm_bytes - k.write_bytes) / read_bw + k.write_bytes / write_rate(gpu, read_bw);
  double comm2 = 0;
  if (k.nvlink_bytes > 0) comm2 = k.nvlink_bytes / (gpu.nvlink_bw * gpu.nvlink_efficiency);
  if (k.collective) comm2 += gpu.allreduce_latency_s;
  const double work = std::max({comp2, mem2, comm2});
  double t = work;
  if (k.launches > 0) {
    const double latency = launch_latency(gpu, k, p.hbm_bytes);
    p.latency_s = latency;
    t = std::max({comp2, mem2 + latency, comm2}) + k.launches * gpu.launch_graph_s;
    if (!cuda_graphs) t = std::max(t, k.launches * gpu.launch_eager_s);
  }
  p.time_predicted_s = t;
  const double overhead = t - work;
  if (comm2 >= std::max({comp2, mem2, overhead}))
    p.limiter = Limiter::kCommunication;
  else if (overhead >= std::max(comp2, mem2))
    p.limiter = Limiter::kOverhead;
  else
    p.limiter = comp2 > mem2 ? Limiter::kCompute : Limiter::kMemory;
  if (t <= 0) p.limiter = Limiter::kOverhead;
  return p;
}

}  // namespace ceiling::roofline
