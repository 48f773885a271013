// The whole-model cost: one forward step of a decoder-only transformer as a list of ops, each
// costed with roofline/kernel_cost.h, summed into step time, throughput, utilizations and memory.
//
// What one step is:
//   prefill: `batch` sequences of `context` tokens each, from an empty cache (T = batch*context
//            tokens); logits only for the last position of each sequence (what serving needs).
//   decode:  `batch` sequences each generating one token with `context` tokens already cached
//            (T = batch tokens; attention reads context+1 keys per sequence).
// Per-GPU costs under tensor parallelism of degree tp: heads, KV heads and the MLP width are split
// tp ways, the vocabulary too (vocab-parallel embedding and lm_head); norms are replicated. The
// step time is one GPU's time (they run in lockstep).
//
// Modelling choices (docs/roofline.md explains each):
//  * Activations are bf16 in memory in every mode; the KV cache is bf16 or fp8.
//  * Weight-only quantization (int4, int8, fp8 weights) computes in bf16 on the tensor cores;
//    with w8a8 = true, fp8 and int8 weights compute in fp8 / int8 (activations quantized inside
//    the GEMM). int4 is always weight-only.
//  * int4 weights carry one bf16 scale per group of `group_size` input elements per output column;
//    int8 and fp8 weights one fp32 scale per output column. Scales are counted as bytes.
//  * Embedding and lm_head stay bf16 whatever the weight dtype (AWQ/GPTQ int4 and FP8 checkpoints
//    ship them unquantized).
//  * Residual adds are the epilogue of o_proj and down_proj (out = residual + x·W, in place).
//    At decode batch 1 on one GPU the RMSNorms before qkv_proj / gate_up_proj and the SiLU
//    before down_proj run as the GEMV's prologue (Ops' fused layer steps) and are not kernels of
//    their own; otherwise each is a kernel.
//  * Attention is costed as a flash-attention kernel: Q, K, V read once, O written once; softmax
//    exponentials are not counted as FLOPs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/config.h"
#include "roofline/kernel_cost.h"

namespace ceiling::roofline {

enum class Phase { kPrefill, kDecode };
std::string_view phase_name(Phase p);
Phase parse_phase(std::string_view s);  // "prefill" | "decode"; throws naming the value

enum class WeightDtype { kBF16, kFP8, kINT8, kINT4 };
std::string_view weight_dtype_name(WeightDtype w);
WeightDtype parse_weight_dtype(std::string_view s);  // "bf16" | "fp8" | "int8" | "int4"
DType parse_kv_dtype(std::string_view s);            // "bf16" -> kBF16, "fp8" -> kF8E4M3

struct Scenario {
  Phase phase = Phase::kDecode;
  int64_t batch = 1;
  int64_t context = 1024;
  WeightDtype weights = WeightDtype::kBF16;
  int group_size = 128;  // int4 only
  bool w8a8 = false;     // fp8/int8 weights compute in fp8/int8
  DType kv_dtype = DType::kBF16;
  int tp = 1;
  bool cuda_graphs = true;
};

// Throws ceiling::Error with a one-line message for batch/context/tp/group_size out of range,
// tp not dividing the heads, KV heads or MLP width, or a context past max_position_embeddings.
void validate(const ModelConfig& m, const Scenario& s);

struct OpCost {
  std::string name;   // "qkv_proj"
  std::string note;   // what it includes ("+ bias", "fused residual add", ...)
  int64_t count = 1;  // instances per step (num_layers for per-layer ops)
  bool per_layer = false;
  DType math = DType::kBF16;
  KernelCost cost;                                              // one instance
  double weight_bytes = 0, activation_bytes = 0, kv_bytes = 0;  // one instance, sum = cost.bytes
  Prediction pred;                                              // one instance
};

struct MemoryReport {
  double weights_bytes = 0;       // per GPU
  double kv_bytes_per_token = 0;  // per GPU, all layers, K and V
  double usable_bytes = 0;        // device memory after the reserve
  int64_t max_sequences = 0;      // of `context` tokens (rounded up to KV blocks)
};

struct StepReport {
  std::string model;
  GpuCeilings gpu;
  Scenario scenario;
  std::vector<OpCost> ops;
  // Totals over the step (ops times their counts).
  double flops = 0, bytes = 0;
  double time_roofline_s = 0, time_predicted_s = 0;
  double tokens_per_s = 0, tokens_per_s_roofline = 0;
  double tensor_core_utilization = 0;           // tensor FLOPs / (predicted time * peak), 0..1
  double tensor_core_utilization_roofline = 0;  // the same over the layer-1 time
  double hbm_utilization = 0;                   // bytes / (predicted time * bandwidth), 0..1
  Limiter limiter = Limiter::kMemory;  // the limiter holding the largest share of predicted time
  Limiter roofline_limiter = Limiter::kMemory;
  int64_t launches = 0;
  double ttft_s = 0;  // predicted prefill time of `batch` sequences of `context` tokens
  // Decode: smallest batch at which the linear layers' GEMMs turn compute-bound (layer 1) at this
  // context; nullopt if none up to 2^24.
  std::optional<int64_t> critical_batch;
  MemoryReport memory;
};

// The ops of one step (validated first).
std::vector<OpCost> model_ops(const ModelConfig& m, const GpuCeilings& gpu, const Scenario& s);
MemoryReport memory_report(const ModelConfig& m, const GpuCeilings& gpu, const Scenario& s);
StepReport predict_step(const ModelConfig& m, const GpuCeilings& gpu, const Scenario& s);

}  // namespace ceiling::roofline
