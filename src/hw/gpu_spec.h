// Datasheet ceilings of the GPUs ceiling knows, each figure with its source. The roofline
// predictor reads these (or the measured ceilings in hw/measured.h, which override them).
//
// Conventions (every table entry follows them):
//  * Tensor throughputs are dense (no 2:4 sparsity) with FP32 accumulation, in FLOP/s (ops/s for
//    int8). 0 means the GPU has no such tensor path (fp8 on A100, fp4 before Blackwell).
//  * Bandwidths are in bytes/s, decimal (3.35 TB/s = 3.35e12). NVLink is the datasheet's total
//    per GPU, both directions added (H100 SXM: 900 GB/s = 450 GB/s each way); 0 where none.
//  * Memory capacity is in bytes; datasheets' "80GB" HBM is 80 GiB of physical memory.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ceiling::hw {

// One figure and where it comes from (a URL or a document's name, plus notes on derivation).
struct Figure {
  double value = 0;
  std::string source;
};

struct GpuSpec {
  std::string id;    // lowercase id: "h100-sxm", "h200", ...
  std::string name;  // marketing name: "NVIDIA H100 SXM5 80GB"
  std::string arch;  // "hopper", "blackwell", ...
  Figure sm_count;
  Figure boost_clock_mhz;
  Figure memory_bytes;
  Figure memory_bw;  // bytes/s
  Figure l2_bytes;
  Figure bf16_flops;  // also fp16 (same rate with FP32 accumulation on every GPU here)
  Figure fp8_flops;
  Figure fp4_flops;
  Figure int8_ops;
  Figure fp32_flops;  // CUDA cores, non-tensor
  Figure nvlink_bw;   // bytes/s, both directions added; 0 = no NVLink
  // Substrings of CUDA device names (cudaDeviceProp::name, nvidia-smi) that mean this GPU,
  // matched case-insensitively; the first table entry with a matching pattern wins.
  std::vector<std::string> device_name_patterns;
};

// All GPUs, in a fixed order (the order of --list-gpus).
const std::vector<GpuSpec>& gpu_specs();

// By id ("h100-sxm"), case-insensitive. nullopt when unknown.
const GpuSpec* find_gpu(std::string_view id);

// Like find_gpu, but throws ceiling::Error naming the id and listing the known ids.
const GpuSpec& gpu_by_id(std::string_view id);

// Maps a CUDA device name ("NVIDIA H100 80GB HBM3") to a GPU id ("h100-sxm"); nullopt when no
// table entry matches.
std::optional<std::string> gpu_id_for_device_name(std::string_view device_name);

// The name of CUDA device 0 on this machine, or nullopt when there is none (or it can't be
// queried). Uses the CUDA runtime when ceiling was built with it, else `nvidia-smi`.
std::optional<std::string> local_device_name();

}  // namespace ceiling::hw
