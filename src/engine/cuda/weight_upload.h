// Weights from the memory-mapped safetensors straight to the GPU: one device allocation for the
// whole model, filled through two pinned staging buffers (host copies on a few threads while the
// previous chunk's DMA runs), converting f32 / f16 tensors to bf16 on the GPU, and fusing the
// projections so each is one GEMV/GEMM:
//   qkv      [Q + 2·KV, H]  = rows of q_proj, k_proj, v_proj (biases concatenated likewise)
//   gate_up  [2·I, H]       = rows of gate_proj, then up_proj
// The per-projection views of ModelWeights (q_proj, gate_proj, ...) point into the fused tensors.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/cuda/device_memory.h"
#include "model/config.h"
#include "model/weights.h"

namespace ceiling::engine::cuda_impl {

struct FusedLayerWeights {
  TensorView qkv;       // [Q + 2·KV, H] bf16
  TensorView qkv_bias;  // [Q + 2·KV] bf16; data == nullptr without attention_bias
  TensorView gate_up;   // [2·I, H] bf16
};

struct DeviceWeights {
  DeviceBuffer storage;                  // every tensor below lives in it
  ModelWeights views;                    // device views (bf16), shapes as the host's
  std::vector<FusedLayerWeights> fused;  // [L]
  uint64_t source_bytes = 0;             // bytes read from the host views
};

// Called with (source bytes copied so far, total source bytes) after each chunk.
using UploadProgress = std::function<void(uint64_t done, uint64_t total)>;

// `host` must already have passed check_weights for `config` (host views, f32/f16/bf16,
// contiguous). Blocks until the copies are done. Throws ceiling::Error on a CUDA failure.
DeviceWeights upload_weights(const ModelConfig& config, const ModelWeights& host,
                             cudaStream_t stream, const UploadProgress& progress);

}  // namespace ceiling::engine::cuda_impl
