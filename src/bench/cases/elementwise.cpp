#include "bench/cases/elementwise.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "bench/cases/case_util.h"
#include "kernels/cpu/ref.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/rms_norm.h"
#include "kernels/cuda/silu_mul.h"

namespace ceiling::bench {
namespace {

using bf16 = __nv_bfloat16;

class EmbeddingCase : public CaseBase {
 public:
  EmbeddingCase(int T, int H, int V) : T_(T), H_(H), V_(V) {}
  std::string op() const override { return "embedding"; }
  std::string shape() const override { return kv("T", T_) + " " + kv("H", H_) + " " + kv("V", V_); }
  nlohmann::json params() const override { return {{"T", T_}, {"H", H_}, {"V", V_}}; }
  std::string baseline_name() const override { return "torch.nn.functional.embedding"; }
  Cost cost() const override {
    Cost c;
    c.bytes = 2.0 * T_ * H_ * 2 + 4.0 * T_;  // rows read + rows written + ids
    c.write_bytes = 2.0 * T_ * H_;
    c.round_trips = 3;  // the id, the row it names, the stores
    return c;
  }
  // The table is shared by all sets (rows are random, so reads are cold anyway).
  size_t set_bytes() const override { return 2 * bf16_bytes(double(T_) * H_) + 4 * size_t(T_); }
  void setup(int copies, uint64_t seed, cudaStream_t s) override {
    remember(copies, seed);
    table_ = Pool<bf16>(size_t(V_) * H_, 1);
    ids_ = Pool<int32_t>(T_, copies);
    out_ = Pool<bf16>(size_t(T_) * H_, copies);
    fill_uniform(table_.base(), table_.total(), seed, -1.0f, 1.0f, s);
    fill_uniform_int(ids_.base(), ids_.total(), seed + 1, 0, V_, s);
  }
  Status run(int set, cudaStream_t s) override {
    return cuda::embedding(table_.at(0), V_, H_, ids_.at(set), T_, out_.at(set), s);
  }
  CheckResult check(cudaStream_t s) override {
    const uint64_t sd = check_seed();
    fill_uniform(table_.base(), table_.total(), sd, -1.0f, 1.0f, s);
    fill_uniform_int(ids_.at(0), T_, sd + 1, 0, V_, s);
    poison(out_.at(0), size_t(T_) * H_ * 2, s);
    run(0, s).throw_if_error();
    const auto table = to_host(table_.at(0), table_.n(), s);
    const auto ids = to_host(ids_.at(0), T_, s);
    const auto out = to_f32(to_host(out_.at(0), size_t(T_) * H_, s));
    std::vector<float> ref(size_t(T_) * H_);
    cpu::embedding(TensorView(const_cast<bf16*>(table.data()), DType::kBF16, {V_, H_}), ids.data(),
                   T_, ref.data());
    CheckResult r;
    r.tolerance = kTolExact;
    r.max_rel_err = rel_err(out, ref);
    r.detail = err_str("out", r.max_rel_err);
    return r;
  }

 private:
  int T_, H_, V_;
  Pool<bf16> table_, out_;
  Pool<int32_t> ids_;
};

class RmsNormCase : public CaseBase {
 public:
  RmsNormCase(int rows, int H, bool residual) : rows_(rows), H_(H), residual_(residual) {}
  std::string op() const override { return residual_ ? "rms_norm_residual" : "rms_norm"; }
  std::string shape() const override { return kv("T", rows_) + " " + kv("H", H_); }
  nlohmann::json params() const override {
    return {{"T", rows_}, {"H", H_}, {"residual", residual_}};
  }
  std::string baseline_name() const override {
    return residual_ ? "x + r; F.rms_norm (torch composite)" : "F.rms_norm";
  }
  Cost cost() const override {
    Cost c;
    const double n = double(rows_) * H_;
    c.bytes = 2.0 * (n * (residual_ ? 4 : 2) + H_);  // x, (residual r+w), w, out
    c.write_bytes = 2.0 * n * (residual_ ? 2 : 1);
    c.flops = n * (residual_ ? 5 : 4);
    c.round_trips = 2;  // loads, a reduction over the row, then the stores
    return c;
  }
  size_t set_bytes() const override {
    return bf16_bytes(double(rows_) * H_ * (residual_ ? 3 : 2) + H_);
  }
  void setup(int copies, uint64_t seed, cudaStream_t s) override {
    remember(copies, seed);
    const size_t n = size_t(rows_) * H_;
    x_ = Pool<bf16>(n, copies);
    out_ = Pool<bf16>(n, copies);
    w_ = Pool<bf16>(H_, copies);
    if (residual_) res_ = Pool<bf16>(n, copies);
    fill(seed, s, -1);
  }
  Status run(int set, cudaStream_t s) override {
    return cuda::rms_norm(x_.at(set), residual_ ? res_.at(set) : nullptr, w_.at(set), rows_, H_,
                          kEps, out_.at(set), s);
  }
  CheckResult check(cudaStream_t s) override {
    fill(check_seed(), s, 0);
    const size_t n = size_t(rows_) * H_;
    const auto x = to_f32(to_host(x_.at(0), n, s));
    const auto w = to_host(w_.at(0), H_, s);
    std::vector<float> res = residual_ ? to_f32(to_host(res_.at(0), n, s)) : std::vector<float>();
    poison(out_.at(0), n * 2, s);
    run(0, s).throw_if_error();
    const auto out = to_f32(to_host(out_.at(0), n, s));
    std::vector<float> ref(n);
    cpu::rms_norm(x.data(), residual_ ? res.data() : nullptr,
                  TensorView(const_cast<bf16*>(w.data()), DType::kBF16, {H_}), rows_, H_, kEps,
                  ref.data());
    CheckResult r;
    r.tolerance = kTolBf16Out;
    r.max_rel_err = rel_err(out, ref);
    r.detail = err_str("out", r.max_rel_err);
    if (residual_) {
      const double e = rel_err(to_f32(to_host(res_.at(0), n, s)), res);
      r.detail += "; " + err_str("residual", e);
      r.max_rel_err = std::max(r.max_rel_err, e);
    }
    return r;
  }

