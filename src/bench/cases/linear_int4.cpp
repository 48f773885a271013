#include "bench/cases/linear_int4.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

#include "bench/cases/case_util.h"
#include "bench/quant_weights.h"
#include "kernels/cuda/gemm_int4.h"
#include "kernels/cuda/gemm_lt.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/gemv_quant.h"

namespace ceiling::bench {
namespace {

using bf16 = __nv_bfloat16;
using WFmt = cuda::GemvWeightFormat;

// Warp instructions gemm_int4 issues per 32 × 32 warp tile and 128-wide k tile, its 64 HMMA
// included: r80's ncu of n128m32k1s4 at M = 64, N = 28672, K = 4096 (28.5 M instructions over
// 57,344 warp k tiles, prologue and epilogue spread over them; the PTX of the other
// configurations' loops within 15 % of it), 497, less the 64 LOP3 a tile that the one-LOP3 int4
// dequantization removed (r104 → r109 at 8 tokens; the dequantization does not depend on the
// token tile): 433, not re-measured.
constexpr double kGemmInt4IssuePerWarpTile = 433;
// A warp of 8 tokens (kJ = 1, the decode tiles): 357 (r109's ncu of n128m8k2s4 at M = 1,
// N = 28672, K = 4096: 10.23 M instructions over 28,672 warp k tiles; r84, before the one-LOP3
// dequantization: 417). 16 tokens (kJ = 2): interpolated linearly, not measured.
constexpr double kGemmInt4IssuePerWarpTile8 = 357;
double gemm_int4_issue_per_warp_tile(int kJ) {
  return kGemmInt4IssuePerWarpTile8 +
         (kGemmInt4IssuePerWarpTile - kGemmInt4IssuePerWarpTile8) * (kJ - 1) / 3.0;
}

class LinearInt4Case : public CaseBase {
 public:
  LinearInt4Case(Int4Path path, const cuda::GemmInt4Config& cfg, int M, int N, int K, int G,
                 bool bias, bool accumulate, bool pairs)
      : path_(path),
        cfg_(cfg),
        M_(M),
        N_(N),
        K_(K),
        G_(G),
        bias_(bias),
        acc_(accumulate),
        pairs_(pairs) {}
  std::string op() const override {
    return path_ == Int4Path::kDequant  ? "linear_int4_dequant"
           : path_ == Int4Path::kConfig ? "linear_int4_cfg"
                                        : "linear_int4";
  }
  // The engine runs gemm_int4 at its default configuration for gate/up with SiLU to
  // kGemmInt4SiluMaxM rows (the GEMV for the rest up to 16 rows), for every projection from 17
  // rows to kGemmInt4MaxM, the dequantizing path above (cuda_ops.cpp).
  bool dispatched() const override {
    if (M_ <= cuda::kGemvMaxM)
      return pairs_ && path_ == Int4Path::kGemm && M_ <= cuda::kGemmInt4SiluMaxM;
    return path_ == (M_ <= cuda::kGemmInt4MaxM ? Int4Path::kGemm : Int4Path::kDequant);
  }
  std::string shape() const override {
    std::string s = kv("M", M_) + " " + kv("N", N_) + " " + kv("K", K_) + " " + kv("G", G_);
    if (bias_) s += " bias";
    if (acc_) s += " residual";
    if (pairs_) s += " out=silu_pairs";
    if (path_ == Int4Path::kConfig) s += " cfg=" + cuda::gemm_int4_config_name(cfg_);
    return s;
  }
  std::string dtype() const override { return "int4"; }
  nlohmann::json params() const override {
    return {{"M", M_},
            {"N", N_},
            {"K", K_},
            {"group_size", G_},
            {"bias", bias_},
            {"residual", acc_},
            {"weights", "int4"},
            {"input", "plain"},
            {"accumulate", acc_},
            {"silu_pairs", pairs_}};
  }
  // torch: tinygemm (torch._weight_int4pack_mm) and dequantize + F.linear (torch_baseline.py).
  std::string baseline_name() const override {
    return dispatched() && !pairs_ ? "torch int4 (tinygemm | dequantize + F.linear)" : "";
  }
  Cost cost() const override {
    Cost c;
    c.flops = 2.0 * M_ * double(N_) * K_;
    const double w = double(cuda::gemv_weight_bytes(WFmt::kInt4, N_, K_, G_));
    const double out = 2.0 * M_ * double(pairs_ ? N_ / 2 : N_) * (acc_ ? 2 : 1);
    // gemm_int4: W once, x once, out once (twice with the residual). Dequantize: W read, its bf16
    // image written and read again, then the bf16 GEMM.
    c.bytes = w + 2.0 * M_ * double(K_) + out + (bias_ ? 2.0 * N_ : 0.0) +
              (path_ == Int4Path::kDequant ? 4.0 * N_ * double(K_) : 0.0);
    c.write_bytes = 2.0 * M_ * double(pairs_ ? N_ / 2 : N_) +
                    (path_ == Int4Path::kDequant ? 2.0 * N_ * double(K_) : 0.0);
    c.math = DType::kBF16;
    if (path_ == Int4Path::kDequant) {
      c.tiles = int64_t((M_ + 127) / 128) * ((N_ + 127) / 128);
      c.launches = 2;
      c.round_trips = 2;
      c.pdl = false;
    } else {
      const cuda::GemmInt4Config g = config();
      c.tiles = int64_t((M_ + g.tokens - 1) / g.tokens) * ((N_ + g.rows - 1) / g.rows);
      // The dequantization, fragment loads and scaling between the MMAs (roofline/kernel_cost.h).
      const int kJ = g.tokens >= 32 ? 4 : g.tokens / 8;  // 8-token tiles a warp
      const double warp_tiles = double(c.tiles) * (g.rows / 32) * (g.tokens / (8 * kJ));
      c.non_mma.issue_slots = warp_tiles * (K_ / 128) * gemm_int4_issue_per_warp_tile(kJ);
    }
    return c;
  }
  size_t set_bytes() const override {
    return QuantWeightPool::set_bytes(WFmt::kInt4, N_, K_, G_) +
           bf16_bytes(double(M_) * K_ + N_ + double(M_) * N_);
  }
  void setup(int copies, uint64_t seed, cudaStream_t s) override {
    remember(copies, seed);
    wq_ = QuantWeightPool(WFmt::kInt4, N_, K_, G_, copies);
    wq_.fill(seed, s);
    io_ = LinearIo(M_, N_, K_, copies, seed, s);
    if (path_ == Int4Path::kDequant) {
      wimg_ = DeviceBuffer(size_t(N_) * K_ * 2);  // one image for every set, as CudaOps's
      lt_.plan(M_, N_, K_, bias_, DType::kBF16).throw_if_error();
    }
  }
  Status run(int set, cudaStream_t s) override {
    const bf16* bias = bias_ ? io_.b.at(set) : nullptr;
    const cuda::GemvWeights w = wq_.at(set);
    switch (path_) {
      case Int4Path::kGemm:
        return cuda::gemm_int4(io_.x.at(set), w, bias, io_.out.at(set), M_, N_, K_, acc_, s,
                               pairs_);
      case Int4Path::kConfig:
        return cuda::gemm_int4_with_config(cfg_, io_.x.at(set), w, bias, io_.out.at(set), M_, N_,
                                           K_, acc_, s, pairs_);
      case Int4Path::kDequant:
        CEILING_RETURN_IF_ERROR(cuda::dequantize_weights(w, N_, K_, wimg_.as<bf16>(), s));
        return lt_.run(io_.x.at(set), wimg_.as<bf16>(), bias, io_.out.at(set), DType::kBF16, M_, N_,
                       K_, s, acc_);
    }
    return Status::error("linear_int4: unknown path");
  }
  // Rows 0, 1, 31, 32, M/2, M − 1 (both halves of a 64-token tile, a 32-token tile's edge) against
  // the dequantized weights in double.
  CheckResult check(cudaStream_t s) override {
    const uint64_t sd = check_seed();
    wq_.fill(sd, s, /*set0_only=*/true);
    const auto resid = io_.fresh_set0(sd, acc_, s);
    run(0, s).throw_if_error();
    const auto x = io_.x0(s);
    const auto b = io_.b0(s);
    const auto got_all = io_.out0(s);
    const std::vector<float> w = wq_.dequantized();
    std::vector<int> rows;
    for (int m : {0, 1, 31, 32, M_ / 2, M_ - 1})
      if (m < M_ && std::find(rows.begin(), rows.end(), m) == rows.end()) rows.push_back(m);
    CheckResult r;
    r.tolerance = kTolBf16Out;
    // With SiLU pairs out is [M, N/2]: silu_mul of the bf16-rounded gate and up rows.
    const int width = pairs_ ? N_ / 2 : N_;
    std::vector<float> got, ref, row;
    for (int m : rows) {
      row.clear();
      append_linear_ref_row(x.data() + size_t(m) * K_, w, N_, K_, bias_ ? b.data() : nullptr,
                            acc_ ? resid.data() + size_t(m) * N_ : nullptr, row);
      for (int n = 0; n < width; ++n) {
        if (!pairs_) {
          ref.push_back(row[n]);
          continue;
        }
        ref.push_back(silu_mul_ref(row[n], row[width + n]));
      }
      got.insert(got.end(), got_all.begin() + size_t(m) * width,
                 got_all.begin() + size_t(m + 1) * width);
    }
    r.max_rel_err = rel_err(got, ref);
    r.detail = err_str("out", r.max_rel_err) + " (" + std::to_string(rows.size()) + " rows)";
    // Rows past the ones checked must be written too (no stray NaN from the poison).
    if (!acc_)
      for (size_t i = 0; i < size_t(M_) * width; ++i)
        if (!std::isfinite(got_all[i])) {
          r.failure = "out[" + std::to_string(i / width) + ", " + std::to_string(i % width) +
                      "] not written (NaN poison left)";
          break;
        }
    return r;
  }

