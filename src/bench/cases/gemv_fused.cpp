#include "bench/cases/gemv_fused.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

#include "bench/cases/case_util.h"
#include "bench/quant_weights.h"
#include "core/dtype.h"
#include "kernels/cpu/ref.h"
#include "kernels/cuda/linear.h"

namespace ceiling::bench {
namespace {

using bf16 = __nv_bfloat16;
constexpr float kEps = 1e-5f;

const char* input_name(cuda::GemvInput in) {
  return in == cuda::GemvInput::kRmsNorm ? "rms_norm" : "plain";
}

using WFmt = cuda::GemvWeightFormat;

// The weights of a case: bf16 from a pool of its own, or fp8 / int4 (QuantWeightPool).
struct CaseWeights {
  WFmt fmt = WFmt::kBF16;
  int group = 0;  // int4
  QuantWeightPool q;
  bool quant() const { return fmt != WFmt::kBF16; }
  std::string shape() const {
    if (!quant()) return "";
    std::string r = " w=";
    r += cuda::gemv_weight_format_name(fmt);
    if (fmt == WFmt::kInt4) r += " G=" + std::to_string(group);
    return r;
  }
  void add_params(nlohmann::json& j) const {
    if (!quant()) return;
    j["weights"] = cuda::gemv_weight_format_name(fmt);
    if (fmt == WFmt::kInt4) j["group_size"] = group;
  }
  double bytes(int N, int K) const {
    return static_cast<double>(cuda::gemv_weight_bytes(fmt, N, K, group));
  }
};

// out [M, N] (+)= prologue(x) · W^T (+ bias), or silu(gate) · up of it, as the engine's fused
// decode steps run it.
class GemvFusedCase : public CaseBase {
 public:
  GemvFusedCase(cuda::GemvInput input, bool accumulate, bool pairs, int M, int N, int K, bool bias,
                std::optional<cuda::GemvConfig> cfg, WFmt fmt = WFmt::kBF16, int group = 0)
      : in_(input), acc_(accumulate), pairs_(pairs), M_(M), N_(N), K_(K), bias_(bias), cfg_(cfg) {
    w_fmt_.fmt = fmt;
    w_fmt_.group = group;
  }
  std::string op() const override {
    if (w_fmt_.quant()) return cfg_ ? "linear_gemv_quant_cfg" : "linear_gemv_quant";
    return cfg_ ? "linear_gemv_fused_cfg" : "linear_gemv_fused";
  }
  // The engine fuses where the dispatch picks ceiling's GEMV for the shape (linear.h), and takes
  // the RMS-norm input only where it pays (gemv.h).
  // Quantized weights take the GEMV for every M ≤ 16 (engine/cuda/cuda_ops.cpp).
  bool dispatched() const override {
    return !cfg_ &&
           (w_fmt_.quant() || cuda::linear_path(cuda::current_crossover_table(), M_, N_, K_) ==
                                  cuda::LinearPath::kGemv) &&
           (in_ != cuda::GemvInput::kRmsNorm || cuda::gemv_norm_input_pays(M_));
  }
  std::string shape() const override {
    return kv("M", M_) + " " + kv("N", N_) + " " + kv("K", K_) + " in=" + input_name(in_) +
           (acc_ ? " +residual" : "") + (pairs_ ? " out=silu_pairs" : "") + (bias_ ? " bias" : "") +
           (cfg_ ? " cfg=" + cuda::gemv_config_name(*cfg_) : "") + w_fmt_.shape();
  }
  nlohmann::json params() const override {
    nlohmann::json j = {{"M", M_},
                        {"N", N_},
                        {"K", K_},
                        {"bias", bias_},
                        {"input", input_name(in_)},
                        {"accumulate", acc_},
                        {"silu_pairs", pairs_}};
    w_fmt_.add_params(j);
    return j;
  }
  std::string baseline_name() const override {
    if (w_fmt_.fmt == WFmt::kFP8) return "torch._scaled_mm (fp8 x per tensor, W per row)";
    if (w_fmt_.fmt == WFmt::kInt4) return "torch dequantize + F.linear";
    return "torch unfused (norm/silu, F.linear, add)";
  }
  Cost cost() const override {
    Cost c;
    c.flops = 2.0 * M_ * double(N_) * K_;
    c.bytes = w_fmt_.bytes(N_, K_) + 2.0 * M_ * K_ + 2.0 * M_ * out_cols() * (acc_ ? 2 : 1) +
              (bias_ ? 2.0 * N_ : 0) + (in_ == cuda::GemvInput::kRmsNorm ? 2.0 * K_ : 0);
    c.write_bytes = 2.0 * M_ * out_cols();
    c.math = DType::kF32;  // CUDA-core FMAs
    c.round_trips = 2;     // loads (the residual's with the first weights), then the stores
    return c;
  }
  size_t set_bytes() const override {
    return static_cast<size_t>(w_fmt_.bytes(N_, K_)) +
           bf16_bytes(double(M_) * K_ + N_ + K_ + double(M_) * out_cols());
  }
  void setup(int copies, uint64_t seed, cudaStream_t s) override {
    remember(copies, seed);
    w_ = Pool<bf16>(w_fmt_.quant() ? 1 : size_t(N_) * K_, copies);
    if (w_fmt_.quant()) {
      w_fmt_.q = QuantWeightPool(w_fmt_.fmt, N_, K_, w_fmt_.group, copies);
      w_fmt_.q.fill(seed + 5, s);
    }
    x_ = Pool<bf16>(size_t(M_) * K_, copies);
    b_ = Pool<bf16>(N_, copies);
    g_ = Pool<bf16>(K_, copies);
    out_ = Pool<bf16>(size_t(M_) * out_cols(), copies);
    fill(seed, w_.base(), x_.base(), b_.base(), g_.base(), out_.base(), w_.total(), x_.total(),
         b_.total(), g_.total(), out_.total(), s);
  }
  Status run(int set, cudaStream_t s) override {
    cuda::GemvFusion f;
    f.input = in_;
    f.accumulate = acc_;
    f.norm_weight = g_.at(set);
    f.eps = kEps;
    f.silu_pairs = pairs_;
    if (w_fmt_.quant() && cfg_)
      return cuda::gemv_fused_quant_with_config(*cfg_, f, x_.at(set), w_fmt_.q.at(set),
                                                bias_ ? b_.at(set) : nullptr, out_.at(set), M_, N_,
                                                K_, s);
    if (w_fmt_.quant())
      return cuda::gemv_fused_quant(f, x_.at(set), w_fmt_.q.at(set), bias_ ? b_.at(set) : nullptr,
                                    out_.at(set), M_, N_, K_, s);
    if (cfg_)
      return cuda::gemv_fused_with_config(*cfg_, f, x_.at(set), w_.at(set),
                                          bias_ ? b_.at(set) : nullptr, out_.at(set), N_, K_, s);
    return cuda::gemv_fused(f, x_.at(set), w_.at(set), bias_ ? b_.at(set) : nullptr, out_.at(set),
                            M_, N_, K_, s);
  }
  // The reference is the unfused sequence in f32: RMSNorm(r)·γ (unrounded, as the kernel keeps
  // it), cpu::linear, then bf16(result) + residual, or silu_mul of the bf16-rounded gate and up.
  CheckResult check(cudaStream_t s) override {
    const uint64_t sd = check_seed();
    fill(sd, w_.at(0), x_.at(0), b_.at(0), g_.at(0), out_.at(0), w_.n(), x_.n(), b_.n(), g_.n(),
         out_.n(), s);
    if (w_fmt_.quant()) w_fmt_.q.fill(sd + 5, s, true);
    if (!acc_) poison(out_.at(0), out_.n() * sizeof(bf16), s);
    const auto out0 = to_f32(to_host(out_.at(0), out_.n(), s));
    run(0, s).throw_if_error();
    const auto x = to_f32(to_host(x_.at(0), x_.n(), s));
    const auto g = to_f32(to_host(g_.at(0), g_.n(), s));
    std::vector<float> in(size_t(M_) * K_);
    for (int m = 0; m < M_; ++m) {
      const float* r = x.data() + size_t(m) * K_;
      double ss = 0;
      for (int k = 0; k < K_; ++k) ss += double{r[k]} * r[k];
      const auto scale = static_cast<float>(1.0 / std::sqrt(ss / K_ + kEps));
      for (int k = 0; k < K_; ++k) {
        float& v = in[size_t(m) * K_ + k];
        if (in_ == cuda::GemvInput::kRmsNorm)
          v = r[k] * scale * g[k];
        else
          v = r[k];
      }
    }
    const auto w = to_host(w_.at(0), w_.n(), s);
    const auto b = to_host(b_.at(0), b_.n(), s);
    std::vector<float> wq = w_fmt_.quant() ? w_fmt_.q.dequantized() : std::vector<float>{};
    TensorView wv = w_fmt_.quant()
                        ? TensorView(wq.data(), DType::kF32, {N_, K_})
                        : TensorView(const_cast<bf16*>(w.data()), DType::kBF16, {N_, K_});
    TensorView bv(const_cast<bf16*>(b.data()), DType::kBF16, {N_});
    std::vector<float> ref(size_t(M_) * N_);
    cpu::linear(in.data(), wv, bias_ ? &bv : nullptr, M_, ref.data());
    if (acc_)
      for (size_t i = 0; i < ref.size(); ++i) ref[i] = round_bf16(ref[i]) + out0[i];
    if (pairs_) {
      const int half = N_ / 2;
      std::vector<float> act(size_t(M_) * half);
      for (int m = 0; m < M_; ++m)
        for (int j = 0; j < half; ++j) {
          act[size_t(m) * half + j] =
              silu_mul_ref(ref[size_t(m) * N_ + j], ref[size_t(m) * N_ + half + j]);
        }
      ref = std::move(act);
    }
    const auto got = to_f32(to_host(out_.at(0), out_.n(), s));
    CheckResult r;
    r.tolerance = kTolBf16Out;
    r.max_rel_err = rel_err(got, ref);
    r.detail = err_str("out", r.max_rel_err);
    return r;
  }

