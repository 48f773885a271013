#include "bench/cases/gemv_fused.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

#include "bench/cases/case_util.h"
#include "core/dtype.h"
#include "kernels/cpu/ref.h"

namespace ceiling::bench {
namespace {

using bf16 = __nv_bfloat16;
constexpr float kEps = 1e-5f;

const char* input_name(cuda::GemvInput in) {
  return in == cuda::GemvInput::kRmsNorm ? "rms_norm" : "plain";
}

float round_bf16(float v) {
  return bf16_to_f32(f32_to_bf16(v));
}

// out [M, N] (+)= prologue(x) · W^T (+ bias), or silu(gate) · up of it, as the engine's fused
// decode steps run it.
class GemvFusedCase : public CaseBase {
 public:
  GemvFusedCase(cuda::GemvInput input, bool accumulate, bool pairs, int M, int N, int K, bool bias)
      : in_(input), acc_(accumulate), pairs_(pairs), M_(M), N_(N), K_(K), bias_(bias) {}
  std::string op() const override { return "linear_gemv_fused"; }
  std::string shape() const override {
    return kv("M", M_) + " " + kv("N", N_) + " " + kv("K", K_) + " in=" + input_name(in_) +
           (acc_ ? " +residual" : "") + (pairs_ ? " out=silu_pairs" : "") + (bias_ ? " bias" : "");
  }
  nlohmann::json params() const override {
    return {{"M", M_},
            {"N", N_},
            {"K", K_},
            {"bias", bias_},
            {"input", input_name(in_)},
            {"accumulate", acc_},
            {"silu_pairs", pairs_}};
  }
  std::string baseline_name() const override { return "torch unfused (norm/silu, F.linear, add)"; }
  Cost cost() const override {
    Cost c;
    c.flops = 2.0 * M_ * double(N_) * K_;
    c.bytes = 2.0 * N_ * double(K_) + 2.0 * M_ * K_ + 2.0 * M_ * out_cols() * (acc_ ? 2 : 1) +
              (bias_ ? 2.0 * N_ : 0) + (in_ == cuda::GemvInput::kRmsNorm ? 2.0 * K_ : 0);
    c.math = DType::kF32;  // CUDA-core FMAs
    c.round_trips = 2;     // loads (the residual's with the first weights), then the stores
    return c;
  }
  size_t set_bytes() const override {
    return bf16_bytes(double(N_) * K_ + double(M_) * K_ + N_ + K_ + double(M_) * out_cols());
  }
  void setup(int copies, uint64_t seed, cudaStream_t s) override {
    remember(copies, seed);
    w_ = Pool<bf16>(size_t(N_) * K_, copies);
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
    return cuda::gemv_fused(f, x_.at(set), w_.at(set), bias_ ? b_.at(set) : nullptr, out_.at(set),
                            M_, N_, K_, s);
  }
  // The reference is the unfused sequence in f32: RMSNorm(r)·γ (unrounded, as the kernel keeps
  // it), cpu::linear, then bf16(result) + residual, or silu_mul of the bf16-rounded gate and up.
  CheckResult check(cudaStream_t s) override {
    const uint64_t sd = check_seed();
    fill(sd, w_.at(0), x_.at(0), b_.at(0), g_.at(0), out_.at(0), w_.n(), x_.n(), b_.n(), g_.n(),
         out_.n(), s);
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
    TensorView wv(const_cast<bf16*>(w.data()), DType::kBF16, {N_, K_});
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
          const float gv = round_bf16(ref[size_t(m) * N_ + j]);
          const float u = round_bf16(ref[size_t(m) * N_ + half + j]);
          act[size_t(m) * half + j] = gv / (1.0f + std::exp(-gv)) * u;
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
  Pool<bf16> w_, x_, b_, g_, out_;
};

}  // namespace

std::unique_ptr<KernelCase> make_gemv_fused_case(cuda::GemvInput input, bool accumulate,
                                                 bool silu_pairs, int M, int N, int K, bool bias) {
  return std::make_unique<GemvFusedCase>(input, accumulate, silu_pairs, M, N, K, bias);
}

// The batch-1 decode steps of Llama-3.1-8B (QKV 6144 after RMSNorm, gate/up 28672 after RMSNorm
// writing silu(gate)·up, o and down with the residual add) and of Llama-3.2-1B (3072, 16384).
void register_gemv_fused_cases(CaseList& out) {
  using In = cuda::GemvInput;
  for (const auto& [H, Nqkv, I] : {std::tuple{4096, 6144, 14336}, std::tuple{2048, 3072, 8192}}) {
    out.push_back(make_gemv_fused_case(In::kRmsNorm, false, false, 1, Nqkv, H));
    out.push_back(make_gemv_fused_case(In::kPlain, true, false, 1, H, H));
    out.push_back(make_gemv_fused_case(In::kRmsNorm, false, true, 1, 2 * I, H));
    out.push_back(make_gemv_fused_case(In::kPlain, true, false, 1, H, I));
  }
}

}  // namespace ceiling::bench
