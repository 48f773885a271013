// How a paged KV cache stores its values (host and device code). bf16: as computed. fp8: E4M3
// with a per-tensor scale per layer (the checkpoint's k_scale / v_scale, else 1): the cache holds
// e4m3(x · (1 / scale)), the fp32 reciprocal computed once, saturated to ±448 and rounded to
// nearest even (cvt .satfinite, as f32_to_e4m3 in core/dtype.h), and a reader takes
// value · scale (meaning: e4m3_round in model/quantize.h, which CpuOps applies to every value it
// writes). Writers take the reciprocal (k_scale_inv), readers the scale.
#pragma once

namespace ceiling::cuda {

enum class KvFormat { kBF16, kFP8 };

inline constexpr int kv_format_bytes(KvFormat f) {
  return f == KvFormat::kFP8 ? 1 : 2;
}
inline constexpr const char* kv_format_name(KvFormat f) {
  return f == KvFormat::kFP8 ? "fp8" : "bf16";
}

}  // namespace ceiling::cuda
