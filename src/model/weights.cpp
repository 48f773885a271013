#include "model/weights.h"

#include <algorithm>

#include "core/status.h"

namespace ceiling {

TensorView WeightArena::alloc(DType dtype, std::initializer_list<int64_t> shape) {
  TensorView t(nullptr, dtype, shape);
  const size_t n = t.nbytes();
  buffers_.emplace_back(new std::byte[std::max<size_t>(n, 1)]());
  bytes_ += n;
  t.data = buffers_.back().get();
  return t;
}

void WeightArena::adopt(WeightArena&& other) {
  for (auto& b : other.buffers_) buffers_.push_back(std::move(b));
  bytes_ += other.bytes_;
  other.buffers_.clear();
  other.bytes_ = 0;
}

const char* proj_name(Proj p) {
  static constexpr const char* kNames[] = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                           "gate_proj", "up_proj", "down_proj"};
  CEILING_ENSURE(p < kNumProj, "no projection {}", static_cast<int>(p));
  return kNames[p];
}

const char* weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::kDense:
      return "dense";
    case WeightFormat::kFp8:
      return "fp8";
    case WeightFormat::kInt4:
      return "int4";
  }
  return "?";
}

const char* bench_weights_name(WeightFormat f) {
  return f == WeightFormat::kDense ? "bf16" : weight_format_name(f);
}

const TensorView& LayerWeights::dense(Proj p) const {
  switch (p) {
    case kQProj:
      return q_proj;
    case kKProj:
      return k_proj;
    case kVProj:
      return v_proj;
    case kOProj:
      return o_proj;
    case kGateProj:
      return gate_proj;
    case kUpProj:
      return up_proj;
    case kDownProj:
      return down_proj;
    case kNumProj:
      break;
  }
  fail("no projection {}", static_cast<int>(p));
}

TensorView& LayerWeights::dense(Proj p) {
  return const_cast<TensorView&>(static_cast<const LayerWeights&>(*this).dense(p));
}

WeightFormat ModelWeights::quant_format() const {
  for (const LayerWeights& l : layers)
    for (const QuantLinear& q : l.quant)
      if (q.quantized()) return q.format;
  return WeightFormat::kDense;
}

}  // namespace ceiling
