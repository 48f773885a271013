// Binding the tensors of a quantized checkpoint's linear layers (model/quant_load.h).
#include "model/quant_load.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "core/status.h"
#include "model/safetensors.h"

namespace ceiling {

namespace {

struct Ctx {
  const SafetensorsSet& files;
  const std::string& p;  // the projection's name prefix
  std::vector<std::string>& used;
};

std::string where(const SafetensorsSet::Entry& e) {
  return fmt::format("{}: tensor {}", e.file->path().string(), quote_name(e.info->name));
}

// Tensor `<p><suffix>`; nullptr when absent and optional.
const SafetensorsSet::Entry* get(Ctx& c, const char* suffix, bool required, const char* rule) {
  const std::string name = c.p + suffix;
  const SafetensorsSet::Entry* e = c.files.find(name);
  if (e == nullptr) {
    if (required)
      fail("{}: missing tensor {} ({})", c.files.origin().string(), quote_name(name), rule);
    return nullptr;
  }
  c.used.push_back(name);
  return e;
}

void want_dtype(const SafetensorsSet::Entry& e, std::initializer_list<DType> ok, const char* rule) {
  const auto d = e.info->st->dtype;
  bool good = false;
  for (DType t : ok) good = good || (d && *d == t);
  if (!good) fail("{} has dtype {} ({})", where(e), e.info->st->name, rule);
}

void want_shape(const SafetensorsSet::Entry& e, std::initializer_list<int64_t> shape,
                const char* rule) {
  if (e.info->shape != std::vector<int64_t>(shape))
    fail("{} has shape {} but W [N, K] implies [{}] ({})", where(e), e.info->shape_str(),
         fmt::join(shape, ", "), rule);
}

// Element i of a float tensor (f32/bf16/f16) as f32.
float at(const SafetensorsSet::Entry& e, int64_t i) {
  return load_as_f32(e.data, *e.info->st->dtype, static_cast<size_t>(i));
}

void want_float(const SafetensorsSet::Entry& e, const char* rule) {
  want_dtype(e, {DType::kF32, DType::kBF16, DType::kF16}, rule);
}

// Scales must be finite and >= 0 (a zero scale is an all-zero row or group).
float checked_scale(const SafetensorsSet::Entry& e, int64_t i) {
  const float s = at(e, i);
  if (!std::isfinite(s) || s < 0)
    fail("{}: element {} is {} (scales must be finite and non-negative)", where(e), i, s);
  return s;
}

int32_t word(const SafetensorsSet::Entry& e, int64_t i) {
  int32_t w;
  std::memcpy(&w, e.data + i * 4, 4);
  return w;
}

int nibble(int32_t w, int i) {
  return static_cast<int>((static_cast<uint32_t>(w) >> (4 * i)) & 0xfu);
}

QuantLinear bind_fp8(Ctx& c, const SafetensorsSet::Entry& w, int64_t N, int64_t K,
                     WeightArena& arena, bool fbgemm) {
  want_shape(w, {N, K}, "fp8 weight");
  const auto* s = get(c, ".weight_scale", true, "an fp8 weight needs its scale");
  want_float(*s, "weight_scale must be F32, BF16 or F16");
  const int64_t ns = s->info->numel();
  const bool per_row = ns == N && s->info->shape.size() >= 1 && s->info->shape[0] == N &&
                       (s->info->shape.size() == 1 || s->info->shape == std::vector<int64_t>{N, 1});
  if (!per_row && ns != 1)
    fail("{} has shape {}; an fp8 scale is [N, 1] per channel or [1] per tensor (N = {})",
         where(*s), s->info->shape_str(), N);
  QuantLinear q;
  q.format = WeightFormat::kFp8;
  q.qweight = arena.alloc(DType::kF8E4M3, {N, K});
  std::memcpy(q.qweight.data, w.data, static_cast<size_t>(N * K));
  q.scale = arena.alloc(DType::kF32, {N});
  for (int64_t n = 0; n < N; ++n) q.scale.as<float>()[n] = checked_scale(*s, per_row ? n : 0);
  if (const auto* in = get(c, fbgemm ? ".input_scale_ub" : ".input_scale", false, "")) {
    want_float(*in, "input_scale must be F32, BF16 or F16");
    if (in->info->numel() != 1)
      fail("{} has shape {} (an input scale is one element per tensor)", where(*in),
           in->info->shape_str());
    q.input_scale = checked_scale(*in, 0);
  }
  return q;
}

// Checks group size, scales [K/G, N], qzeros [K/G, N/8]; fills scale and zero of q.
void bind_groups(Ctx& c, int64_t N, int64_t K, int G, bool zero_offset, bool awq_order,
                 WeightArena& arena, QuantLinear& q) {
  if (K % G != 0)
    fail("{}: group_size {} does not divide K = {} of {}", c.files.origin().string(), G, K,
         quote_name(c.p));
  const int64_t ng = K / G;
  const auto* s = get(c, ".scales", true, "an int4 weight needs its scales");
  want_float(*s, "scales must be F16, BF16 or F32");
  want_shape(*s, {ng, N}, "scales are [K / group_size, N]");
  const auto* z = get(c, ".qzeros", true, "asymmetric int4 needs its zero points");
  want_dtype(*z, {DType::kI32}, "qzeros are int32 words of 8 nibbles");
  want_shape(*z, {ng, N / 8}, "qzeros are [K / group_size, N / 8]");
  q.group_size = G;
  q.scale = arena.alloc(DType::kF32, {N, ng});
  q.zero = arena.alloc(DType::kU8, {N, ng});
  for (int64_t g = 0; g < ng; ++g)
    for (int64_t n = 0; n < N; ++n) {
      q.scale.as<float>()[n * ng + g] = checked_scale(*s, g * N + n);
      const int nib = awq_order ? kAwqNibbleOf[n % 8] : static_cast<int>(n % 8);
      const int zv = nibble(word(*z, g * (N / 8) + n / 8), nib);
      q.zero.as<uint8_t>()[n * ng + g] = static_cast<uint8_t>(zero_offset ? (zv + 1) & 0xf : zv);
    }
}

QuantLinear bind_int4(Ctx& c, const SafetensorsSet::Entry& qw, int64_t N, int64_t K,
                      const CheckpointQuant& qc, WeightArena& arena) {
  const bool awq = qc.method == QuantMethod::kAwq;
  want_dtype(qw, {DType::kI32}, "qweight is int32 words of 8 nibbles");
  if (N % 8 != 0 || (!awq && K % 8 != 0))
    fail("{}: {} packs 8 values per int32 but N = {}, K = {}", where(qw),
         quant_method_name(qc.method), N, K);
  QuantLinear q;
  q.format = WeightFormat::kInt4;
  q.qweight = arena.alloc(DType::kU8, {N, K});
  uint8_t* dst = q.qweight.as<uint8_t>();
  if (awq) {
    want_shape(qw, {K, N / 8}, "AWQ qweight is [K, N / 8]");
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n)
        dst[n * K + k] =
            static_cast<uint8_t>(nibble(word(qw, k * (N / 8) + n / 8), kAwqNibbleOf[n % 8]));
  } else {
    want_shape(qw, {K / 8, N}, "GPTQ qweight is [K / 8, N]");
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n)
        dst[n * K + k] =
            static_cast<uint8_t>(nibble(word(qw, (k / 8) * N + n), static_cast<int>(k % 8)));
    if (const auto* gi = get(c, ".g_idx", false, "")) {
      want_dtype(*gi, {DType::kI32}, "g_idx is int32");
      want_shape(*gi, {K}, "g_idx is [K]");
      for (int64_t k = 0; k < K; ++k)
        if (word(*gi, k) != k / qc.group_size)
          fail(
              "{}: g_idx[{}] = {} but desc_act false needs k / group_size = {} (act-order "
              "checkpoints are not supported)",
              where(*gi), k, word(*gi, k), k / qc.group_size);
    }
  }
  bind_groups(c, N, K, qc.group_size, !awq && qc.gptq_zero_offset, awq, arena, q);
  return q;
}

}  // namespace

