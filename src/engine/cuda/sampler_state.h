// CudaOps' sampler buffers (private to src/engine/cuda/): defined here so that every file
// destroying a CudaOps sees the complete type.
#pragma once

#include "engine/cuda/cuda_ops.h"

namespace ceiling::engine {

struct CudaOps::SamplerState {
  // Device buffers (arena) and a pinned mirror of the uploaded part: [params R][u R][histories].
  size_t upload_cap = 0;
  char* upload_dev = nullptr;
  cuda_impl::PinnedBuffer upload_host;
  int rows_cap = 0;
  int32_t* out_dev = nullptr;
  cuda_impl::PinnedBuffer out_host;
  int32_t* counts = nullptr;  // [rows_cap, V]
  float* biased = nullptr;    // [rows_cap, V]: a copy of the logits with the rows' biases added
};

}  // namespace ceiling::engine