 private:
  cuda::GemmInt4Config config() const {
    if (path_ == Int4Path::kConfig) return cfg_;
    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      cudaGetLastError();
      sms = 132;  // no device here: as an H100 / H200 (the case is not run)
    }
    return cuda::gemm_int4_default_config(M_, N_, sms);
  }

  Int4Path path_;
  cuda::GemmInt4Config cfg_;
  int M_, N_, K_, G_;
  bool bias_, acc_, pairs_;
  QuantWeightPool wq_;
  LinearIo io_;
  DeviceBuffer wimg_;
  cuda::LtGemm lt_;
};

}  // namespace

std::unique_ptr<KernelCase> make_linear_int4_case(Int4Path path, int M, int N, int K, int G,
                                                  bool bias, bool accumulate,
                                                  const cuda::GemmInt4Config& cfg,
                                                  bool silu_pairs) {
  return std::make_unique<LinearInt4Case>(path, cfg, M, N, K, G, bias, accumulate, silu_pairs);
}

// Llama-3.1-8B's projections (QKV, o with the residual, gate/up, down with the residual), G = 128,
// at decode batches past the GEMV (32, 64, 256), a short prompt (128) and prefill chunks (2048,
// 8192): gemm_int4 as dispatched and the dequantize + cuBLASLt path it replaced; every built
// configuration up to 2048 rows (the sweep behind gemm_int4_default_config).
void register_linear_int4_cases(CaseList& out) {
  // Decode batches ≤ 16: gate/up with SiLU as the engine runs it (the other projections take the
  // GEMV there: gemv_quant cases), and the configurations of ≤ 16 tokens a CTA.
  for (int M : {1, 4, 8, 16}) {
    out.push_back(
        make_linear_int4_case(Int4Path::kGemm, M, 28672, 4096, 128, false, false, {}, true));
    for (const cuda::GemmInt4Config& c : cuda::gemm_int4_configs())
      if (c.tokens <= 16)
        out.push_back(
            make_linear_int4_case(Int4Path::kConfig, M, 28672, 4096, 128, false, false, c, true));
  }
  for (int M : {32, 64, 128, 256, 2048, 8192})
    for (const ProjShape& sh : kLlama8bProjections) {
      out.push_back(make_linear_int4_case(Int4Path::kGemm, M, sh.N, sh.K, 128, false, sh.residual));
      out.push_back(
          make_linear_int4_case(Int4Path::kDequant, M, sh.N, sh.K, 128, false, sh.residual));
      if (M != 8192)
        for (const cuda::GemmInt4Config& c : cuda::gemm_int4_configs())
          out.push_back(
              make_linear_int4_case(Int4Path::kConfig, M, sh.N, sh.K, 128, false, sh.residual, c));
    }
}

}  // namespace ceiling::bench
