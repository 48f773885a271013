// The per-kernel cost model: one kernel's work (FLOPs, bytes, output tiles, launches) against one
// GPU's ceilings gives two times.
//
//   Layer 1 (pure roofline): max(flops / peak(math), bytes / bandwidth, nvlink_bytes / link_bw).
//   Layer 2 (schedule):      layer 1 with achievable (not datasheet) rates, written bytes at the
//                            measured write rate, wave quantization of output tiles over the SMs,
//                            reads served from L2 when they fit, a fixed per-launch cost
//                            (measured grid-wide at the kernel's size, else a small-kernel floor),
//                            and the launch cost (eager vs CUDA graph).
//
// Every parameter of layer 2 is a named field of GpuCeilings with its source (see
// docs/roofline.md). The kernel benchmarks call predict() with the same KernelCost they count for
// their own kernels, so prediction and measurement share one definition. Thread-safe: pure
// functions of their arguments.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.h"

namespace ceiling::roofline {

enum class Limiter { kCompute, kMemory, kOverhead, kCommunication };
std::string_view limiter_name(Limiter l);

// One measured point of a grid-wide probe: per-launch time (graph node included) at a size.
struct ProbePoint {
  double bytes = 0;    // moved per launch (read, or read + written)
  double seconds = 0;  // per launch
};

// A GPU's ceilings as the predictor uses them: datasheet figures (with default efficiency
// factors) or measured ones (efficiencies 1). All rates are per second, bytes decimal.
struct GpuCeilings {
  std::string gpu_id;    // "h100-sxm"
  std::string gpu_name;  // "NVIDIA H100 SXM5 80GB"
  bool measured = false;
  std::string source;  // where the rates come from (datasheet, or the measured file's path)

  int sm_count = 0;
  double l2_bytes = 0;
  double memory_bytes = 0;  // device memory capacity

  // Peaks (layer 1 uses them as they are).
  double mem_bw = 0;      // bytes/s: HBM streaming read
  double bf16_flops = 0;  // dense tensor, FP32 accumulate (fp16 the same)
  double fp8_flops = 0;   // 0 = none on this GPU
  double fp4_flops = 0;   // 0 = none
  double int8_ops = 0;
  double fp32_flops = 0;  // CUDA cores (elementwise math, norms)
  double nvlink_bw = 0;   // bytes/s per direction (datasheet total / 2); 0 = no NVLink

  // Layer-2 parameters (named and sourced in docs/roofline.md).
  double bw_efficiency = 1;       // achievable / peak bandwidth
  double compute_efficiency = 1;  // achievable / peak tensor rate
  double nvlink_efficiency = 1;   // achievable / peak NVLink rate (all-reduce bus bandwidth)
  double launch_eager_s = 0;      // per kernel launched eagerly (host launch rate bound)
  double launch_graph_s = 0;      // per kernel node replayed from a CUDA graph
  double kernel_floor_s = 0;      // a kernel that touches memory takes at least this long
  double round_trip_s = 0;        // one more dependent device-memory round trip in a kernel
  // Fixed per-launch cost of a grid-wide kernel that moves device memory: the intercept of
  // per-launch time against bytes, measured (in a graph of back-to-back PDL launches, so the node
  // cost is in it) with a streaming-read kernel (stream) and a read → reduce → write kernel (rw).
  // 0 = unknown (datasheet ceilings, older measured files): layer 2 falls back to kernel_floor.
  double stream_fixed_s = 0;
  double rw_fixed_s = 0;
  // The same probes' fitted rates (bytes/s; rw counts reads + writes, half of each) and raw
  // points (sorted by bytes). rw_bw prices written bytes (see predict); the points price the
  // fixed cost at the kernel's own size. 0 / empty = unknown.
  double stream_bw = 0;
  double rw_bw = 0;
  std::vector<ProbePoint> stream_points;
  std::vector<ProbePoint> rw_points;
  // The stream probe launched without PDL (each launch waits for its predecessor to drain and
  // pays its own ramp): the fixed cost of a kernel with KernelCost::pdl false. Line and points
  // as above; 0 / empty = unknown (files written before it): such a kernel is priced as a PDL one.
  double stream_serial_fixed_s = 0;
  double stream_serial_bw = 0;
  std::vector<ProbePoint> stream_serial_points;
  // The non-tensor pipes that price NonMmaWork: the SM clock (the run's recorded clock, else the
  // datasheet boost clock) and per-SM rates per clock of special-function results (MUFU), FP32
  // results (FADD/FMUL/FFMA) and warp instructions issued (one per scheduler). Hopper: 16, 128, 4
  // (docs/roofline.md). 0 = unknown: a kernel that declares non-MMA work cannot be priced.
  double sm_clock_hz = 0;
  double sfu_per_clk = 0;
  double fp32_per_clk = 0;
  double issue_per_clk = 0;
  double allreduce_latency_s = 0;   // fixed cost of one NVLink all-reduce
  double l2_resident_fraction = 0;  // inputs up to this fraction of L2 can be read from L2
  int tile_m = 128, tile_n = 128;   // GEMM output tile used for wave quantization

