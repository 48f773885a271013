#include "bench/quant_weights.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/dtype.h"
#include "model/quantize.h"

namespace ceiling::bench {
namespace {

size_t align256(size_t b) {
  return (b + 255) / 256 * 256;
}

// One set's bytes, 256-aligned: the codes (fp8 one a weight, int4 two a byte), then fp8's row
// scales or int4's group words.
size_t data_bytes(cuda::GemvWeightFormat f, int N, int K) {
  return align256(f == cuda::GemvWeightFormat::kFP8 ? size_t(N) * K : size_t(N) * K / 2);
}
size_t aux_bytes(cuda::GemvWeightFormat f, int N, int K, int G) {
  return align256(f == cuda::GemvWeightFormat::kFP8 ? 4 * size_t(N)
                                                    : 4 * size_t(N) * (K / std::max(G, 1)));
}

// splitmix64: 8 random bytes per call, fast enough for 100M-weight shapes.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform(float lo, float hi) {
    return lo + (hi - lo) * static_cast<float>(next() >> 40) / static_cast<float>(1 << 24);
  }
};

}  // namespace

QuantWeightPool::QuantWeightPool(cuda::GemvWeightFormat format, int N, int K, int group_size,
                                 int copies)
    : format_(format), N_(N), K_(K), G_(group_size), copies_(copies) {
  CEILING_ENSURE(format != cuda::GemvWeightFormat::kBF16, "QuantWeightPool: bf16 is not quantized");
  const bool fp8 = format == cuda::GemvWeightFormat::kFP8;
  CEILING_ENSURE(fp8 || (G_ > 0 && K_ % G_ == 0), "QuantWeightPool: group {} does not divide K {}",
                 G_, K_);
  data_stride_ = data_bytes(format, N, K);
  aux_stride_ = aux_bytes(format, N, K, G_);
  buf_ = DeviceBuffer((data_stride_ + aux_stride_) * copies_);
}

size_t QuantWeightPool::set_bytes(cuda::GemvWeightFormat format, int N, int K, int group_size) {
  return data_bytes(format, N, K) + aux_bytes(format, N, K, group_size);
}

void QuantWeightPool::fill(uint64_t seed, cudaStream_t s, bool set0_only) {
  const bool fp8 = format_ == cuda::GemvWeightFormat::kFP8;
  const size_t nk = size_t(N_) * K_, groups = fp8 ? 0 : size_t(N_) * (K_ / G_);
  Rng rng{seed * 0x2545F4914F6CDD1Dull + 1};
  q_.assign(nk, 0);
  for (size_t i = 0; i < nk; i += 8) {
    uint64_t r = rng.next();
    for (size_t j = i; j < std::min(nk, i + 8); ++j, r >>= 8) {
      uint8_t b = static_cast<uint8_t>(r);
      if (fp8) {
        if ((b & 0x7F) == 0x7F) b ^= 0x01;  // E4M3's NaN codes become ±448
      } else {
        b &= 0xF;
      }
      q_[j] = b;
    }
  }
  scale_.resize(fp8 ? size_t(N_) : groups);
  zero_.assign(groups, 0);
  // fp8: |W| ≤ 0.1 (448 · scale); int4: steps of 2e-3..2e-2 as bf16 values.
  for (float& v : scale_)
    v = fp8 ? rng.uniform(0.5f, 1.0f) * 0.1f / kE4m3Max
            : bf16_to_f32(f32_to_bf16(rng.uniform(2e-3f, 2e-2f)));
  for (uint8_t& z : zero_) z = static_cast<uint8_t>(rng.next() & 0xF);

  // Device image of one set: the data (int4 packed), then row scales (fp8) or group words.
  std::vector<uint8_t> data;
  std::vector<uint32_t> words;
  const void* src = q_.data();
  const void* aux = scale_.data();
  if (!fp8) {
    data.resize(nk / 2);
    cuda::pack_gemv_int4(q_.data(), N_, K_, data.data());
    words.resize(groups);
    for (size_t g = 0; g < groups; ++g) words[g] = cuda::pack_gemv_int4_group(scale_[g], zero_[g]);
    src = data.data();
    aux = words.data();
  }
  const size_t data_bytes = fp8 ? nk : nk / 2, aux_bytes = 4 * (fp8 ? size_t(N_) : groups);
  for (int c = 0; c < (set0_only ? 1 : copies_); ++c) {
    char* base = buf_.as<char>() + (data_stride_ + aux_stride_) * c;
    CEILING_CUDA_CHECK(cudaMemcpyAsync(base, src, data_bytes, cudaMemcpyHostToDevice, s));
    CEILING_CUDA_CHECK(
        cudaMemcpyAsync(base + data_stride_, aux, aux_bytes, cudaMemcpyHostToDevice, s));
  }
  CEILING_CUDA_CHECK(cudaStreamSynchronize(s));  // the host vectors above go out of scope
}

cuda::GemvWeights QuantWeightPool::at(int set) const {
  char* base = buf_.as<char>() + (data_stride_ + aux_stride_) * set;
  cuda::GemvWeights w;
  w.format = format_;
  w.data = base;
  if (format_ == cuda::GemvWeightFormat::kFP8)
    w.row_scale = reinterpret_cast<const float*>(base + data_stride_);
  else
    w.groups = reinterpret_cast<const uint32_t*>(base + data_stride_);
  w.group_size = G_;
  return w;
}

std::vector<float> QuantWeightPool::dequantized() const {
  const bool fp8 = format_ == cuda::GemvWeightFormat::kFP8;
  QuantLinear q;
  q.format = fp8 ? WeightFormat::kFp8 : WeightFormat::kInt4;
  q.group_size = fp8 ? 0 : G_;
  auto* qd = const_cast<uint8_t*>(q_.data());
  q.qweight = TensorView(qd, fp8 ? DType::kF8E4M3 : DType::kU8, {N_, K_});
  auto* sd = const_cast<float*>(scale_.data());
  q.scale = fp8 ? TensorView(sd, DType::kF32, {N_}) : TensorView(sd, DType::kF32, {N_, K_ / G_});
  if (!fp8) q.zero = TensorView(const_cast<uint8_t*>(zero_.data()), DType::kU8, {N_, K_ / G_});
  std::vector<float> w(size_t(N_) * K_);
  for (int n = 0; n < N_; ++n) dequantize_row(q, n, K_, w.data() + size_t(n) * K_);
  return w;
}

}  // namespace ceiling::bench
