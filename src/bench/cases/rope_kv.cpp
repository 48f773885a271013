#include "bench/cases/rope_kv.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <set>

#include "bench/cases/case_util.h"
#include "kernels/cpu/ref.h"
#include "kernels/cuda/rope_kv.h"
#include "model/quantize.h"

namespace ceiling::bench {
namespace {

using bf16 = __nv_bfloat16;

class RopeKvCase : public CaseBase {
 public:
  explicit RopeKvCase(const RopeKvShape& sh) : sh_(sh) {
    if (sh_.num_blocks == 0) sh_.num_blocks = (sh_.T + sh_.block_size - 1) / sh_.block_size + 1;
    row_ = (sh_.Hq + 2 * sh_.Hkv) * sh_.D;
    ModelConfig c;
    c.head_dim = sh_.D;
    c.rope_theta = 500000.0;
    c.rope_scaling.type = RopeScaling::Type::kLlama3;
    c.rope_scaling.factor = 8.0;
    inv_freq_ = cpu::rope_inv_freq(c);
  }
  std::string op() const override {
    return std::string(sh_.qk_norm ? "qk_norm_rope_kv_write" : "rope_kv_write") +
           (sh_.cfg ? "_cfg" : "");
  }
  bool dispatched() const override { return !sh_.cfg; }
  std::string shape() const override {
    std::string s = kv("T", sh_.T) + " " + kv("Hq", sh_.Hq) + " " + kv("Hkv", sh_.Hkv) + " " +
                    kv("D", sh_.D) + " " + kv("bs", sh_.block_size);
    if (sh_.seq_slots) s += " slots=seq";
    if (sh_.cfg) s += " cfg=" + cuda::rope_kv_config_name(*sh_.cfg);
    if (sh_.fp8_kv) s += " kv=fp8";
    return s;
  }
  nlohmann::json params() const override {
    return {{"T", sh_.T},
            {"Hq", sh_.Hq},
            {"Hkv", sh_.Hkv},
            {"D", sh_.D},
            {"block_size", sh_.block_size},
            {"num_blocks", sh_.num_blocks},
            {"qk_norm", sh_.qk_norm},
            {"seq_slots", sh_.seq_slots},
            {"kv_dtype", sh_.fp8_kv ? "fp8" : "bf16"}};
  }
  std::string baseline_name() const override {
    return "rotate-half + index_copy_ into cache (torch composite)";
  }
  Cost cost() const override {
    Cost c;
    const double q = double(sh_.T) * sh_.Hq * sh_.D, k = double(sh_.T) * sh_.Hkv * sh_.D;
    c.bytes = 2.0 * (2 * q + 2 * k + 2 * k) + 8.0 * sh_.T +
              4.0 * sh_.D / 2;  // q r+w, k/v read, cache write
    c.write_bytes = 2.0 * (q + 2 * k);
    c.flops = 3.0 * (q + k);  // 6 per rotated pair
    // The position and slot are loaded together with q/k/v (no load waits on them); the stores
    // of the rotated values follow the loads: two dependent phases, as any load-compute-store.
    c.round_trips = 2;
    return c;
  }
  size_t set_bytes() const override {
    const double cache = 2.0 * sh_.num_blocks * sh_.Hkv * sh_.block_size * sh_.D * eb() / 2;
    return bf16_bytes(double(sh_.T) * row_ + cache) + 8 * size_t(sh_.T);
  }
  void setup(int copies, uint64_t seed, cudaStream_t s) override {
    remember(copies, seed);
    qkv_ = Pool<bf16>(size_t(sh_.T) * row_, copies);
    pos_ = Pool<int32_t>(sh_.T, copies);
    slots_ = Pool<int32_t>(sh_.T, copies);
    const size_t cache = size_t(sh_.num_blocks) * sh_.Hkv * sh_.block_size * sh_.D;
    kc_ = Pool<uint8_t>(cache * eb(), copies);  // per set: cache writes land in cold memory too
    vc_ = Pool<uint8_t>(cache * eb(), copies);
    freq_ = Pool<float>(inv_freq_.size(), 1);
    norm_ = Pool<bf16>(2 * size_t(sh_.D), 1);
    to_device(freq_.at(0), inv_freq_, s);
    fill_uniform(qkv_.base(), qkv_.total(), seed, -2.0f, 2.0f, s);
    fill_uniform(norm_.base(), norm_.total(), seed + 1, 0.5f, 1.5f, s);
    fill_uniform_int(pos_.base(), pos_.total(), seed + 2, 0, sh_.max_position, s);
    std::mt19937_64 rng(seed);
    std::vector<int32_t> all(pos_.total());
    for (int i = 0; i < copies; ++i) {
      const auto sl = draw_slots(rng);
      std::copy(sl.begin(), sl.end(), all.begin() + (slots_.at(i) - slots_.base()));
    }
    to_device(slots_.base(), all, s);
  }
  Status run(int set, cudaStream_t s) override {
    cuda::RopeKvArgs a;
    bf16* row0 = qkv_.at(set);
    a.q = row0;
    a.k = row0 + sh_.Hq * sh_.D;
    a.v = row0 + (sh_.Hq + sh_.Hkv) * sh_.D;
    a.q_stride = a.k_stride = a.v_stride = row_;
    a.positions = pos_.at(set);
    a.slot_mapping = slots_.at(set);
    a.inv_freq = freq_.at(0);
    a.k_cache = kc_.at(set);
    a.v_cache = vc_.at(set);
    a.num_blocks = sh_.num_blocks;
    a.block_size = sh_.block_size;
    if (sh_.fp8_kv) {
      a.kv_format = cuda::KvFormat::kFP8;
      a.k_scale_inv = 1.0f / sh_.k_scale;
      a.v_scale_inv = 1.0f / sh_.v_scale;
    }
    if (sh_.qk_norm) {
      a.q_norm_w = norm_.at(0);
      a.k_norm_w = norm_.at(0) + sh_.D;
    }
    a.norm_eps = kEps;
    a.T = sh_.T;
    a.Hq = sh_.Hq;
    a.Hkv = sh_.Hkv;
    a.D = sh_.D;
    return sh_.cfg ? cuda::rope_kv_write_with_config(a, *sh_.cfg, s) : cuda::rope_kv_write(a, s);
  }
  CheckResult check(cudaStream_t s) override;

