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

}  // namespace

// CUDA C++ Programming Guide, "Arithmetic Instructions" (throughput per clock per multiprocessor,
// compute capability 9.0): 128 FP32 add/multiply/FMA, 16 exp2 (MUFU); four schedulers per SM,
// each issuing one warp instruction per clock (Hopper tuning guide / H100 whitepaper: 4 SM
// sub-partitions). FlashAttention-3 (Shah et al. 2024, section 3.1) quotes the same MUFU rate as
// 3.9 TFLOPS of special functions on H100 SXM5 (132 SMs at 1.83 GHz: 16 per clock per SM).
void set_sm_pipe_rates(GpuCeilings& gpu, std::string_view arch) {
  const bool hopper = arch == "hopper";
  gpu.sfu_per_clk = hopper ? 16 : 0;
  gpu.fp32_per_clk = hopper ? 128 : 0;
  gpu.issue_per_clk = hopper ? 4 : 0;
}

namespace {

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
  c.sm_clock_hz = s.boost_clock_mhz.value * 1e6;
  set_sm_pipe_rates(c, s.arch);
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
  if (m.sm_clock_mhz > 0) c.sm_clock_hz = m.sm_clock_mhz * 1e6;
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
  if (m.allreduce_latency_s > 0) c.allreduce_latency_s = m.allreduce_latency_s;
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

PrefillWsLoopSass prefill_ws_loop_sass(int head_dim) {
  // `cuobjdump -sass` of attention_prefill_sm90_ws.cu.o (nvcc 13.0, -O3, sm_90a; the kernel as of
  // git a36ac68): the consumer main loop of prefill_ws_kernel<D, BS, kTma> (the conditional
  // backward branch whose body holds the HGMMAs and the MUFU.EX2s), identical for every block
  // size and both producers. 66 MUFU.EX2 = 64 scores + the two rows' rescale factors.
  switch (head_dim) {
    case 128:
      return {.instructions = 759, .mufu_ex2 = 66, .fp32 = 260};  // 130 FADD, 128 FMUL, 2 FFMA
    case 64:
      return {.instructions = 709, .mufu_ex2 = 66, .fp32 = 228};  // 130 FADD, 96 FMUL, 2 FFMA
    default:
      fail("prefill_ws_loop_sass: no count for head_dim {} (the kernel is built for 64 and 128)",
           head_dim);
  }
}

int64_t prefill_ws_score_tiles(int q_len, int seq_len) {
  CEILING_ENSURE(q_len >= 0 && seq_len >= q_len, "prefill_ws_score_tiles: q_len {} seq_len {}",
                 q_len, seq_len);
  constexpr int kT = kPrefillWsTile;
  int64_t tiles = 0;
  for (int i0 = 0; i0 < q_len; i0 += kT) {  // as find_tile: keys [0, kv_end) for rows [i0, +kT)
    const int last_row = std::min(i0 + kT, q_len) - 1;
    const int kv_end = std::min(seq_len, seq_len - q_len + last_row + 1);
    tiles += (kv_end + kT - 1) / kT;
  }
  return tiles;
}

NonMmaWork prefill_ws_work(const std::vector<std::pair<int, int>>& seqs, int hq, int head_dim) {
  const PrefillWsLoopSass loop = prefill_ws_loop_sass(head_dim);
  double tiles = 0;
  for (const auto& [q_len, seq_len] : seqs) tiles += prefill_ws_score_tiles(q_len, seq_len);
  tiles *= hq;
  constexpr double kLanes = 32, kWarps = kPrefillWsConsumerWarps, kT = kPrefillWsTile;
  NonMmaWork w;
  w.mma_flops = tiles * 4 * kT * kT * head_dim;  // S = Q·K^T and O += P·V, 2 FLOPs per MAC
  w.sfu_ops = tiles * kWarps * kLanes * loop.mufu_ex2;
  w.fp32_ops = tiles * kWarps * kLanes * loop.fp32;
  w.issue_slots = tiles * kWarps * loop.instructions;
  w.mma_groups = kPrefillWsMmaGroups;
  return w;
}

namespace {

// The non-MMA work's time at the non-tensor pipes' rates: the busiest of the MUFU, the FP32 pipe
// and instruction issue, all SMs at the SM clock.
double non_mma_time(const GpuCeilings& gpu, const NonMmaWork& w) {
  if (!w.any()) return 0;
  CEILING_ENSURE(
      gpu.sm_clock_hz > 0 && gpu.sfu_per_clk > 0 && gpu.fp32_per_clk > 0 && gpu.issue_per_clk > 0,
      "predict: GPU '{}' has no SM clock or non-tensor pipe rates to price a kernel's "
      "non-MMA work",
      gpu.gpu_id);
  const double sm_clocks = gpu.sm_count * gpu.sm_clock_hz;  // SM-clocks per second
  return std::max({w.sfu_ops / (gpu.sfu_per_clk * sm_clocks),
                   w.fp32_ops / (gpu.fp32_per_clk * sm_clocks),
                   w.issue_slots / (gpu.issue_per_clk * sm_clocks)});
}

// MMA time `mma` and non-MMA time `x` of a kernel whose warpgroups take turns on the tensor cores:
// serial, mma + x, whatever the number of groups. By design a group's non-MMA work would run
// while another group's MMAs do (no schedule beats max(mma, x)), but measured it does not: the
// sm90 prefill kernel's times are mma + x, not the max, and moving its TMA producer's issue loop
// off one scheduler cut it by ~11 % although x < mma there (r20, bench/attention_notes.md) —
// under overlap that issue work would have been hidden. docs/roofline.md, group 2.
double schedule(double mma, double x) {
  return x > 0 ? mma + x : mma;
}

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
  const NonMmaWork& nm = k.non_mma;
  CEILING_ENSURE(nm.mma_flops >= 0 && nm.sfu_ops >= 0 && nm.fp32_ops >= 0 && nm.issue_slots >= 0 &&
                     nm.mma_groups >= 1,
                 "predict: invalid non-MMA work (mma_flops {}, sfu_ops {}, fp32_ops {}, "
                 "issue_slots {}, mma_groups {})",
                 nm.mma_flops, nm.sfu_ops, nm.fp32_ops, nm.issue_slots, nm.mma_groups);
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
  const double tensor_flops = nm.mma_flops > 0 ? nm.mma_flops : k.flops;  // executed
  const double peak = k.flops > 0 || tensor_flops > 0 ? gpu.peak(math) : 1.0;
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
  // Compute: the executed MMAs at the achievable tensor rate and the non-MMA work at the
  // non-tensor pipes' rates, both over the same waves of CTAs, as the warpgroups schedule them.
  p.non_mma_s = non_mma_time(gpu, nm) / p.wave_efficiency;
  const double comp2 =
      schedule(tensor_flops / (peak * gpu.compute_efficiency * p.wave_efficiency), p.non_mma_s);
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