 private:
  static constexpr float kEps = 1e-5f;
  // set < 0: all sets.
  void fill(uint64_t sd, cudaStream_t s, int set) {
    auto f = [&](Pool<bf16>& p, uint64_t k, float lo, float hi) {
      if (set < 0)
        fill_uniform(p.base(), p.total(), sd + k, lo, hi, s);
      else
        fill_uniform(p.at(set), p.n(), sd + k, lo, hi, s);
    };
    f(x_, 1, -2.0f, 2.0f);
    f(w_, 2, 0.5f, 1.5f);
    if (residual_) f(res_, 3, -2.0f, 2.0f);
  }
  int rows_, H_;
  bool residual_;
  Pool<bf16> x_, res_, w_, out_;
};

class RmsNormHeadsCase : public CaseBase {
 public:
  RmsNormHeadsCase(int T, int heads, int D, int stride)
      : T_(T), heads_(heads), D_(D), stride_(stride) {}
  std::string op() const override { return "rms_norm_heads"; }
  std::string shape() const override {
    return kv("T", T_) + " " + kv("heads", heads_) + " " + kv("D", D_) + " " +
           kv("stride", stride_);
  }
  nlohmann::json params() const override {
    return {{"T", T_}, {"heads", heads_}, {"D", D_}, {"stride", stride_}};
  }
  std::string baseline_name() const override { return "F.rms_norm on a strided view"; }
  Cost cost() const override {
    Cost c;
    const double n = double(T_) * heads_ * D_;
    c.bytes = 2.0 * (2 * n + D_);
    c.write_bytes = 2.0 * n;  // in place
    c.flops = 4 * n;
    c.round_trips = 2;  // loads, a reduction over the head, then the stores
    return c;
  }
  size_t set_bytes() const override { return bf16_bytes(double(T_) * stride_ + D_); }
  void setup(int copies, uint64_t seed, cudaStream_t s) override {
    remember(copies, seed);
    x_ = Pool<bf16>(size_t(T_) * stride_, copies);
    w_ = Pool<bf16>(D_, copies);
    fill_uniform(x_.base(), x_.total(), seed, -2.0f, 2.0f, s);
    fill_uniform(w_.base(), w_.total(), seed + 1, 0.5f, 1.5f, s);
  }
  Status run(int set, cudaStream_t s) override {
    return cuda::rms_norm_heads(x_.at(set), stride_, T_, heads_, D_, w_.at(set), kEps, s);
  }
  CheckResult check(cudaStream_t s) override {
    const uint64_t sd = check_seed();
    const size_t n = size_t(T_) * stride_;
    fill_uniform(x_.at(0), n, sd, -2.0f, 2.0f, s);
    fill_uniform(w_.at(0), D_, sd + 1, 0.5f, 1.5f, s);
    const auto x = to_f32(to_host(x_.at(0), n, s));
    const auto w = to_host(w_.at(0), D_, s);
    run(0, s).throw_if_error();
    const auto out = to_f32(to_host(x_.at(0), n, s));
    // Reference: every head row normed; the gaps between token rows must be untouched.
    std::vector<float> ref = x, got_rows, ref_rows;
    CheckResult r;
    for (int t = 0; t < T_; ++t) {
      float* row = ref.data() + size_t(t) * stride_;
      cpu::rms_norm(row, nullptr, TensorView(const_cast<bf16*>(w.data()), DType::kBF16, {D_}),
                    heads_, D_, kEps, row);
      for (int i = heads_ * D_; i < stride_; ++i)
        if (std::memcmp(&out[size_t(t) * stride_ + i], &x[size_t(t) * stride_ + i], 4) != 0)
          r.failure = "write outside the heads at token " + std::to_string(t);
    }
    r.tolerance = kTolBf16Out;
    r.max_rel_err = rel_err(out, ref);
    r.detail = err_str("x", r.max_rel_err);
    return r;
  }