 private:
  static constexpr float kEps = 1e-6f;
  size_t eb() const { return sh_.fp8_kv ? 1 : 2; }  // bytes per cached value
  // Cache element i of a host copy, as a reader of the cache takes it.
  float cached(const std::vector<uint8_t>& c, int64_t i, float scale) const {
    if (sh_.fp8_kv) return e4m3_to_f32(c[i]) * scale;
    uint16_t b;
    std::memcpy(&b, &c[2 * i], 2);
    return bf16_to_f32(b);
  }
  // Distinct random slots (or 0, 1, ... with seq_slots); every skip_every-th token gets -1.
  std::vector<int32_t> draw_slots(std::mt19937_64& rng) const {
    std::vector<int32_t> perm(size_t(sh_.num_blocks) * sh_.block_size);
    std::iota(perm.begin(), perm.end(), 0);
    if (!sh_.seq_slots) std::shuffle(perm.begin(), perm.end(), rng);
    perm.resize(sh_.T);
    if (sh_.skip_every > 0)
      for (int t = 0; t < sh_.T; t += sh_.skip_every) perm[t] = -1;
    return perm;
  }
  RopeKvShape sh_;
  int row_;
  std::vector<float> inv_freq_;
  Pool<bf16> qkv_, norm_;
  Pool<uint8_t> kc_, vc_;
  Pool<int32_t> pos_, slots_;
  Pool<float> freq_;
};

CheckResult RopeKvCase::check(cudaStream_t s) {
  const uint64_t sd = check_seed();
  const int T = sh_.T, Hq = sh_.Hq, Hkv = sh_.Hkv, D = sh_.D;
  fill_uniform(qkv_.at(0), qkv_.n(), sd, -2.0f, 2.0f, s);
  fill_uniform(norm_.at(0), norm_.n(), sd + 1, 0.5f, 1.5f, s);
  fill_uniform_int(pos_.at(0), T, sd + 2, 0, sh_.max_position, s);
  std::mt19937_64 rng(sd);
  const std::vector<int32_t> slots = draw_slots(rng);
  to_device(slots_.at(0), slots, s);
  poison(kc_.at(0), kc_.n(), s);
  poison(vc_.at(0), vc_.n(), s);
  const auto qkv = to_f32(to_host(qkv_.at(0), qkv_.n(), s));
  const auto pos = to_host(pos_.at(0), T, s);
  const auto norm = to_host(norm_.at(0), norm_.n(), s);
  run(0, s).throw_if_error();
  const auto qkv_out = to_f32(to_host(qkv_.at(0), qkv_.n(), s));
  const auto kc = to_host(kc_.at(0), kc_.n(), s);
  const auto vc = to_host(vc_.at(0), vc_.n(), s);

  // Reference: split q, k, v; optional per-head norm; rope; kv_write into an fp32 cache.
  std::vector<float> q(size_t(T) * Hq * D), k(size_t(T) * Hkv * D), v(k.size());
  for (int t = 0; t < T; ++t) {
    const float* r = qkv.data() + size_t(t) * row_;
    std::copy_n(r, Hq * D, q.data() + size_t(t) * Hq * D);
    std::copy_n(r + Hq * D, Hkv * D, k.data() + size_t(t) * Hkv * D);
    std::copy_n(r + (Hq + Hkv) * D, Hkv * D, v.data() + size_t(t) * Hkv * D);
  }
  if (sh_.qk_norm) {
    bf16* w = const_cast<bf16*>(norm.data());
    cpu::rms_norm(q.data(), nullptr, TensorView(w, DType::kBF16, {D}), T * Hq, D, kEps, q.data());
    cpu::rms_norm(k.data(), nullptr, TensorView(w + D, DType::kBF16, {D}), T * Hkv, D, kEps,
                  k.data());
  }
  cpu::rope(q.data(), k.data(), pos.data(), inv_freq_.data(), T, Hq, Hkv, D);
  const size_t cache_elems = kc.size() / eb();
  std::vector<float> kref(cache_elems, 0.0f), vref(cache_elems, 0.0f);
  cpu::PagedKv cache{kref.data(), vref.data(), sh_.num_blocks, sh_.block_size, Hkv, D};
  cpu::kv_write(k.data(), v.data(), slots.data(), T, cache);

  CheckResult r;
  r.tolerance = kTolBf16Out;
  // q in place (and the k/v part of the buffer untouched).
  std::vector<float> q_out(q.size());
  for (int t = 0; t < T; ++t) {
    std::copy_n(qkv_out.data() + size_t(t) * row_, Hq * D, q_out.data() + size_t(t) * Hq * D);
    if (std::memcmp(qkv_out.data() + size_t(t) * row_ + Hq * D,
                    qkv.data() + size_t(t) * row_ + Hq * D, sizeof(float) * 2 * Hkv * D) != 0)
      r.failure = "k/v input modified at token " + std::to_string(t);
  }
  const double eq = rel_err(q_out, q);
  // Cache: written slots compared; every other slot must still hold the poison (0xFF bytes). The
  // cache holds bf16 of the reference (fp8: e4m3_round of that bf16 value, as CpuOps rounds), k up
  // to its rounding, v bit-exact.
  std::set<int32_t> written(slots.begin(), slots.end());
  std::vector<float> kg, kr, vg, vr;
  for (int64_t slot = 0; slot < int64_t(sh_.num_blocks) * sh_.block_size; ++slot)
    for (int h = 0; h < Hkv; ++h) {
      const int64_t off = cache.offset(slot, h);
      if (written.count(static_cast<int32_t>(slot))) {
        for (int64_t i = off; i < off + D; ++i) {
          kg.push_back(cached(kc, i, sh_.k_scale));
          vg.push_back(cached(vc, i, sh_.v_scale));
          const float kb = bf16_to_f32(f32_to_bf16(kref[i])),
                      vb = bf16_to_f32(f32_to_bf16(vref[i]));
          kr.push_back(sh_.fp8_kv ? e4m3_round(kb, sh_.k_scale) : kb);
          vr.push_back(sh_.fp8_kv ? e4m3_round(vb, sh_.v_scale) : vb);
        }
      } else {
        for (int64_t i = off * int64_t(eb()); i < (off + D) * int64_t(eb()); ++i)
          if (kc[i] != 0xFF || vc[i] != 0xFF)
            r.failure = "stray cache write at slot " + std::to_string(slot);
      }
    }
  const double ek = rel_err(kg, kr);
  const double ev = rel_err(vg, vr);
  if (ev != 0.0) r.failure = "v cache is not a bit-exact copy";
  r.max_rel_err = std::max({eq, ek, ev});
  r.detail = err_str("q", eq) + "; " + err_str("k_cache", ek) + "; " + err_str("v_cache", ev);
  return r;
}

}  // namespace

std::unique_ptr<KernelCase> make_rope_kv_case(const RopeKvShape& shape) {
  return std::make_unique<RopeKvCase>(shape);
}

void register_rope_kv_cases(CaseList& out) {
  for (int T : {1, 64, 4096}) {
    RopeKvShape s;
    s.T = T;
    out.push_back(make_rope_kv_case(s));
  }
  RopeKvShape q3;  // Qwen3-8B-like: 32 q heads, 8 kv heads of 128, q/k norm
  q3.T = 4096;
  q3.qk_norm = true;
  out.push_back(make_rope_kv_case(q3));
  // A prefill's own slot layout (consecutive slots: each K/V head row a 4 KB run per block)
  // against the random slots above; then other configurations side by side (rope_kv_write takes
  // tok1u4cs at T = 4096): the first kernel's mapping (one token a CTA, plain stores) and two
  // tokens a CTA.
  RopeKvShape seq;
  seq.T = 4096;
  seq.seq_slots = true;
  out.push_back(make_rope_kv_case(seq));
  for (bool qk_norm : {false, true})
    for (cuda::RopeKvConfig c : {cuda::RopeKvConfig{1, 4, false}, cuda::RopeKvConfig{2, 4, true}}) {
      RopeKvShape sh;
      sh.T = 4096;
      sh.qk_norm = qk_norm;
      sh.cfg = c;
      out.push_back(make_rope_kv_case(sh));
    }
  RopeKvShape narrow;  // stories260K's heads (8 q, 4 kv of 8): the narrow kernel
  narrow.T = 4096;
  narrow.Hq = 8;
  narrow.Hkv = 4;
  narrow.D = 8;
  out.push_back(make_rope_kv_case(narrow));
}

}  // namespace ceiling::bench
