#include "bench/cases/linear.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "bench/cases/case_util.h"
#include "kernels/cpu/ref.h"
#include "kernels/cuda/gemm_lt.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/linear.h"

namespace ceiling::bench {
namespace {

using bf16 = __nv_bfloat16;

class LinearCase : public CaseBase {
 public:
  LinearCase(LinearImpl impl, int M, int N, int K, bool bias, DType out,
             std::optional<cuda::GemvConfig> cfg = std::nullopt)
      : impl_(impl), M_(M), N_(N), K_(K), bias_(bias), out_dtype_(out), cfg_(cfg) {}
  LinearCase(int M, int N, int K, bool bias, bool accumulate, const cuda::SkinnyConfig& cfg)
      : impl_(LinearImpl::kSkinny),
        M_(M),
        N_(N),
        K_(K),
        bias_(bias),
        accumulate_(accumulate),
        out_dtype_(DType::kBF16),
        skinny_cfg_(cfg) {}
  std::string op() const override {
    if (cfg_) return "linear_gemv_cfg";
    if (impl_ == LinearImpl::kSkinny)
      return skinny_cfg_.wide || skinny_cfg_.splits ? "linear_skinny_cfg" : "linear_skinny";
    return impl_ == LinearImpl::kGemv       ? "linear_gemv"
           : impl_ == LinearImpl::kCublasLt ? "linear_cublaslt"
                                            : "linear";
  }
  // What the engine runs for this shape: the dispatcher's choice; configuration sweeps, the
  // losing side of the GEMV / cuBLASLt crossover and the skinny GEMM are comparisons.
  bool dispatched() const override {
    if (cfg_ || impl_ == LinearImpl::kSkinny) return false;
    if (impl_ == LinearImpl::kDispatch) return true;
    const bool gemv = dispatch_path() == cuda::LinearPath::kGemv;
    return gemv == (impl_ == LinearImpl::kGemv);
  }
  std::string shape() const override {
    std::string s = kv("M", M_) + " " + kv("N", N_) + " " + kv("K", K_);
    if (cfg_) s += " cfg=" + cuda::gemv_config_name(*cfg_);
    if (op() == "linear_skinny_cfg") s += " cfg=" + cuda::skinny_config_name(skinny_resolved());
    if (bias_) s += " bias";
    if (accumulate_) s += " accumulate";
    if (out_dtype_ != DType::kBF16) s += " out=" + std::string(dtype_name(out_dtype_));
    return s;
  }
  nlohmann::json params() const override {
    nlohmann::json j = {
        {"M", M_}, {"N", N_}, {"K", K_}, {"bias", bias_}, {"out_dtype", dtype_name(out_dtype_)}};
    if (impl_ == LinearImpl::kSkinny) {
      const cuda::SkinnyConfig c = skinny_resolved();
      j["accumulate"] = accumulate_;
      j["wide"] = c.wide;
      j["splits"] = c.splits;
    }
    return j;
  }
  std::string baseline_name() const override { return "torch.nn.functional.linear"; }
  Cost cost() const override {
    Cost c;
    c.flops = 2.0 * M_ * double(N_) * K_;
    c.bytes = 2.0 * N_ * double(K_) + 2.0 * M_ * K_ + out_size() * double(M_) * N_ +
              (bias_ ? 2.0 * N_ : 0) + (accumulate_ ? 2.0 * M_ * N_ : 0);
    c.write_bytes = out_size() * double(M_) * N_;
    c.round_trips = 2;  // loads, then the stores of what was computed from them
    if (impl_ == LinearImpl::kSkinny) {
      const cuda::SkinnyConfig k = skinny_resolved();
      c.math = DType::kBF16;
      c.tiles = int64_t((N_ + 128 * k.wide - 1) / (128 * k.wide)) * k.splits;
    } else if (uses_gemv()) {
      c.math = M_ > 1 ? DType::kBF16 : DType::kF32;  // mma.sync above M = 1, CUDA-core FMAs at 1
    } else {
      c.math = DType::kBF16;
      c.tiles = int64_t((M_ + 127) / 128) * ((N_ + 127) / 128);
      c.pdl = false;  // cuBLASLt's kernels are launched without PDL: each waits for the last
    }
    return c;
  }
  size_t set_bytes() const override {
    return bf16_bytes(double(N_) * K_ + double(M_) * K_ + N_) + size_t(out_size()) * M_ * N_;
  }
  void setup(int copies, uint64_t seed, cudaStream_t s) override {
    remember(copies, seed);
    w_ = Pool<bf16>(size_t(N_) * K_, copies);
    x_ = Pool<bf16>(size_t(M_) * K_, copies);
    b_ = Pool<bf16>(N_, copies);
    out_ = Pool<uint8_t>(size_t(M_) * N_ * out_size(), copies);
    fill_uniform(w_.base(), w_.total(), seed, -1.0f, 1.0f, s);
    fill_uniform(x_.base(), x_.total(), seed + 1, -1.0f, 1.0f, s);
    fill_uniform(b_.base(), b_.total(), seed + 2, -1.0f, 1.0f, s);
    if (impl_ != LinearImpl::kGemv && impl_ != LinearImpl::kSkinny) {
      if (!lt_) lt_ = std::make_unique<cuda::Linear>(cuda::current_crossover_table());
      lt_->lt().plan(M_, N_, K_, bias_, out_dtype_).throw_if_error();
    }
  }
  Status run(int set, cudaStream_t s) override {
    const bf16* bias = bias_ ? b_.at(set) : nullptr;
    switch (impl_) {
      case LinearImpl::kGemv:
        if (cfg_ && M_ > 1) {
          if (out_dtype_ != DType::kBF16)
            return Status::error("linear_gemv_cfg: M > 1 configurations write bf16");
          return cuda::gemv_mma_with_config(*cfg_, x_.at(set), w_.at(set), bias,
                                            reinterpret_cast<bf16*>(out_.at(set)), M_, N_, K_, s);
        }
        if (cfg_)
          return cuda::gemv_with_config(*cfg_, x_.at(set), w_.at(set), bias, out_.at(set),
                                        out_dtype_, N_, K_, s);
        return cuda::gemv(x_.at(set), w_.at(set), bias, out_.at(set), out_dtype_, M_, N_, K_, s);
      case LinearImpl::kSkinny:
        return cuda::skinny_gemm(x_.at(set), w_.at(set), bias,
                                 reinterpret_cast<bf16*>(out_.at(set)), M_, N_, K_, s, accumulate_,
                                 skinny_cfg_);
      case LinearImpl::kCublasLt:
        return lt_->lt().run(x_.at(set), w_.at(set), bias, out_.at(set), out_dtype_, M_, N_, K_, s);
      default:
        return lt_->run(x_.at(set), w_.at(set), bias, out_.at(set), out_dtype_, M_, N_, K_, s);
    }
  }
  CheckResult check(cudaStream_t s) override {
    const uint64_t sd = check_seed();
    fill_uniform(w_.at(0), w_.n(), sd, -1.0f, 1.0f, s);
    fill_uniform(x_.at(0), x_.n(), sd + 1, -1.0f, 1.0f, s);
    fill_uniform(b_.at(0), b_.n(), sd + 2, -1.0f, 1.0f, s);
    std::vector<int> rows = {0};
    if (impl_ == LinearImpl::kSkinny) {
      for (int m : {9, 17, 30, M_ / 2, M_ - 1})
        if (m < M_ && m > rows.back()) rows.push_back(m);
    } else {
      if (M_ > 2) rows.push_back(M_ / 2);
      if (M_ > 1) rows.push_back(M_ - 1);
    }
    std::vector<float> before;  // accumulate: the rows' out before the run
    if (accumulate_) {
      fill_uniform(reinterpret_cast<bf16*>(out_.at(0)), size_t(M_) * N_, sd + 3, -4.0f, 4.0f, s);
      const auto o = to_f32(to_host(reinterpret_cast<const bf16*>(out_.at(0)), size_t(M_) * N_, s));
      for (int m : rows)
        before.insert(before.end(), o.begin() + size_t(m) * N_, o.begin() + size_t(m + 1) * N_);
    } else {
      poison(out_.at(0), out_.n(), s);
    }
    run(0, s).throw_if_error();
    const auto w = to_host(w_.at(0), w_.n(), s);
    const auto x = to_f32(to_host(x_.at(0), x_.n(), s));
    const auto b = to_host(b_.at(0), b_.n(), s);
    std::vector<float> xs, got;
    for (int m : rows) {
      xs.insert(xs.end(), x.begin() + size_t(m) * K_, x.begin() + size_t(m + 1) * K_);
      if (out_dtype_ == DType::kF32) {
        const auto o = to_host(reinterpret_cast<const float*>(out_.at(0)) + size_t(m) * N_, N_, s);
        got.insert(got.end(), o.begin(), o.end());
      } else {
        const auto o =
            to_f32(to_host(reinterpret_cast<const bf16*>(out_.at(0)) + size_t(m) * N_, N_, s));
        got.insert(got.end(), o.begin(), o.end());
      }
    }
    std::vector<float> ref(rows.size() * N_);
    TensorView wv(const_cast<bf16*>(w.data()), DType::kBF16, {N_, K_});
    TensorView bv(const_cast<bf16*>(b.data()), DType::kBF16, {N_});
    cpu::linear(xs.data(), wv, bias_ ? &bv : nullptr, static_cast<int>(rows.size()), ref.data());
    for (size_t i = 0; i < before.size(); ++i) ref[i] += before[i];
    CheckResult r;
    r.tolerance = kTolBf16Out;
    r.max_rel_err = rel_err(got, ref);
    r.detail = err_str("out", r.max_rel_err) + " (" + std::to_string(rows.size()) + " rows)";
    return r;
  }

