// Random low-precision weights W [N, K] for the quantized GEMV cases (kernels/cuda/gemv_quant.h):
// every code of the format — fp8: each finite E4M3 value (subnormals and ±0 included) with a row
// scale; int4: each q and zero point, group scales in [2e-3, 2e-2] rounded to bf16 as the on-load
// quantizer makes them — in the device layout, `copies` sets (all holding one draw: only set 0
// is checked), and the draw dequantized to f32 by the CPU reference's dequantize_row.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "bench/device_util.h"
#include "kernels/cuda/gemv_quant.h"

namespace ceiling::bench {

class QuantWeightPool {
 public:
  QuantWeightPool() = default;
  QuantWeightPool(cuda::GemvWeightFormat format, int N, int K, int group_size, int copies);
  // Draws W from `seed` and copies it into every set (set0_only: into set 0 alone).
  void fill(uint64_t seed, cudaStream_t s, bool set0_only = false);
  cuda::GemvWeights at(int set) const;
  // The last draw as f32 [N, K] (W's meaning, model/weights.h QuantLinear).
  std::vector<float> dequantized() const;
  // Device bytes of one set's weights (data + scales or groups), also before the pool exists (a
  // case's set_bytes() is asked before its setup() makes the pool).
  static size_t set_bytes(cuda::GemvWeightFormat format, int N, int K, int group_size);
  size_t set_bytes() const { return data_stride_ + aux_stride_; }

 private:
  cuda::GemvWeightFormat format_ = cuda::GemvWeightFormat::kFP8;
  int N_ = 0, K_ = 0, G_ = 0, copies_ = 0;
  size_t data_stride_ = 0, aux_stride_ = 0;  // bytes per set, 256-aligned
  DeviceBuffer buf_;                         // [copies] × (data, then row scales / groups)
  std::vector<uint8_t> q_, zero_;            // the last draw in QuantLinear's host layout
  std::vector<float> scale_;
};

}  // namespace ceiling::bench
