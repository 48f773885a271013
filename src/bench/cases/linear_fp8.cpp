#include "bench/cases/linear_fp8.h"

#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "bench/cases/case_util.h"
#include "bench/quant_weights.h"
#include "core/dtype.h"
#include "kernels/cpu/ref.h"
#include "kernels/cuda/gemm_lt.h"
#include "kernels/cuda/gemv_quant.h"
#include "kernels/cuda/quantize_act.h"
#include "model/quantize.h"

namespace ceiling::bench {
namespace {

using bf16 = __nv_bfloat16;
using WFmt = cuda::GemvWeightFormat;

class LinearFp8Case : public CaseBase {
 public:
  LinearFp8Case(bool w8a8, int M, int N, int K, bool bias, bool accumulate, bool precise)
      : w8a8_(w8a8), M_(M), N_(N), K_(K), bias_(bias), acc_(accumulate), precise_(precise) {
    lt_.set_fp8_fast_accum(!precise);
  }
  std::string op() const override { return w8a8_ ? "linear_fp8_w8a8" : "linear_fp8_dequant"; }
  // The engine runs W8A8 from 17 rows, with fast accumulation.
  bool dispatched() const override { return w8a8_ && !precise_; }
  std::string shape() const override {
    std::string s = kv("M", M_) + " " + kv("N", N_) + " " + kv("K", K_);
    if (bias_) s += " bias";
    if (acc_) s += " residual";
    if (precise_) s += " precise_accum";
    return s;
  }
  std::string dtype() const override { return "fp8"; }
  nlohmann::json params() const override {
    return {{"M", M_},
            {"N", N_},
            {"K", K_},
            {"bias", bias_},
            {"residual", acc_},
            {"weights", "fp8"},
            {"fast_accum", w8a8_ && !precise_}};
  }
  // torch: per-token dynamic quantization of x, then torch._scaled_mm with row-wise scales.
  std::string baseline_name() const override { return w8a8_ ? "torch._scaled_mm" : ""; }
  Cost cost() const override {
    Cost c;
    c.flops = 2.0 * M_ * double(N_) * K_;
    const double w = double(cuda::gemv_weight_bytes(WFmt::kFP8, N_, K_, 0));
    const double out = 2.0 * M_ * double(N_) * (acc_ ? 2 : 1);
    // W8A8: x read (bf16), its E4M3 image written and read again, W once, out once (twice with
    // the residual). Dequantize: W read, its bf16 image written and read again, x once.
    c.bytes = w8a8_ ? w + 2.0 * M_ * K_ + 2.0 * M_ * K_ + 4.0 * M_ + out
                    : w + 4.0 * N_ * double(K_) + 2.0 * M_ * K_ + out;
    c.write_bytes = (w8a8_ ? double(M_) * K_ : 2.0 * N_ * double(K_)) + 2.0 * M_ * double(N_);
    c.math = w8a8_ ? DType::kF8E4M3 : DType::kBF16;
    c.tiles = int64_t((M_ + 127) / 128) * ((N_ + 127) / 128);
    c.launches = 2;
    c.round_trips = 3;  // quantize (a reduction before its stores), then the GEMM
    c.pdl = false;
    return c;
  }
  size_t set_bytes() const override {
    return QuantWeightPool::set_bytes(WFmt::kFP8, N_, K_, 0) +
           bf16_bytes(double(M_) * K_ + N_ + double(M_) * N_);
  }
  void setup(int copies, uint64_t seed, cudaStream_t s) override {
    remember(copies, seed);
    wq_ = QuantWeightPool(WFmt::kFP8, N_, K_, 0, copies);
    wq_.fill(seed, s);
    io_ = LinearIo(M_, N_, K_, copies, seed, s);
    // One scratch for every set (as CudaOps's): the E4M3 x and its scales, or the bf16 image.
    xq_ = DeviceBuffer(size_t(M_) * K_);
    xs_ = DeviceBuffer(size_t(M_) * sizeof(float));
    if (!w8a8_) wimg_ = DeviceBuffer(size_t(N_) * K_ * 2);
    if (w8a8_)
      lt_.plan_fp8(M_, N_, K_, bias_).throw_if_error();
    else
      lt_.plan(M_, N_, K_, bias_, DType::kBF16).throw_if_error();
  }
  Status run(int set, cudaStream_t s) override {
    const bf16* bias = bias_ ? io_.b.at(set) : nullptr;
    const cuda::GemvWeights w = wq_.at(set);
    if (w8a8_) {
      CEILING_RETURN_IF_ERROR(
          cuda::quantize_rows_fp8(io_.x.at(set), M_, K_, xq_.as<uint8_t>(), xs_.as<float>(), s));
      return lt_.run_fp8(xq_.as<uint8_t>(), xs_.as<float>(), static_cast<const uint8_t*>(w.data),
                         w.row_scale, bias, io_.out.at(set), M_, N_, K_, s, acc_);
    }
    CEILING_RETURN_IF_ERROR(cuda::dequantize_weights(w, N_, K_, wimg_.as<bf16>(), s));
    return lt_.run(io_.x.at(set), wimg_.as<bf16>(), bias, io_.out.at(set), DType::kBF16, M_, N_, K_,
                   s, acc_);
  }
  CheckResult check(cudaStream_t s) override {
    const uint64_t sd = check_seed();
    wq_.fill(sd, s, /*set0_only=*/true);
    const auto resid = io_.fresh_set0(sd, acc_, s);
    if (M_ > 1)  // an all-zero row: scale 1, codes 0
      CEILING_CUDA_CHECK(cudaMemsetAsync(io_.x.at(0) + K_, 0, size_t(K_) * 2, s));
    run(0, s).throw_if_error();
    const auto x = io_.x0(s);
    const auto b = io_.b0(s);
    const auto got_all = io_.out0(s);
    std::vector<uint8_t> gq;
    std::vector<float> gs;
    if (w8a8_) {
      gq = to_host(xq_.as<uint8_t>(), size_t(M_) * K_, s);
      gs = to_host(xs_.as<float>(), size_t(M_), s);
    }
    const std::vector<float> w = wq_.dequantized();
    std::vector<int> rows = {0};
    if (M_ > 1) rows.push_back(1);
    if (M_ > 3) rows.push_back(M_ / 2);
    if (M_ > 2) rows.push_back(M_ - 1);
    CheckResult r;
    r.tolerance = kTolBf16Out;
    std::vector<float> got, ref;
    std::vector<uint8_t> q(K_);
    std::vector<float> xr(K_);
    for (int m : rows) {
      const float* xm = x.data() + size_t(m) * K_;
      if (w8a8_) {
        float sc = 0;
        quantize_act_row_fp8(xm, K_, q.data(), &sc);
        if (std::memcmp(&sc, &gs[m], sizeof(float)) != 0 ||
            std::memcmp(q.data(), gq.data() + size_t(m) * K_, K_) != 0)
          r.failure = "row " + std::to_string(m) + ": E4M3 image or scale differs from the CPU's";
        for (int k = 0; k < K_; ++k) xr[k] = e4m3_to_f32(q[k]) * sc;
      } else {
        std::copy(xm, xm + K_, xr.begin());
      }
      append_linear_ref_row(xr.data(), w, N_, K_, bias_ ? b.data() : nullptr,
                            acc_ ? resid.data() + size_t(m) * N_ : nullptr, ref);
      got.insert(got.end(), got_all.begin() + size_t(m) * N_, got_all.begin() + size_t(m + 1) * N_);
    }
    r.max_rel_err = rel_err(got, ref);
    r.detail = err_str("out", r.max_rel_err) + " (" + std::to_string(rows.size()) + " rows)";
    return r;
  }

 private:
  bool w8a8_;
  int M_, N_, K_;
  bool bias_, acc_, precise_;
  QuantWeightPool wq_;
  LinearIo io_;
  DeviceBuffer xq_, xs_, wimg_;
  cuda::LtGemm lt_;
};

}  // namespace

std::unique_ptr<KernelCase> make_linear_fp8_case(bool w8a8, int M, int N, int K, bool bias,
                                                 bool accumulate, bool precise_accum) {
  return std::make_unique<LinearFp8Case>(w8a8, M, N, K, bias, accumulate, precise_accum);
}

// Llama-3.1-8B's projections (QKV, o with the residual, gate/up, down with the residual) at a
// decode batch past the GEMV (64, 256) and prefill chunks (2048, 8192).
void register_linear_fp8_cases(CaseList& out) {
  for (int M : {64, 256, 2048, 8192})
    for (const ProjShape& sh : kLlama8bProjections)
      for (int v = 0; v < 3; ++v)  // W8A8 (fast accumulation), W8A8 precise, dequantize + bf16
        out.push_back(make_linear_fp8_case(v < 2, M, sh.N, sh.K, false, sh.residual, v == 1));
}

}  // namespace ceiling::bench