  // Peak rate of the math dtype: bf16/f16 -> bf16 tensor, f8e4m3/f8e5m2 -> fp8 tensor, i8 -> int8
  // tensor, f32 -> CUDA cores. (Weight-only int4/int8/fp8 GEMMs compute in bf16: the caller passes
  // the math dtype, not the storage dtype.) Throws ceiling::Error when the GPU has no such path
  // (fp8 on A100) or for another dtype.
  double peak(DType math) const;
};

// Datasheet ceilings with the default layer-2 parameters, or (measured = true) the GPU's
// data/ceilings/<gpu>.json applied over them. Throws ceiling::Error for an unknown id or a missing
// measured file (naming the path it looked for).
GpuCeilings ceilings_for(const std::string& gpu_id, bool measured);
// Same, from an explicit measured-ceilings file.
GpuCeilings ceilings_from_file(const std::string& gpu_id, const std::string& path);
// Maps a CUDA device name ("NVIDIA H100 80GB HBM3") to its GPU id ("h100-sxm"). Throws
// ceiling::Error naming the device when it is not in the table.
std::string gpu_id_for_device(const std::string& cuda_device_name);
// Sets the per-SM per-clock non-tensor rates (sfu_per_clk, fp32_per_clk, issue_per_clk) of an
// architecture ("hopper"); other architectures get 0 (unknown). The sources: docs/roofline.md.
void set_sm_pipe_rates(GpuCeilings& gpu, std::string_view arch);

// What a tensor-core kernel issues between its MMAs (flash attention's online softmax), counted
// from the kernel's SASS, and how its warpgroups schedule it against the MMAs. All 0 (the
// default): `flops` at the tensor rate alone is the compute time, as for a GEMM.
struct NonMmaWork {
  // Tensor FLOPs the kernel executes when more than KernelCost::flops (causal diagonal tiles
  // computed in full); 0 = flops.
  double mma_flops = 0;
  double sfu_ops = 0;      // special-function results (MUFU.EX2: one per active lane)
  double fp32_ops = 0;     // FP32-pipe results (FADD, FMUL, FFMA: one per active lane)
  double issue_slots = 0;  // warp instructions issued by the warps that issue the MMAs
  // Warpgroups that take turns on the tensor cores (the kernel's structure, recorded). Layer 2
  // prices the non-MMA work serially with the MMAs whatever this is: the overlap across groups
  // the structure intends is not what the hardware measured (kernel_cost.cpp, schedule()).
  int mma_groups = 1;
  bool any() const { return sfu_ops > 0 || fp32_ops > 0 || issue_slots > 0; }
};

// One kernel's work. `bytes` is the fewest bytes it must move through device memory with every
// operand read once and every output written once.
struct KernelCost {
  double flops = 0;  // floating-point (or integer) operations
  double bytes = 0;  // device-memory bytes, reads + writes
  // Of `bytes`: the bytes written. Layer 2 prices them at the write rate implied by the rw
  // probe (when measured) and the rest at the read rate. 0 = not split: all priced as reads.
  double write_bytes = 0;
  double l2_reuse_bytes = 0;  // of `bytes`: reads of data the previous kernel just wrote; layer 2
                              // serves them from L2 when they fit (l2_resident_fraction)
  int64_t tiles = 0;          // output tiles (CTAs) of a tiled kernel; 0 = not wave-quantized
  int launches = 1;           // kernel launches (0 for work fused into another kernel)
  // Dependent device-memory phases on the kernel's critical path: accesses that cannot issue
  // before an earlier phase's loads return. A read-only kernel has 1; a kernel that loads, then
  // stores what it computed (a GEMV, a norm, an elementwise op) 2; one that first reads an index
  // (embedding's token ids) 3. Layer 2 adds to the memory time the measured fixed cost of a
  // grid-wide kernel of that structure (the stream probe for ≤ 1, the rw probe for ≥ 2) at the
  // kernel's size, plus max(0, round_trips − 2) · round_trip_s; without those measurements,
  // kernel_floor (a tiny read-only kernel) + (round_trips − 1) · round_trip_s.
  int round_trips = 1;
  // Launched with programmatic dependent launch (overlaps its neighbours); false for library
  // kernels (cuBLASLt) that serialize. Layer 2 then takes the fixed cost from the stream probe
  // launched without PDL (stream_serial) at any round_trips, plus (round_trips − 1) ·
  // round_trip_s: that probe has one dependent phase, and no PDL-free rw probe is measured.
  // Without stream_serial, priced exactly as a PDL kernel.
  bool pdl = true;
  double nvlink_bytes = 0;  // bytes each GPU sends per direction over NVLink (collectives)
  bool collective = false;  // an NVLink collective: pays allreduce_latency_s in layer 2
  NonMmaWork non_mma;       // layer 2 only: see predict()
};

// Output tiles of an M x N GEMM under the ceilings' tile shape (ceil(M/tile_m) * ceil(N/tile_n)).
int64_t gemm_tiles(const GpuCeilings& gpu, int64_t m, int64_t n);

// The sm_90a warp-specialized causal prefill attention (attention_prefill_sm90_ws.cu, both
// producers: PrefillKernel::kWgmmaWs and kWgmmaTma). A CTA takes 128 query rows of one head; per
// 128-key tile its two consumer warpgroups (4 warps each, 64 rows each) issue S = Q·K^T and
// O += P·V and run the online softmax, taking turns on the tensor cores. Key tiles reaching the
// diagonal are computed in full (masked). Counted from the kernel's SASS (docs/roofline.md):
// one consumer warp's main-loop body per key tile, at head_dim 128 and 64.
struct PrefillWsLoopSass {
  int instructions = 0;  // warp instructions, the loop's HGMMAs and barriers included
  int mufu_ex2 = 0;      // MUFU.EX2
  int fp32 = 0;          // FADD + FMUL + FFMA
};
inline constexpr int kPrefillWsTile = 128;         // query rows and keys per score tile
inline constexpr int kPrefillWsConsumerWarps = 8;  // two warpgroups
inline constexpr int kPrefillWsMmaGroups = 2;      // ping-pong on the tensor cores (by design)
// Throws ceiling::Error for a head_dim the kernel is not built for (64, 128).
PrefillWsLoopSass prefill_ws_loop_sass(int head_dim);
// Score tiles one head of one sequence computes: q_len new tokens, seq_len keys (prefix included).
int64_t prefill_ws_score_tiles(int q_len, int seq_len);
// The kernel's NonMmaWork for sequences {q_len, seq_len} over hq query heads: every score tile's
// MMAs (4 · 128 · 128 · head_dim FLOPs) and its consumer warps' loop body.
NonMmaWork prefill_ws_work(const std::vector<std::pair<int, int>>& seqs, int hq, int head_dim);

struct Prediction {
  // Layer 1.
  double compute_s = 0;  // flops / peak
  double memory_s = 0;   // bytes / mem_bw
  double comm_s = 0;     // nvlink_bytes / nvlink_bw
  double time_roofline_s = 0;
  Limiter roofline_limiter = Limiter::kMemory;
  // Layer 2.
  double wave_efficiency = 1;  // tiles / (waves * sm_count)
  double hbm_bytes = 0;        // bytes after L2 reuse
  double latency_s = 0;        // fixed cost beyond bytes / rate (0 for fused work)
  double non_mma_s = 0;        // non-MMA work at the non-tensor pipes' rates (0 = none)
  double time_predicted_s = 0;
  Limiter limiter = Limiter::kMemory;  // the largest of compute, memory, communication, overhead
};

// `math` selects the peak the FLOPs run at (see GpuCeilings::peak). A kernel with no work costs
// only its launches. Throws ceiling::Error for negative inputs or a missing math path.
Prediction predict(const GpuCeilings& gpu, const KernelCost& k, DType math,
                   bool cuda_graphs = true);

}  // namespace ceiling::roofline