 private:
  int out_cols() const { return pairs_ ? N_ / 2 : N_; }
  // x in [-2, 2] (SiLU sees both signs), |W| ≤ 0.1, γ in [0.2, 1.5], the residual in [-4, 4].
  static void fill(uint64_t seed, bf16* w, bf16* x, bf16* b, bf16* g, bf16* out, size_t nw,
                   size_t nx, size_t nb, size_t ng, size_t nout, cudaStream_t s) {
    fill_uniform(w, nw, seed, -0.1f, 0.1f, s);
    fill_uniform(x, nx, seed + 1, -2.0f, 2.0f, s);
    fill_uniform(b, nb, seed + 2, -1.0f, 1.0f, s);
    fill_uniform(g, ng, seed + 3, 0.2f, 1.5f, s);
    fill_uniform(out, nout, seed + 4, -4.0f, 4.0f, s);
  }
  cuda::GemvInput in_;
  bool acc_, pairs_;
  int M_, N_, K_;
  bool bias_;
  std::optional<cuda::GemvConfig> cfg_;
  CaseWeights w_fmt_;
  Pool<bf16> w_, x_, b_, g_, out_;
};

// The decode QKV projection with RMSNorm prologue and the RoPE + KV-cache write epilogue:
// x [M, H] residual rows, W = [Wq; Wk; Wv] [(Hq + 2·Hkv)·D, H]; rotated q into out [M, N], rotated
// k and v into a paged cache (block size 16) at distinct random slots, every third token's slot
// -1 (a padding row: nothing written). Reference: RMSNorm·γ, cpu::linear, bf16 rounding (the
// unfused QKV output), cpu::rope; the cache is NaN-poisoned, so a write to a skipped slot or a
// missed write shows.
class GemvRopeCase : public CaseBase {
 public:
  GemvRopeCase(int M, int H, int Hq, int Hkv, int D, std::optional<cuda::GemvConfig> cfg,
               WFmt fmt = WFmt::kBF16, int group = 0,
               cuda::GemvInput input = cuda::GemvInput::kRmsNorm)
      : M_(M), H_(H), Hq_(Hq), Hkv_(Hkv), D_(D), cfg_(cfg), in_(input) {
    w_fmt_.fmt = fmt;
    w_fmt_.group = group;
  }
  std::string op() const override {
    if (w_fmt_.quant()) return cfg_ ? "linear_gemv_quant_cfg" : "linear_gemv_quant";
    return cfg_ ? "linear_gemv_fused_cfg" : "linear_gemv_fused";
  }
  bool dispatched() const override {  // the input the engine picks: see GemvFusedCase
    return !cfg_ &&
           (w_fmt_.quant() || cuda::linear_path(cuda::current_crossover_table(), M_, N(), H_) ==
                                  cuda::LinearPath::kGemv) &&
           norm() == cuda::gemv_norm_input_pays(M_);
  }
  std::string shape() const override {
    return kv("M", M_) + " " + kv("N", N()) + " " + kv("K", H_) +
           (norm() ? " in=rms_norm" : " in=plain") + " out=rope_kv " + kv("Hq", Hq_) + " " +
           kv("Hkv", Hkv_) + " " + kv("D", D_) +
           (cfg_ ? " cfg=" + cuda::gemv_config_name(*cfg_) : "") + w_fmt_.shape();
  }
  nlohmann::json params() const override {
    nlohmann::json j = {{"M", M_},
                        {"N", N()},
                        {"K", H_},
                        {"bias", false},
                        {"input", norm() ? "rms_norm" : "plain"},
                        {"Hq", Hq_},
                        {"Hkv", Hkv_},
                        {"D", D_},
                        {"accumulate", false},
                        {"rope", true},
                        {"silu_pairs", false}};
    w_fmt_.add_params(j);
    return j;
  }
  std::string baseline_name() const override {
    return norm() ? "torch unfused (F.rms_norm, F.linear, rotate-half, index_put)"
                  : "torch unfused (F.linear, rotate-half, index_put)";
  }
  Cost cost() const override {
    Cost c;
    c.flops = 2.0 * M_ * double(N()) * H_ + 3.0 * M_ * (Hq_ + Hkv_) * D_;
    c.bytes = w_fmt_.bytes(N(), H_) + 2.0 * M_ * H_ + (norm() ? 2.0 * H_ : 0.0) +
              2.0 * M_ * Hq_ * D_ + 2.0 * M_ * 2 * Hkv_ * D_ + 8.0 * M_ + 4.0 * D_ / 2;
    c.write_bytes = 2.0 * M_ * Hq_ * D_ + 2.0 * M_ * 2 * Hkv_ * D_;  // q, and k, v into the cache
    c.math = DType::kF32;
    c.round_trips = 2;
    return c;
  }
  size_t set_bytes() const override {
    return static_cast<size_t>(w_fmt_.bytes(N(), H_)) +
           bf16_bytes(double(M_) * H_ + H_ + double(M_) * N() + 2.0 * cache_elems());
  }
  void setup(int copies, uint64_t seed, cudaStream_t s) override {
    remember(copies, seed);
    w_ = Pool<bf16>(w_fmt_.quant() ? 1 : size_t(N()) * H_, copies);
    if (w_fmt_.quant()) {
      w_fmt_.q = QuantWeightPool(w_fmt_.fmt, N(), H_, w_fmt_.group, copies);
      w_fmt_.q.fill(seed + 5, s);
    }
    x_ = Pool<bf16>(size_t(M_) * H_, copies);
    g_ = Pool<bf16>(H_, copies);
    out_ = Pool<bf16>(size_t(M_) * N(), copies);
    kc_ = Pool<bf16>(cache_elems(), copies);
    vc_ = Pool<bf16>(cache_elems(), copies);
    pos_ = Pool<int32_t>(M_, 1);
    slots_ = Pool<int32_t>(M_, 1);
    inv_ = Pool<float>(D_ / 2, 1);
    fill_uniform(w_.base(), w_.total(), seed, -0.1f, 0.1f, s);
    fill_uniform(x_.base(), x_.total(), seed + 1, -2.0f, 2.0f, s);
    fill_uniform(g_.base(), g_.total(), seed + 2, 0.2f, 1.5f, s);
    draw_step(seed, s);
  }
  Status run(int set, cudaStream_t s) override {
    cuda::GemvFusion f;
    f.input = in_;
    if (norm()) {
      f.norm_weight = g_.at(set);
      f.eps = kEps;
    }
    f.rope = {pos_.at(0), slots_.at(0), inv_.at(0), kc_.at(set), vc_.at(set),
              kBlocks,    kBlockSize,   Hq_,        Hkv_,        D_};
    if (w_fmt_.quant() && cfg_)
      return cuda::gemv_fused_quant_with_config(*cfg_, f, x_.at(set), w_fmt_.q.at(set), nullptr,
                                                out_.at(set), M_, N(), H_, s);
    if (w_fmt_.quant())
      return cuda::gemv_fused_quant(f, x_.at(set), w_fmt_.q.at(set), nullptr, out_.at(set), M_, N(),
                                    H_, s);
    if (cfg_)
      return cuda::gemv_fused_with_config(*cfg_, f, x_.at(set), w_.at(set), nullptr, out_.at(set),
                                          N(), H_, s);
    return cuda::gemv_fused(f, x_.at(set), w_.at(set), nullptr, out_.at(set), M_, N(), H_, s);
  }
  CheckResult check(cudaStream_t s) override {
    const uint64_t sd = check_seed();
    fill_uniform(w_.at(0), w_.n(), sd, -0.1f, 0.1f, s);
    fill_uniform(x_.at(0), x_.n(), sd + 1, -2.0f, 2.0f, s);
    fill_uniform(g_.at(0), g_.n(), sd + 2, 0.2f, 1.5f, s);
    if (w_fmt_.quant()) w_fmt_.q.fill(sd + 5, s, true);
    draw_step(sd, s);
    poison(out_.at(0), out_.n() * sizeof(bf16), s);
    poison(kc_.at(0), kc_.n() * sizeof(bf16), s);
    poison(vc_.at(0), vc_.n() * sizeof(bf16), s);
    run(0, s).throw_if_error();
    // Reference QKV: RMSNorm(r)·γ (or x as it is), the projection, rounded to bf16 as the
    // unfused GEMV stores it.
    const auto x = to_f32(to_host(x_.at(0), x_.n(), s));
    const auto g = to_f32(to_host(g_.at(0), g_.n(), s));
    std::vector<float> in = x;
    for (int m = 0; m < M_ && norm(); ++m) {
      double ss = 0;
      for (int k = 0; k < H_; ++k) ss += double{x[size_t(m) * H_ + k]} * x[size_t(m) * H_ + k];
      const auto scale = static_cast<float>(1.0 / std::sqrt(ss / H_ + kEps));
      for (int k = 0; k < H_; ++k) in[size_t(m) * H_ + k] = x[size_t(m) * H_ + k] * scale * g[k];
    }
    const auto w = to_host(w_.at(0), w_.n(), s);
    std::vector<float> wq = w_fmt_.quant() ? w_fmt_.q.dequantized() : std::vector<float>{};
    TensorView wv = w_fmt_.quant()
                        ? TensorView(wq.data(), DType::kF32, {N(), H_})
                        : TensorView(const_cast<bf16*>(w.data()), DType::kBF16, {N(), H_});
    std::vector<float> qkv(size_t(M_) * N());
    cpu::linear(in.data(), wv, nullptr, M_, qkv.data());
    for (float& v : qkv) v = round_bf16(v);
    std::vector<float> q(size_t(M_) * Hq_ * D_), k(size_t(M_) * Hkv_ * D_), v(k.size());
    for (int m = 0; m < M_; ++m) {
      const float* row = qkv.data() + size_t(m) * N();
      std::copy(row, row + Hq_ * D_, q.begin() + size_t(m) * Hq_ * D_);
      std::copy(row + Hq_ * D_, row + (Hq_ + Hkv_) * D_, k.begin() + size_t(m) * Hkv_ * D_);
      std::copy(row + (Hq_ + Hkv_) * D_, row + N(), v.begin() + size_t(m) * Hkv_ * D_);
    }
    const auto pos = to_host(pos_.at(0), M_, s);
    const auto slots = to_host(slots_.at(0), M_, s);
    const auto inv = to_host(inv_.at(0), D_ / 2, s);
    cpu::rope(q.data(), k.data(), pos.data(), inv.data(), M_, Hq_, Hkv_, D_);
    // Gather what the kernel wrote: q columns of out, and the cache rows of the written slots.
    const auto out = to_f32(to_host(out_.at(0), out_.n(), s));
    const auto kc = to_f32(to_host(kc_.at(0), kc_.n(), s));
    const auto vc = to_f32(to_host(vc_.at(0), vc_.n(), s));
    std::vector<float> got_q, got_kv, ref_kv;
    for (int m = 0; m < M_; ++m)
      got_q.insert(got_q.end(), out.begin() + size_t(m) * N(),
                   out.begin() + size_t(m) * N() + Hq_ * D_);
    cpu::PagedKv layout{nullptr, nullptr, kBlocks, kBlockSize, Hkv_, D_};
    size_t written = 0;
    for (int m = 0; m < M_; ++m) {
      if (slots[m] < 0) continue;
      for (int h = 0; h < Hkv_; ++h) {
        const int64_t off = layout.offset(slots[m], h);
        const size_t src = (size_t(m) * Hkv_ + h) * D_;
        got_kv.insert(got_kv.end(), kc.begin() + off, kc.begin() + off + D_);
        got_kv.insert(got_kv.end(), vc.begin() + off, vc.begin() + off + D_);
        ref_kv.insert(ref_kv.end(), k.begin() + src, k.begin() + src + D_);
        ref_kv.insert(ref_kv.end(), v.begin() + src, v.begin() + src + D_);
        written += 2 * size_t(D_);
      }
    }
    // Every other cache element must still hold the poison: count the finite ones.
    size_t finite = 0;
    for (size_t i = 0; i < kc.size(); ++i) finite += std::isfinite(kc[i]) + std::isfinite(vc[i]);
    CheckResult r;
    r.tolerance = kTolBf16Out;
    const double eq = rel_err(got_q, q), ekv = rel_err(got_kv, ref_kv);
    r.max_rel_err = std::max(eq, ekv);
    r.detail = err_str("q", eq) + " " + err_str("kv", ekv);
    if (finite != written)
      r.failure = "the cache has " + std::to_string(finite) + " written elements, expected " +
                  std::to_string(written) + " (a skipped slot written or a slot missed)";
    return r;
  }