QuantLinear bind_quant_linear(const SafetensorsSet& files, const std::string& prefix, int64_t N,
                              int64_t K, const CheckpointQuant& qc, WeightArena& arena,
                              std::vector<std::string>& used) {
  Ctx c{files, prefix, used};
  if (qc.format() == WeightFormat::kFp8) {
    const SafetensorsSet::Entry* w = files.find(prefix + ".weight");
    if (w == nullptr || w->info->st->dtype != DType::kF8E4M3) return {};  // dense (or missing)
    used.push_back(prefix + ".weight");
    return bind_fp8(c, *w, N, K, arena, qc.method == QuantMethod::kFbgemmFp8);
  }
  if (qc.format() == WeightFormat::kInt4) {
    const SafetensorsSet::Entry* qw = files.find(prefix + ".qweight");
    if (qw == nullptr) return {};
    used.push_back(prefix + ".qweight");
    return bind_int4(c, *qw, N, K, qc, arena);
  }
  return {};
}

float bind_scalar_scale(const SafetensorsSet& files, const std::string& name, float fallback,
                        std::vector<std::string>& used) {
  const SafetensorsSet::Entry* e = files.find(name);
  if (e == nullptr) return fallback;
  used.push_back(name);
  want_float(*e, "a KV cache scale must be F32, BF16 or F16");
  if (e->info->numel() != 1)
    fail("{} has shape {} (a KV cache scale is one element)", where(*e), e->info->shape_str());
  const float s = at(*e, 0);
  if (!std::isfinite(s) || !(s > 0))
    fail("{} is {} (a KV cache scale must be positive and finite)", where(*e), s);
  return s;
}

}  // namespace ceiling
