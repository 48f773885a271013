// The W8A8 path of fp8 projections (model/weights.h kFp8ActRowsMin): quantize_rows_fp8 against
// the CPU's quantize_act_row_fp8 byte for byte (and dequantize_rows_fp8, the fallback's way back,
// against bf16(e4m3 · scale)), and quantize + cuBLASLt FP8 (outer-vector scales)
// against CPU W8A8 at awkward sizes — rows just past the GEMV (17), odd M, N and K at the FP8
// GEMM's multiple of 16, a bias, the residual add, an all-zero row. Also the dequantize + bf16
// GEMM comparison path, and the cuBLASLt autotuner: a tuned plan still computes the product.
#include "bench/cases/linear_fp8.h"

#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "gpu_test_util.h"
#include "kernels/cpu/ref.h"
#include "kernels/cuda/gemm_lt.h"
#include "kernels/cuda/quantize_act.h"
#include "kernels/cuda/rms_norm.h"
#include "kernels/cuda/silu_mul.h"
#include "model/quantize.h"

namespace ceiling {
namespace {

using namespace gpu_test;
using bf16 = __nv_bfloat16;

TEST(GpuQuantizeRowsFp8, MatchesCpuBytes) {
  CEILING_REQUIRE_GPU();
  Stream s;
  for (int K : {8, 24, 4104})
    for (int T : {1, 5, 67}) {
      const uint64_t seed = fresh_seed();
      SCOPED_TRACE("T " + std::to_string(T) + " K " + std::to_string(K) + " seed " +
                   std::to_string(seed));
      DeviceBuffer x(size_t(T) * K * 2), q(size_t(T) * K), sc(size_t(T) * 4);
      // Rows of very different ranges: the per-row scale must follow each.
      fill_uniform(x.as<bf16>(), size_t(T) * K, seed, -3000.0f, 3000.0f, s);
      if (T > 1) {
        fill_uniform(x.as<bf16>() + K, K, seed + 1, -1e-3f, 1e-3f, s);
        CEILING_CUDA_CHECK(cudaMemsetAsync(x.as<bf16>() + size_t(T - 1) * K, 0, size_t(K) * 2, s));
      }
      poison(q.get(), size_t(T) * K, s);
      poison(sc.get(), size_t(T) * 4, s);
      ASSERT_TRUE(
          cuda::quantize_rows_fp8(x.as<bf16>(), T, K, q.as<uint8_t>(), sc.as<float>(), s).ok());
      const auto xf = bench::to_f32(to_host(x.as<bf16>(), size_t(T) * K, s));
      const auto gq = to_host(q.as<uint8_t>(), size_t(T) * K, s);
      const auto gs = to_host(sc.as<float>(), size_t(T), s);
      // The fallback's way back: bf16(e4m3 · scale), one rounding of the fp32 product.
      DeviceBuffer back(size_t(T) * K * 2);
      poison(back.get(), size_t(T) * K * 2, s);
      ASSERT_TRUE(
          cuda::dequantize_rows_fp8(q.as<uint8_t>(), sc.as<float>(), T, K, back.as<bf16>(), s)
              .ok());
      const auto gb = to_host(back.as<bf16>(), size_t(T) * K, s);
      std::vector<uint8_t> cq(K);
      int back_mismatch = 0;
      for (int t = 0; t < T; ++t) {
        float cs = 0;
        quantize_act_row_fp8(xf.data() + size_t(t) * K, K, cq.data(), &cs);
        EXPECT_EQ(0, std::memcmp(&cs, &gs[t], 4)) << "row " << t << ": " << cs << " vs " << gs[t];
        EXPECT_EQ(0, std::memcmp(cq.data(), gq.data() + size_t(t) * K, K)) << "row " << t;
        for (int k = 0; k < K; ++k) {
          const uint16_t want = f32_to_bf16(e4m3_to_f32(cq[k]) * cs);
          uint16_t got;
          std::memcpy(&got, &gb[size_t(t) * K + k], 2);
          back_mismatch += got != want;
        }
      }
      EXPECT_EQ(back_mismatch, 0) << "dequantize_rows_fp8 elements off bf16(e4m3 * scale)";
    }
  EXPECT_FALSE(cuda::quantize_rows_fp8(nullptr, 1, 12, nullptr, nullptr, s).ok());  // K % 8
}

// rms_norm_fp8 and silu_mul_fp8 (the W8A8 input quantized in the producer's kernel) against the
// unfused pair — rms_norm or silu_mul, then quantize_rows_fp8 of its output — byte for byte: the
// bf16 output, the E4M3 image and the scales; rows of very different ranges, an all-zero row, H
// and I from one 8-element chunk to the 8B's sizes and past the one-pass limits.
TEST(GpuQuantizeRowsFp8, FusedNormAndSiluMatchUnfused) {
  CEILING_REQUIRE_GPU();
  Stream s;
  const auto expect_same = [&](const DeviceBuffer& a, const DeviceBuffer& b, size_t n,
                               const std::string& what) {
    const auto ha = to_host(a.as<uint8_t>(), n, s), hb = to_host(b.as<uint8_t>(), n, s);
    EXPECT_EQ(0, std::memcmp(ha.data(), hb.data(), n)) << what;
  };
  for (int H : {8, 264, 4096, 9000, 14336})
    for (int T : {1, 17, 70}) {
      const uint64_t seed = fresh_seed();
      const std::string tag =
          "T " + std::to_string(T) + " H " + std::to_string(H) + " seed " + std::to_string(seed);
      const size_t n = size_t(T) * H;
      // rms_norm: x [T, H] with one tiny-range and one zero row, γ of both signs.
      DeviceBuffer x(n * 2), gamma(size_t(H) * 2), h0(n * 2), h1(n * 2), q0(n), q1(n), s0(T * 4),
          s1(T * 4);
      fill_uniform(x.as<bf16>(), n, seed, -40.0f, 40.0f, s);
      fill_uniform(gamma.as<bf16>(), H, seed + 1, -2.0f, 2.0f, s);
      if (T > 2) {
        fill_uniform(x.as<bf16>() + H, H, seed + 2, -1e-3f, 1e-3f, s);
        CEILING_CUDA_CHECK(cudaMemsetAsync(x.as<bf16>() + size_t(2) * H, 0, size_t(H) * 2, s));
      }
      for (DeviceBuffer* b : {&h0, &h1, &q0, &q1, &s0, &s1}) poison(b->get(), b->bytes(), s);
      ASSERT_TRUE(
          cuda::rms_norm(x.as<bf16>(), nullptr, gamma.as<bf16>(), T, H, 1e-5f, h0.as<bf16>(), s)
              .ok());
      ASSERT_TRUE(
          cuda::quantize_rows_fp8(h0.as<bf16>(), T, H, q0.as<uint8_t>(), s0.as<float>(), s).ok());
      ASSERT_TRUE(cuda::rms_norm_fp8(x.as<bf16>(), gamma.as<bf16>(), T, H, 1e-5f, h1.as<bf16>(),
                                     q1.as<uint8_t>(), s1.as<float>(), s)
                      .ok())
          << tag;
      expect_same(h0, h1, n * 2, "rms_norm output, " + tag);
      expect_same(q0, q1, n, "rms_norm E4M3 image, " + tag);
      expect_same(s0, s1, size_t(T) * 4, "rms_norm scales, " + tag);
      // silu_mul: gate_up [T, 2H] (I = H), the same rows of tiny range and zeros.
      DeviceBuffer gu(2 * n * 2);
      fill_uniform(gu.as<bf16>(), 2 * n, seed + 3, -8.0f, 8.0f, s);
      if (T > 2) {
        fill_uniform(gu.as<bf16>() + 2 * size_t(H), 2 * size_t(H), seed + 4, -1e-2f, 1e-2f, s);
        CEILING_CUDA_CHECK(cudaMemsetAsync(gu.as<bf16>() + 4 * size_t(H), 0, size_t(H) * 2, s));
      }
      for (DeviceBuffer* b : {&h0, &h1, &q0, &q1, &s0, &s1}) poison(b->get(), b->bytes(), s);
      ASSERT_TRUE(cuda::silu_mul(gu.as<bf16>(), T, H, h0.as<bf16>(), s).ok());
      ASSERT_TRUE(
          cuda::quantize_rows_fp8(h0.as<bf16>(), T, H, q0.as<uint8_t>(), s0.as<float>(), s).ok());
      ASSERT_TRUE(cuda::silu_mul_fp8(gu.as<bf16>(), T, H, h1.as<bf16>(), q1.as<uint8_t>(),
                                     s1.as<float>(), s)
                      .ok())
          << tag;
      expect_same(h0, h1, n * 2, "silu_mul output, " + tag);
      expect_same(q0, q1, n, "silu_mul E4M3 image, " + tag);
      expect_same(s0, s1, size_t(T) * 4, "silu_mul scales, " + tag);
    }
  DeviceBuffer b(1 << 12);
  const Status st = cuda::rms_norm_fp8(b.as<bf16>(), b.as<bf16>(), 1, 12, 1e-5f, b.as<bf16>(),
                                       b.as<uint8_t>(), b.as<float>(), s);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("H 12"), std::string::npos) << st.message();
  EXPECT_FALSE(
      cuda::silu_mul_fp8(b.as<bf16>(), 1, 12, b.as<bf16>(), b.as<uint8_t>(), b.as<float>(), s)
          .ok());
}

TEST(GpuLinearFp8, W8A8MatchesCpu) {
  CEILING_REQUIRE_GPU();
  Stream s;
  for (int M : {17, 33, 100, 257})
    for (int N : {16, 48, 1040})
      for (int K : {16, 112, 4112})
        for (int variant = 0; variant < 3; ++variant) {
          const bool bias = variant == 1, residual = variant == 2;
          auto c = bench::make_linear_fp8_case(true, M, N, K, bias, residual);
          expect_case_passes(*c, s);
        }
  // Fast accumulation is the default; the precise plans (fp32 promotion) compute the same.
  for (int M : {17, 257})
    expect_case_passes(*bench::make_linear_fp8_case(true, M, 1040, 4112, false, true, true), s);
}

TEST(GpuLinearFp8, DequantizePathMatchesCpu) {
  CEILING_REQUIRE_GPU();
  Stream s;
  for (int M : {17, 100})
    for (bool residual : {false, true})
      expect_case_passes(*bench::make_linear_fp8_case(false, M, 1040, 4112, !residual, residual),
                         s);
}

// A tuned plan times its candidates at the first run outside a capture, keeps one, and that
// one computes the product (against cpu::linear), with and without the residual add.
TEST(GpuLtGemm, TunedPlanMatchesReference) {
  CEILING_REQUIRE_GPU();
  Stream s;
  const int M = 64, N = 1040, K = 2056;
  cuda::LtGemm lt;
  ASSERT_TRUE(lt.plan(M, N, K, false, DType::kBF16, /*tune=*/true).ok());
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  DeviceBuffer x(size_t(M) * K * 2), w(size_t(N) * K * 2), out(size_t(M) * N * 2);
  fill_uniform(x.as<bf16>(), size_t(M) * K, seed, -1.0f, 1.0f, s);
  fill_uniform(w.as<bf16>(), size_t(N) * K, seed + 1, -1.0f, 1.0f, s);
  for (bool accumulate : {false, true}) {
    fill_uniform(out.as<bf16>(), size_t(M) * N, seed + 2, -1.0f, 1.0f, s);
    const auto before = bench::to_f32(to_host(out.as<bf16>(), size_t(M) * N, s));
    ASSERT_TRUE(
        lt.run(x.as<bf16>(), w.as<bf16>(), nullptr, out.get(), DType::kBF16, M, N, K, s, accumulate)
            .ok());
    const auto got = bench::to_f32(to_host(out.as<bf16>(), size_t(M) * N, s));
    const auto xf = bench::to_f32(to_host(x.as<bf16>(), size_t(M) * K, s));
    const auto wh = to_host(w.as<bf16>(), size_t(N) * K, s);
    std::vector<float> ref(size_t(M) * N);
    TensorView wv(const_cast<bf16*>(wh.data()), DType::kBF16, {N, K});
    cpu::linear(xf.data(), wv, nullptr, M, ref.data());
    if (accumulate)
      for (size_t i = 0; i < ref.size(); ++i) ref[i] += before[i];
    EXPECT_LE(rel_err(got, ref), bench::kTolBf16Out) << "accumulate " << accumulate;
  }
  ASSERT_EQ(lt.tune_log().size(), 1u);  // tuned once, at the first run
  const auto& t = lt.tune_log()[0];
  EXPECT_EQ(t.M, M);
  EXPECT_GT(t.candidates, 1);  // a plan is tuned only when there is a choice
  EXPECT_GT(t.first_us, 0.0);
}

}  // namespace
}  // namespace ceiling
