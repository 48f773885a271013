// Building blocks shared by the kernel cases: per-set device pools and a base class holding the
// set count and seed. Include only from src/bench/cases/ and tests/gpu.
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/case.h"
#include "bench/check_util.h"
#include "bench/device_util.h"
#include "core/dtype.h"

namespace ceiling::bench {

// `copies` sets of n elements of T in one allocation; each set starts 256-byte aligned.
template <typename T>
class Pool {
 public:
  Pool() = default;
  Pool(size_t n, int copies)
      : n_(n),
        stride_((n * sizeof(T) + 255) / 256 * 256 / sizeof(T)),
        copies_(copies),
        buf_(stride_ * sizeof(T) * static_cast<size_t>(copies)) {}
  T* at(int set) const { return buf_.as<T>() + stride_ * static_cast<size_t>(set); }
  size_t n() const { return n_; }
  size_t total() const { return stride_ * static_cast<size_t>(copies_); }
  T* base() const { return buf_.as<T>(); }

 private:
  size_t n_ = 0, stride_ = 0;
  int copies_ = 0;
  DeviceBuffer buf_;
};

// Common state: how many sets and which seed. check() draws set 0 anew from check_seed().
class CaseBase : public KernelCase {
 protected:
  int copies_ = 0;
  uint64_t seed_ = 0;
  int checks_ = 0;
  void remember(int copies, uint64_t seed) {
    copies_ = copies;
    seed_ = seed;
  }
  uint64_t check_seed() { return seed_ * 0x9E3779B97F4A7C15ull + 0xC0FFEEull + ++checks_; }
};

inline size_t bf16_bytes(double n) {
  return static_cast<size_t>(n * 2);
}

// Pieces of shape strings: "T=1 H=4096".
inline std::string kv(const char* k, long long v) {
  return std::string(k) + "=" + std::to_string(v);
}

// The bf16 operands of a linear case, out [M, N] (+)= x [M, K] · Wᵀ (+ b [N]): `copies` sets drawn
// uniform in [-1, 1) from seed + 1, + 2, + 3 (x, b, out: out is the residual where there is one).
struct LinearIo {
  Pool<__nv_bfloat16> x, b, out;
  LinearIo() = default;
  LinearIo(int M, int N, int K, int copies, uint64_t seed, cudaStream_t s)
      : x(size_t(M) * K, copies), b(N, copies), out(size_t(M) * N, copies) {
    fill(seed, s, false);
  }
  // Redraws every set, or set 0 alone (a check's fresh inputs).
  void fill(uint64_t seed, cudaStream_t s, bool set0_only) {
    fill_uniform(x.base(), set0_only ? x.n() : x.total(), seed + 1, -1.0f, 1.0f, s);
    fill_uniform(b.base(), set0_only ? b.n() : b.total(), seed + 2, -1.0f, 1.0f, s);
    fill_uniform(out.base(), set0_only ? out.n() : out.total(), seed + 3, -1.0f, 1.0f, s);
  }
  // A check's fresh inputs in set 0: redraws it, and returns out as drawn (the residual) before
  // poisoning it when the case does not accumulate, so an unwritten output fails.
  std::vector<float> fresh_set0(uint64_t seed, bool accumulate, cudaStream_t s) {
    fill(seed, s, /*set0_only=*/true);
    std::vector<float> resid = out0(s);
    if (!accumulate) poison(out.at(0), out.n() * sizeof(__nv_bfloat16), s);
    return resid;
  }
  // Set 0 on the host as f32 (synchronizes s).
  std::vector<float> x0(cudaStream_t s) const { return to_f32(to_host(x.at(0), x.n(), s)); }
  std::vector<float> b0(cudaStream_t s) const { return to_f32(to_host(b.at(0), b.n(), s)); }
  std::vector<float> out0(cudaStream_t s) const { return to_f32(to_host(out.at(0), out.n(), s)); }
};

// Llama-3.1-8B's four projection weights [N, K] as the engine runs them: QKV, o (with the
// residual add), gate/up, down (with the residual add).
struct ProjShape {
  int N, K;
  bool residual;
};
inline constexpr ProjShape kLlama8bProjections[] = {
    {6144, 4096, false}, {4096, 4096, true}, {28672, 4096, false}, {4096, 14336, true}};

// A value rounded to bf16 and back (the kernels' bf16 stores).
inline float round_bf16(float v) {
  return bf16_to_f32(f32_to_bf16(v));
}
// silu(g) · u of bf16-rounded gate and up values: silu_mul's reference.
inline float silu_mul_ref(float gate, float up) {
  const float g = round_bf16(gate);
  return g / (1.0f + std::exp(-g)) * round_bf16(up);
}

// One output row of a linear layer in double, the reference of the low-precision cases: appends
// out[n] = Σ_k x[k] · w[n, k] (+ bias[n]) (+ resid[n]) for n < N to `ref` (w: [N, K] f32, the
// dequantized weights; bias, resid optional).
inline void append_linear_ref_row(const float* x, const std::vector<float>& w, int N, int K,
                                  const float* bias, const float* resid, std::vector<float>& ref) {
  for (int n = 0; n < N; ++n) {
    double acc = 0;
    const float* wn = w.data() + size_t(n) * K;
    for (int k = 0; k < K; ++k) acc += double(x[k]) * wn[k];
    if (bias) acc += bias[n];
    if (resid) acc += resid[n];
    ref.push_back(static_cast<float>(acc));
  }
}

}  // namespace ceiling::bench
