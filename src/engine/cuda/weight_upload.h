// Weights from the memory-mapped safetensors straight to the GPU: one device allocation for the
// whole model, filled through two pinned staging buffers (host copies on a few threads while the
// previous chunk's DMA runs), converting f32 / f16 tensors to bf16 on the GPU, and fusing the
// projections so each is one GEMV/GEMM:
//   qkv      [Q + 2·KV, H]  = rows of q_proj, k_proj, v_proj (biases concatenated likewise)
//   gate_up  [2·I, H]       = rows of gate_proj, then up_proj
// The per-projection views of ModelWeights (q_proj, gate_proj, ...) point into the fused tensors.
// Low-precision projections (QuantLinear, fp8 / int4) are copied as they are (int4 re-packed on
// the host into the GEMV's nibble order), their rows fused the same way; the members of one
// fused group must share format and group size.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/cuda/device_memory.h"
#include "kernels/cuda/gemv_quant.h"
#include "model/config.h"
#include "model/weights.h"

namespace ceiling::engine::cuda_impl {

// One projection W [N, K] as the GEMV / GEMM read it: bf16 (w.data = the dense view's data), or
// fp8 / int4 in the device layout of kernels/cuda/gemv_quant.h.
struct DeviceLinear {
  cuda::GemvWeights w;
  int N = 0, K = 0;
  bool quantized() const { return w.format != cuda::GemvWeightFormat::kBF16; }
};

struct FusedLayerWeights {
  DeviceLinear qkv;      // [Q + 2·KV, H]
  TensorView qkv_bias;   // [Q + 2·KV] bf16; data == nullptr without attention_bias
  DeviceLinear o;        // [H, Q]
  DeviceLinear gate_up;  // [2·I, H]
  DeviceLinear down;     // [H, I]
};

struct DeviceWeights {
  DeviceBuffer storage;  // every tensor below lives in it
  // Device views (bf16), shapes as the host's. A quantized projection's dense view is empty
  // and its QuantLinear holds only format and group size: the kernels read `fused`.
  ModelWeights views;
  std::vector<FusedLayerWeights> fused;  // [L]
  // bf16 image of the largest quantized projection: where a prefill-sized GEMM dequantizes its
  // weight first (empty when every projection is dense).
  DeviceBuffer dequant_scratch;
  uint64_t source_bytes = 0;  // bytes read from the host views
};

// Called with (source bytes copied so far, total source bytes) after each chunk.
using UploadProgress = std::function<void(uint64_t done, uint64_t total)>;

// `host` must already have passed check_weights for `config` (host views, f32/f16/bf16,
// contiguous). Blocks until the copies are done. Throws ceiling::Error on a CUDA failure.
DeviceWeights upload_weights(const ModelConfig& config, const ModelWeights& host,
                             cudaStream_t stream, const UploadProgress& progress);

}  // namespace ceiling::engine::cuda_impl