 private:
  static constexpr int kBlockSize = 16, kBlocks = 7;  // 112 slots
  int N() const { return (Hq_ + 2 * Hkv_) * D_; }
  size_t cache_elems() const { return size_t(kBlocks) * Hkv_ * kBlockSize * D_; }
  // Positions up to 40000 (large angles), distinct slots from a shuffled range, every third -1;
  // llama-style inv_freq for base 500000.
  void draw_step(uint64_t seed, cudaStream_t s) {
    std::mt19937_64 rng(seed);
    std::vector<int32_t> pos(M_), slots(kBlocks * kBlockSize);
    for (auto& p : pos) p = static_cast<int32_t>(rng() % 40000);
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng);
    slots.resize(M_);
    for (int m = 2; m < M_; m += 3) slots[m] = -1;
    std::vector<float> inv(D_ / 2);
    for (int i = 0; i < D_ / 2; ++i) inv[i] = static_cast<float>(std::pow(500000.0, -2.0 * i / D_));
    to_device(pos_.at(0), pos, s);
    to_device(slots_.at(0), slots, s);
    to_device(inv_.at(0), inv, s);
  }
  bool norm() const { return in_ == cuda::GemvInput::kRmsNorm; }
  int M_, H_, Hq_, Hkv_, D_;
  std::optional<cuda::GemvConfig> cfg_;
  cuda::GemvInput in_;
  CaseWeights w_fmt_;
  Pool<bf16> w_, x_, g_, out_, kc_, vc_;
  Pool<int32_t> pos_, slots_;
  Pool<float> inv_;
};

}  // namespace