 private:
  static constexpr float kEps = 1e-6f;
  int T_, heads_, D_, stride_;
  Pool<bf16> x_, w_;
};

class SiluMulCase : public CaseBase {
 public:
  SiluMulCase(int T, int I) : T_(T), I_(I) {}
  std::string op() const override { return "silu_mul"; }
  std::string shape() const override { return kv("T", T_) + " " + kv("I", I_); }
  nlohmann::json params() const override { return {{"T", T_}, {"I", I_}}; }
  std::string baseline_name() const override { return "F.silu(g) * u (torch composite)"; }
  Cost cost() const override {
    Cost c;
    c.bytes = 2.0 * 3 * T_ * double(I_);
    c.write_bytes = 2.0 * T_ * double(I_);
    c.flops = 5.0 * T_ * I_;
    c.round_trips = 2;  // loads, then the stores of what was computed from them
    return c;
  }
  size_t set_bytes() const override { return bf16_bytes(3.0 * T_ * I_); }
  void setup(int copies, uint64_t seed, cudaStream_t s) override {
    remember(copies, seed);
    in_ = Pool<bf16>(size_t(T_) * 2 * I_, copies);
    out_ = Pool<bf16>(size_t(T_) * I_, copies);
    fill_uniform(in_.base(), in_.total(), seed, -4.0f, 4.0f, s);
  }
  Status run(int set, cudaStream_t s) override {
    return cuda::silu_mul(in_.at(set), T_, I_, out_.at(set), s);
  }
  CheckResult check(cudaStream_t s) override {
    fill_uniform(in_.at(0), in_.n(), check_seed(), -4.0f, 4.0f, s);
    poison(out_.at(0), out_.n() * 2, s);
    run(0, s).throw_if_error();
    const auto in = to_f32(to_host(in_.at(0), in_.n(), s));
    const auto out = to_f32(to_host(out_.at(0), out_.n(), s));
    std::vector<float> ref(out_.n());
    cpu::silu_mul(in.data(), T_, I_, ref.data());
    CheckResult r;
    r.tolerance = kTolBf16Out;
    r.max_rel_err = rel_err(out, ref);
    r.detail = err_str("out", r.max_rel_err);
    return r;
  }

 private:
  int T_, I_;
  Pool<bf16> in_, out_;
};

}  // namespace

std::unique_ptr<KernelCase> make_embedding_case(int T, int H, int V) {
  return std::make_unique<EmbeddingCase>(T, H, V);
}
std::unique_ptr<KernelCase> make_rms_norm_case(int rows, int H, bool residual) {
  return std::make_unique<RmsNormCase>(rows, H, residual);
}
std::unique_ptr<KernelCase> make_rms_norm_heads_case(int T, int heads, int D, int token_stride) {
  return std::make_unique<RmsNormHeadsCase>(T, heads, D, token_stride);
}
std::unique_ptr<KernelCase> make_silu_mul_case(int T, int I) {
  return std::make_unique<SiluMulCase>(T, I);
}

// Llama-3.1-8B shapes: H 4096, I 14336, 32 q heads / 8 kv heads of 128; decode at batch 1 and
// 64, prefill of 4096 tokens.
void register_elementwise_cases(CaseList& out) {
  out.push_back(make_embedding_case(1, 4096, 32000));
  out.push_back(make_embedding_case(4096, 4096, 32000));
  for (int T : {1, 64, 4096}) out.push_back(make_rms_norm_case(T, 4096, true));
  out.push_back(make_rms_norm_case(4096, 4096, false));  // the final norm: x in, out, no residual
  out.push_back(make_rms_norm_heads_case(4096, 32, 128, 6144));
  for (int T : {1, 64, 4096}) out.push_back(make_silu_mul_case(T, 14336));
}

}  // namespace ceiling::bench
