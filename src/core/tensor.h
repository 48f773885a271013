// A non-owning tensor view: data pointer, dtype, shape, strides (in elements), device.
// Shapes are written outermost first, e.g. a linear weight is [N, K] (row-major, K contiguous).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/dtype.h"
#include "core/status.h"

namespace ceiling {

enum class Device : uint8_t { kCpu, kCuda };

inline constexpr int kMaxDims = 6;

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Device device = Device::kCpu;
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};
  std::array<int64_t, kMaxDims> strides{};  // in elements

  TensorView() = default;
  // A contiguous (row-major) view.
  TensorView(void* d, DType t, std::initializer_list<int64_t> dims, Device dev = Device::kCpu)
      : data(d), dtype(t), device(dev) {
    CEILING_ENSURE(dims.size() <= kMaxDims, "tensor rank {} exceeds {}", dims.size(), kMaxDims);
    for (int64_t v : dims) shape[ndim++] = v;
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; --i) {
      strides[i] = s;
      s *= shape[i];
    }
  }

  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  size_t nbytes() const { return dtype_bytes(dtype, static_cast<size_t>(numel())); }
  int64_t dim(int i) const { return shape[i < 0 ? ndim + i : i]; }
  bool is_contiguous() const {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; --i) {
      if (shape[i] != 1 && strides[i] != s) return false;
      s *= shape[i];
    }
    return true;
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
  std::string shape_str() const {
    std::string r = "[";
    for (int i = 0; i < ndim; ++i) r += (i ? ", " : "") + std::to_string(shape[i]);
    return r + "]";
  }
};

}  // namespace ceiling