std::vector<cuda::GemvConfig> fused_norm_configs() {
  return {{128, 2, 2}, {128, 4, 2}, {64, 2, 2}, {64, 4, 2}, {128, 8, 1}, {64, 8, 1}, {32, 8, 1}};
}

std::vector<cuda::GemvConfig> quant_mma_configs() {
  return {{256, 16, 1, 1}, {256, 32, 1, 2}, {128, 32, 1, 2}};
}

std::unique_ptr<KernelCase> make_gemv_fused_case(cuda::GemvInput input, bool accumulate,
                                                 bool silu_pairs, int M, int N, int K, bool bias,
                                                 std::optional<cuda::GemvConfig> cfg) {
  return std::make_unique<GemvFusedCase>(input, accumulate, silu_pairs, M, N, K, bias, cfg);
}

std::unique_ptr<KernelCase> make_gemv_rope_case(int M, int H, int Hq, int Hkv, int D,
                                                std::optional<cuda::GemvConfig> cfg,
                                                cuda::GemvInput input) {
  return std::make_unique<GemvRopeCase>(M, H, Hq, Hkv, D, cfg, WFmt::kBF16, 0, input);
}

std::unique_ptr<KernelCase> make_gemv_quant_case(cuda::GemvWeightFormat fmt, int group,
                                                 cuda::GemvInput input, bool accumulate,
                                                 bool silu_pairs, int M, int N, int K, bool bias,
                                                 std::optional<cuda::GemvConfig> cfg) {
  return std::make_unique<GemvFusedCase>(input, accumulate, silu_pairs, M, N, K, bias, cfg, fmt,
                                         group);
}

