// Picks the backend for a device name. The CUDA backend (library ceiling_engine_cuda, sources in
// src/engine/cuda/) plugs in here: when that library is built, ceiling_engine is compiled with
// HAVE_CEILING_ENGINE_CUDA and make_ops("cuda") calls
//   std::unique_ptr<Ops> make_cuda_ops(const OpsOptions&);   // declared in engine/cuda/cuda_ops.h
// which throws ceiling::Error when no GPU is usable.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "engine/ops.h"

namespace ceiling::engine {

struct OpsOptions {
  int n_threads = 0;        // CPU worker threads (<= 0: all hardware threads)
  int device_index = 0;     // CUDA device ordinal
  bool cuda_graphs = true;  // CUDA: capture decode steps in graphs (false = --enforce-eager)
  // --kv-cache-dtype fp8 (CPU: values rounded through E4M3 in an f32 cache; CUDA: an E4M3 cache)
  bool fp8_kv_cache = false;
  // CUDA: time cuBLASLt's candidate algorithms for each graph-captured GEMM shape at its warm-up
  // and keep the fastest (cuda/gemm_lt.h; false = --no-gemm-autotune: the heuristic's first).
  bool gemm_autotune = true;
  // CUDA: (bytes copied, total) while upload() moves the weights to the GPU.
  std::function<void(uint64_t, uint64_t)> upload_progress;
};

// "cpu" or "cuda". Throws ceiling::Error for an unknown name, or for "cuda" when this binary was
// built without the CUDA backend (or, from the backend, when there is no usable GPU).
std::unique_ptr<Ops> make_ops(std::string_view device, const OpsOptions& options = {});

// True when this build has a CUDA backend compiled in (a GPU may still be absent).
bool has_cuda_backend();

}  // namespace ceiling::engine