 private:
  int out_size() const { return out_dtype_ == DType::kF32 ? 4 : 2; }
  cuda::SkinnyConfig skinny_resolved() const { return cuda::skinny_resolve(N_, K_, skinny_cfg_); }
  bool uses_gemv() const {
    return impl_ == LinearImpl::kGemv ||
           (impl_ == LinearImpl::kDispatch && dispatch_path() == cuda::LinearPath::kGemv);
  }
  // The engine's choice on this GPU (its measured crossover table).
  cuda::LinearPath dispatch_path() const {
    return cuda::linear_path(cuda::current_crossover_table(), M_, N_, K_);
  }
  LinearImpl impl_;
  int M_, N_, K_;
  bool bias_;
  bool accumulate_ = false;
  DType out_dtype_;
  std::optional<cuda::GemvConfig> cfg_;
  cuda::SkinnyConfig skinny_cfg_;
  Pool<bf16> w_, x_, b_;
  Pool<uint8_t> out_;
  std::unique_ptr<cuda::Linear> lt_;
};

}  // namespace

std::unique_ptr<KernelCase> make_linear_case(LinearImpl impl, int M, int N, int K, bool bias,
                                             DType out_dtype) {
  return std::make_unique<LinearCase>(impl, M, N, K, bias, out_dtype);
}

std::unique_ptr<KernelCase> make_skinny_case(int M, int N, int K, bool bias, bool accumulate,
                                             const cuda::SkinnyConfig& cfg) {
  return std::make_unique<LinearCase>(M, N, K, bias, accumulate, cfg);
}

std::unique_ptr<KernelCase> make_gemv_config_case(const cuda::GemvConfig& cfg, int N, int K,
                                                  bool bias, DType out_dtype, int M) {
  return std::make_unique<LinearCase>(LinearImpl::kGemv, M, N, K, bias, out_dtype, cfg);
}

std::vector<cuda::GemvConfig> gemv_register_configs() {
  return {{128, 2, 2}, {128, 2, 4}, {256, 2, 2}, {128, 4, 2},
          {64, 2, 2},  {64, 4, 2},  {64, 8, 1},  {32, 8, 1}};
}

std::vector<cuda::GemvConfig> gemv_mma_configs() {  // the last: two 16-row tiles a warp
  return {{512, 16, 1}, {128, 16, 2}, {256, 16, 1}, {256, 16, 2}, {512, 32, 1}, {256, 32, 1, 2}};
}

// The shapes (x·W with W 4096→14336, 4096→4096, 14336→4096), the fused QKV / gate-up of
// Llama-3.1-8B (6144, 28672), the projections of Llama-3.2-1B (o 2048², QKV 3072, gate-up 16384,
// down 2048×8192) and both lm_heads (f32 logits). The crossover sweep (linear_gemv vs
// linear_cublaslt over M) feeds bench/gen_crossover.py: every weight shape the two models run
// is measured, so no model's dispatch rests on another shape's crossover.
void register_linear_cases(CaseList& out) {
  const int shapes[][2] = {{14336, 4096}, {4096, 4096}, {4096, 14336}, {6144, 4096}, {28672, 4096},
                           {2048, 2048},  {3072, 2048}, {16384, 2048}, {2048, 8192}};
  for (const auto& [N, K] : shapes)
    for (int M : {1, 2, 4, 6, 8, 12, 16}) {
      out.push_back(make_linear_case(LinearImpl::kGemv, M, N, K, false));
      out.push_back(make_linear_case(LinearImpl::kCublasLt, M, N, K, false));
    }
  for (int K : {4096, 2048})  // the lm_heads: 128256 rows, f32 logits
    for (int M : {2, 4, 8, 16}) {
      out.push_back(make_linear_case(LinearImpl::kGemv, M, 128256, K, false, DType::kF32));
      out.push_back(make_linear_case(LinearImpl::kCublasLt, M, 128256, K, false, DType::kF32));
    }
  out.push_back(make_linear_case(LinearImpl::kGemv, 1, 4096, 4096, true));
  // M = 1 kernel configurations side by side (gemv() runs the register kernel t128r2u2): more
  // rows per CTA or fewer threads give the short rows of the 1B-class shapes (K = 2048) more
  // bytes per CTA.
  for (const auto& [N, K] : {std::pair{14336, 4096}, std::pair{4096, 4096}, std::pair{4096, 14336},
                             std::pair{3072, 2048}, std::pair{2048, 2048}, std::pair{16384, 2048},
                             std::pair{2048, 8192}})
    for (const auto& c : gemv_register_configs()) out.push_back(make_gemv_config_case(c, N, K));
  // The tensor-core kernel's configurations (M > 1; gemv() picks one by N) at one and two
  // 8-token tiles: more k slices or chunks in flight against more row tiles sharing x in L1.
  const std::vector<cuda::GemvConfig> mma_cfgs = gemv_mma_configs();
  for (const auto& [N, K] : {std::pair{14336, 4096}, std::pair{4096, 4096}, std::pair{4096, 14336},
                             std::pair{2048, 2048}})
    for (int M : {8, 16})
      for (const auto& c : mma_cfgs)
        out.push_back(make_gemv_config_case(c, N, K, false, DType::kBF16, M));
  // Decode batches above the GEMV: the skinny GEMM (sm_90a; gemm_skinny.h — a comparison, not
  // dispatched) against cuBLASLt at M 16…64 on every shape, its configurations at M = 64 on the
  // 8B's, and its accumulate epilogue (the residual).
  if (const char* why = nullptr; cuda::skinny_gemm_available(&why)) {
    for (const auto& [N, K] : shapes)
      for (int M : {16, 32, 64}) {
        out.push_back(make_skinny_case(M, N, K));
        if (M > 16) out.push_back(make_linear_case(LinearImpl::kCublasLt, M, N, K, false));
      }
    for (const auto& [N, K] : {std::pair{6144, 4096}, std::pair{4096, 4096}, std::pair{28672, 4096},
                               std::pair{4096, 14336}})
      for (int wide : {1, 2})
        for (int splits : {1, 2, 3, 4, 6, 8})
          out.push_back(make_skinny_case(64, N, K, false, false, {wide, splits}));
    out.push_back(make_skinny_case(64, 4096, 4096, false, true));
    out.push_back(make_skinny_case(64, 4096, 14336, false, true));
  } else {
    fmt::print(stderr, "warning: linear: the skinny GEMM is unavailable ({})\n", why);
  }
  out.push_back(make_linear_case(LinearImpl::kDispatch, 1, 128256, 4096, false, DType::kF32));
  for (const auto& [N, K] : {std::pair{6144, 4096}, std::pair{28672, 4096}, std::pair{4096, 14336}})
    out.push_back(make_linear_case(LinearImpl::kDispatch, 4096, N, K, false));
}

}  // namespace ceiling::bench
