// The layer-2 (schedule) parameters and the model-level assumptions of the predictor: each one a
// named value with its source, so the report can print them and docs/roofline.md can explain them.
// Measured ceilings (data/ceilings/<gpu>.json) replace the launch and floor values and set the
// efficiency factors to 1.
#pragma once

#include <string>
#include <vector>

namespace ceiling::roofline {

struct Layer2Defaults {
  double bw_efficiency = 0.90;
  double compute_efficiency = 0.80;
  double nvlink_efficiency = 0.80;
  // Launch costs and the floor: `ceiling probe` on an H100 SXM (data/ceilings/h100-sxm.json,
  // 2026-11-21): 3.12 us eager, 0.79 us per graph node, 1.40 us per tiny kernel node.
  double launch_eager_s = 3.1e-6;
  double launch_graph_s = 0.8e-6;
  double kernel_floor_s = 0.6e-6;
  // One more dependent cold read inside a kernel (`ceiling bench` measures it per run; this
  // default is assumed, about the loaded HBM latency of Hopper).
  double round_trip_s = 0.7e-6;
  double allreduce_latency_s = 10e-6;
  double l2_resident_fraction = 0.5;
  int tile_m = 128;
  int tile_n = 128;
};

// Model-level assumptions (roofline/model_cost.h).
struct ModelAssumptions {
  double memory_reserve_fraction = 0.10;  // of device memory, kept for activations/workspace
  int kv_block_size = 16;                 // KV cache is allocated in blocks of this many tokens
};

const Layer2Defaults& layer2_defaults();
const ModelAssumptions& model_assumptions();

// One documented parameter: name, value (as printed), whether it is measured, and its source.
struct ParameterDoc {
  std::string name;
  std::string value;
  std::string source;
};
// The layer-2 parameters and assumptions as they apply to a run (values from the ceilings in use).
struct GpuCeilings;
std::vector<ParameterDoc> describe_parameters(const GpuCeilings& gpu);

}  // namespace ceiling::roofline
