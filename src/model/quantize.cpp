#include "model/quantize.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <thread>
#include <vector>

#include "core/status.h"

namespace ceiling {

namespace {

void load_row(const TensorView& w, int64_t n, int64_t K, float* dst) {
  const size_t base = static_cast<size_t>(n * K);
  for (int64_t k = 0; k < K; ++k) dst[k] = load_as_f32(w.data, w.dtype, base + k);
}

void check_dense(const TensorView& w) {
  CEILING_ENSURE(w.data != nullptr && w.ndim == 2 && w.is_contiguous() &&
                     (w.dtype == DType::kF32 || w.dtype == DType::kBF16 || w.dtype == DType::kF16),
                 "quantize: needs a contiguous f32/bf16/f16 [N, K] weight (got {} {})",
                 dtype_name(w.dtype), w.shape_str());
}

}  // namespace

QuantLinear quantize_fp8(const TensorView& w, WeightArena& arena) {
  check_dense(w);
  const int64_t N = w.dim(0), K = w.dim(1);
  QuantLinear q;
  q.format = WeightFormat::kFp8;
  q.qweight = arena.alloc(DType::kF8E4M3, {N, K});
  q.scale = arena.alloc(DType::kF32, {N});
  std::vector<float> row(static_cast<size_t>(K));
  for (int64_t n = 0; n < N; ++n) {
    load_row(w, n, K, row.data());
    float amax = 0.0f;
    for (float v : row) amax = std::max(amax, std::fabs(v));
    const float s = amax > 0.0f ? amax / kE4m3Max : 1.0f;
    q.scale.as<float>()[n] = s;
    uint8_t* dst = q.qweight.as<uint8_t>() + n * K;
    for (int64_t k = 0; k < K; ++k) dst[k] = f32_to_e4m3(row[k] / s);
  }
  return q;
}

void quantize_act_row_fp8(const float* x, int64_t K, uint8_t* q, float* scale) {
  float amax = 0.0f;
  for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(x[k]));
  const float s = amax > 0.0f ? amax / kE4m3Max : 1.0f;
  const float inv = 1.0f / s;
  for (int64_t k = 0; k < K; ++k) q[k] = f32_to_e4m3(x[k] * inv);
  *scale = s;
}

int int4_group_for(int64_t K, int preferred) {
  if (preferred > 0 && K % preferred == 0) return preferred;
  if (K % 64 == 0) return 64;
  return static_cast<int>(K);
}

QuantLinear quantize_int4(const TensorView& w, int G, WeightArena& arena) {
  check_dense(w);
  const int64_t N = w.dim(0), K = w.dim(1);
  CEILING_ENSURE(G > 0 && K % G == 0, "quantize int4: group size {} does not divide K = {}", G, K);
  QuantLinear q;
  q.format = WeightFormat::kInt4;
  q.group_size = G;
  q.qweight = arena.alloc(DType::kU8, {N, K});
  q.scale = arena.alloc(DType::kF32, {N, K / G});
  q.zero = arena.alloc(DType::kU8, {N, K / G});
  std::vector<float> row(static_cast<size_t>(K));
  for (int64_t n = 0; n < N; ++n) {
    load_row(w, n, K, row.data());
    for (int64_t g = 0; g < K / G; ++g) {
      const float* x = row.data() + g * G;
      // The range always holds 0 (as GPTQ's quantizer), so the zero point needs no clamp.
      const auto [mn, mx] = std::minmax_element(x, x + G);
      const float lo = std::min(*mn, 0.0f), hi = std::max(*mx, 0.0f);
      float s = bf16_to_f32(f32_to_bf16((hi - lo) / 15.0f));
      if (!(s > 0.0f)) s = 1.0f;  // an all-zero group
      const float z = std::clamp(std::nearbyint(-lo / s), 0.0f, 15.0f);
      q.scale.as<float>()[n * (K / G) + g] = s;
      q.zero.as<uint8_t>()[n * (K / G) + g] = static_cast<uint8_t>(z);
      uint8_t* dst = q.qweight.as<uint8_t>() + n * K + g * G;
      for (int64_t k = 0; k < G; ++k)
        dst[k] = static_cast<uint8_t>(std::clamp(std::nearbyint(x[k] / s) + z, 0.0f, 15.0f));
    }
  }
  return q;
}

void quantize_projections(ModelWeights& w, WeightFormat format, int int4_group_size,
                          WeightArena& arena) {
  CEILING_ENSURE(format == WeightFormat::kFp8 || format == WeightFormat::kInt4,
                 "quantize: unsupported format {}", weight_format_name(format));
  // Layers in parallel (an 8B model: 7 G weights), each thread into an arena of its own.
  const int L = static_cast<int>(w.layers.size());
  const int T =
      std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, std::max(L, 1));
  std::vector<WeightArena> arenas(T);
  std::vector<std::exception_ptr> errors(T);
  const auto work = [&](int t) {
    try {
      for (int li = t; li < L; li += T) {
        LayerWeights& l = w.layers[li];
        for (int p = 0; p < kNumProj; ++p) {
          if (l.quant[p].quantized()) continue;
          TensorView& d = l.dense(static_cast<Proj>(p));
          l.quant[p] = format == WeightFormat::kFp8
                           ? quantize_fp8(d, arenas[t])
                           : quantize_int4(d, int4_group_for(d.dim(1), int4_group_size), arenas[t]);
          d = TensorView();
        }
      }
    } catch (...) {
      errors[t] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < T; ++t) threads.emplace_back(work, t);
  work(0);
  for (auto& th : threads) th.join();
  for (WeightArena& a : arenas) arena.adopt(std::move(a));
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

void dequantize_row(const QuantLinear& q, int64_t n, int64_t K, float* dst) {
  switch (q.format) {
    case WeightFormat::kFp8: {
      const uint8_t* src = q.qweight.as<const uint8_t>() + n * K;
      const float s = q.scale.as<const float>()[n];
      for (int64_t k = 0; k < K; ++k) dst[k] = e4m3_to_f32(src[k]) * s;
      return;
    }
    case WeightFormat::kInt4: {
      const int64_t G = q.group_size, ng = K / G;
      const uint8_t* src = q.qweight.as<const uint8_t>() + n * K;
      const float* s = q.scale.as<const float>() + n * ng;
      const uint8_t* z = q.zero.as<const uint8_t>() + n * ng;
      for (int64_t g = 0; g < ng; ++g) {
        const float zf = static_cast<float>(z[g]), sg = s[g];
        for (int64_t k = g * G; k < (g + 1) * G; ++k)
          dst[k] = (static_cast<float>(src[k]) - zf) * sg;
      }
      return;
    }
    case WeightFormat::kDense:
      break;
  }
  fail("dequantize_row: weight is not quantized");
}

}  // namespace ceiling
