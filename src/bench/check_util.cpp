#include "bench/check_util.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/dtype.h"
#include "core/status.h"

namespace ceiling::bench {

double rel_err(std::span<const float> out, std::span<const float> ref) {
  CEILING_ENSURE(out.size() == ref.size(), "rel_err: {} outputs vs {} reference values", out.size(),
                 ref.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i]) && std::isfinite(ref[i]))
      return std::numeric_limits<double>::infinity();
    const double d = static_cast<double>(out[i]) - ref[i];
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  if (den == 0) return num == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(num / den);
}

std::vector<float> to_f32(std::span<const __nv_bfloat16> v) {
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t bits;
    static_assert(sizeof(bits) == sizeof(__nv_bfloat16));
    std::memcpy(&bits, &v[i], 2);
    r[i] = bf16_to_f32(bits);
  }
  return r;
}

std::vector<__nv_bfloat16> to_bf16(std::span<const float> v) {
  std::vector<__nv_bfloat16> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    __nv_bfloat16_raw raw;
    raw.x = f32_to_bf16(v[i]);
    r[i] = __nv_bfloat16(raw);
  }
  return r;
}

std::vector<float> round_bf16(std::span<const float> v) {
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = bf16_to_f32(f32_to_bf16(v[i]));
  return r;
}

std::string err_str(const std::string& name, double err) {
  return fmt::format("{} {:.2e}", name, err);
}

}  // namespace ceiling::bench