std::unique_ptr<KernelCase> make_gemv_quant_rope_case(cuda::GemvWeightFormat fmt, int group, int M,
                                                      int H, int Hq, int Hkv, int D,
                                                      std::optional<cuda::GemvConfig> cfg,
                                                      cuda::GemvInput input) {
  return std::make_unique<GemvRopeCase>(M, H, Hq, Hkv, D, cfg, fmt, group, input);
}

// The batch-1 decode steps of Llama-3.1-8B (QKV 6144 after RMSNorm, plain or with RoPE + KV
// write; gate/up 28672 after RMSNorm writing silu(gate)·up; o and down with the residual add) and
// of Llama-3.2-1B (3072, 16384; head_dim 64).
void register_gemv_fused_cases(CaseList& out) {
  using In = cuda::GemvInput;
  struct Model {
    int H, Hq, Hkv, D, I;
  };
  for (const Model& m : {Model{4096, 32, 8, 128, 14336}, Model{2048, 32, 8, 64, 8192}}) {
    const int Nqkv = (m.Hq + 2 * m.Hkv) * m.D;
    out.push_back(make_gemv_fused_case(In::kRmsNorm, false, false, 1, Nqkv, m.H));
    out.push_back(make_gemv_rope_case(1, m.H, m.Hq, m.Hkv, m.D));
    out.push_back(make_gemv_fused_case(In::kPlain, true, false, 1, m.H, m.H));
    out.push_back(make_gemv_fused_case(In::kRmsNorm, false, true, 1, 2 * m.I, m.H));
    out.push_back(make_gemv_fused_case(In::kPlain, true, false, 1, m.H, m.I));
  }
  // Batched decode (the tensor-core kernel, M > 1) on the 8B shapes.
  for (int M : {4, 16}) {
    const Model m{4096, 32, 8, 128, 14336};
    out.push_back(make_gemv_fused_case(In::kRmsNorm, false, false, M, 6144, m.H));
    out.push_back(make_gemv_rope_case(M, m.H, m.Hq, m.Hkv, m.D));
    out.push_back(make_gemv_rope_case(M, m.H, m.Hq, m.Hkv, m.D, {}, In::kPlain));
    out.push_back(make_gemv_fused_case(In::kPlain, true, false, M, m.H, m.H));
    out.push_back(make_gemv_fused_case(In::kRmsNorm, false, true, M, 2 * m.I, m.H));
    out.push_back(make_gemv_fused_case(In::kPlain, true, false, M, m.H, m.I));
  }
  // The same decode steps with fp8 and int4 (G = 128) weights: M = 1 (the headline; the register
  // kernel), 4 and 16 (the tensor-core kernel).
  for (WFmt fmt : {WFmt::kFP8, WFmt::kInt4})
    for (int M : {1, 4, 16}) {
      const Model m{4096, 32, 8, 128, 14336};
      const int G = fmt == WFmt::kInt4 ? 128 : 0;
      const In in = cuda::gemv_norm_input_pays(M) ? In::kRmsNorm : In::kPlain;
      out.push_back(make_gemv_quant_case(fmt, G, in, false, false, M, 6144, m.H));
      out.push_back(make_gemv_quant_rope_case(fmt, G, M, m.H, m.Hq, m.Hkv, m.D, {}, in));
      out.push_back(make_gemv_quant_case(fmt, G, In::kPlain, true, false, M, m.H, m.H));
      out.push_back(make_gemv_quant_case(fmt, G, in, false, true, M, 2 * m.I, m.H));
      out.push_back(make_gemv_quant_case(fmt, G, In::kPlain, true, false, M, m.H, m.I));
    }
  // The quantized M = 1 kernel's configurations side by side (dispatched, gemv_quant.cu: fp8
  // t32r8u1 / t64r8u1 with the RMS-norm input and t64r2u2 without; int4 t64r4u2 with it and the
  // tensor-core kernel t256r16u1 without).
  for (WFmt fmt : {WFmt::kFP8, WFmt::kInt4})
    for (const cuda::GemvConfig& c :
         {cuda::GemvConfig{128, 2, 2}, cuda::GemvConfig{64, 4, 1}, cuda::GemvConfig{64, 4, 2},
          cuda::GemvConfig{64, 2, 2}, cuda::GemvConfig{256, 16, 1}, cuda::GemvConfig{64, 8, 1},
          cuda::GemvConfig{32, 8, 1}}) {
      if (fmt == WFmt::kInt4 && c.rows == 8) continue;  // fp8 only (gemv_quant.cu)
      const Model m{4096, 32, 8, 128, 14336};
      const int G = fmt == WFmt::kInt4 ? 128 : 0;
      out.push_back(make_gemv_quant_rope_case(fmt, G, 1, m.H, m.Hq, m.Hkv, m.D, c));
      out.push_back(make_gemv_quant_case(fmt, G, In::kPlain, true, false, 1, m.H, m.H, false, c));
      out.push_back(
          make_gemv_quant_case(fmt, G, In::kRmsNorm, false, true, 1, 2 * m.I, m.H, false, c));
      out.push_back(make_gemv_quant_case(fmt, G, In::kPlain, true, false, 1, m.H, m.I, false, c));
    }
  // The tensor-core kernel at M = 1 (plain input), 4 and 16, one 16-row tile a warp against two
  // (quant_mma_configs: x loaded once for two tiles); at M = 1 one tile is in the sweep above.
  for (WFmt fmt : {WFmt::kFP8, WFmt::kInt4})
    for (int M : {1, 4, 16})
      for (const cuda::GemvConfig& c : quant_mma_configs()) {
        if (M == 1 && c.warp_tiles == 1) continue;
        const Model m{4096, 32, 8, 128, 14336};
        const int G = fmt == WFmt::kInt4 ? 128 : 0;
        const In in = cuda::gemv_norm_input_pays(M) ? In::kRmsNorm : In::kPlain;
        if (M > 1) {
          out.push_back(make_gemv_quant_case(fmt, G, in, false, false, M, 6144, m.H, false, c));
          out.push_back(make_gemv_quant_case(fmt, G, in, false, true, M, 2 * m.I, m.H, false, c));
        }
        out.push_back(make_gemv_quant_case(fmt, G, In::kPlain, true, false, M, m.H, m.H, false, c));
        out.push_back(make_gemv_quant_case(fmt, G, In::kPlain, true, false, M, m.H, m.I, false, c));
      }
  // The RMSNorm-input kernels' configurations side by side (t128r2u2 is the dispatched one).
  for (const Model& m : {Model{4096, 32, 8, 128, 14336}, Model{2048, 32, 8, 64, 8192}})
    for (const cuda::GemvConfig& c : fused_norm_configs()) {
      out.push_back(make_gemv_rope_case(1, m.H, m.Hq, m.Hkv, m.D, c));
      out.push_back(make_gemv_fused_case(In::kRmsNorm, false, true, 1, 2 * m.I, m.H, false, c));
    }
}

}  // namespace ceiling::bench
