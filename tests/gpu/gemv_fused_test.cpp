// The fused GEMV (gemv_fused) vs the CPU reference of the ops it replaces (the benchmark case's
// check): RMSNorm(r)·γ then the projection, the residual add into the output, and silu_mul of a
// gate/up projection's output — M 1..16, N and K off the tiles (1, primes, K not a multiple of the
// CTA's 128·8 elements), with and without bias. Inputs fresh per run, outputs NaN-poisoned (except
// the accumulated residual, which holds random values the kernel must add to).
#include "bench/cases/gemv_fused.h"

#include "gpu_test_util.h"
#include "kernels/cuda/gemv.h"

namespace ceiling {
namespace {

using namespace gpu_test;
using bf16 = __nv_bfloat16;

TEST(GpuGemvFused, MatchesUnfusedReference) {
  CEILING_REQUIRE_GPU();
  Stream s;
  using In = cuda::GemvInput;
  for (In input : {In::kPlain, In::kRmsNorm})
    for (int out : {0, 1, 2})  // plain, accumulate, SiLU pairs (N even)
      for (int M : {1, 2, 3, 5, 8, 11, 16})
        for (int N : {1, 13, 1031})
          for (int K : {8, 24, 1000, 4104}) {
            const int n = out == 2 ? 2 * N : N;
            expect_case_passes(*bench::make_gemv_fused_case(input, out == 1, out == 2, M, n, K,
                                                            (M + N + K) % 2 == 1),
                               s);
          }
  expect_case_passes(*bench::make_gemv_fused_case(In::kRmsNorm, false, false, 1, 6144, 4096), s);
  expect_case_passes(*bench::make_gemv_fused_case(In::kRmsNorm, false, true, 1, 28672, 4096), s);
  expect_case_passes(*bench::make_gemv_fused_case(In::kPlain, true, false, 1, 4096, 14336), s);
  // Short rows with ≥ 2048 eight-row CTAs (the one-warp CTAs of the dispatch): the 1B's gate/up,
  // and a prime N with K off the CTA's span.
  expect_case_passes(*bench::make_gemv_fused_case(In::kRmsNorm, false, true, 1, 16384, 2048), s);
  expect_case_passes(*bench::make_gemv_fused_case(In::kRmsNorm, false, false, 1, 16411, 1000), s);
}

// RoPE + KV write epilogue: 1..16 tokens, head_dim 8 / 16 / 64 / 128, GQA groups 1..4, a prime
// hidden size that is a multiple of 8; padding rows (slot -1) must not be written.
TEST(GpuGemvFused, RopeEpilogueMatchesUnfusedReference) {
  CEILING_REQUIRE_GPU();
  Stream s;
  for (int M : {1, 2, 5, 16})
    for (const auto& [Hq, Hkv, D] :
         {std::tuple{2, 2, 16}, std::tuple{4, 1, 64}, std::tuple{8, 2, 128}, std::tuple{3, 3, 64},
          std::tuple{8, 4, 8}})
      for (int H : {8, 1048}) {
        expect_case_passes(*bench::make_gemv_rope_case(M, H, Hq, Hkv, D), s);
        // The plain input: the engine's QKV above M = 1 (after its rms_norm).
        expect_case_passes(
            *bench::make_gemv_rope_case(M, H, Hq, Hkv, D, {}, cuda::GemvInput::kPlain), s);
      }
  expect_case_passes(*bench::make_gemv_rope_case(1, 4096, 32, 8, 128), s);
  // M > 1 at the tensor-core kernel's other CTA shapes (chosen by N): N = 4096 (32-row CTAs)
  // and N = 6144 (16-row CTAs with 8 k slices).
  expect_case_passes(*bench::make_gemv_rope_case(9, 2048, 24, 4, 128), s);
  expect_case_passes(*bench::make_gemv_rope_case(5, 4096, 32, 8, 128), s);
}

// Every built M = 1 RMS-norm-input configuration (gemv_fused_with_config): SiLU pairs and RoPE +
// KV write, N off the CTA's rows, K one chunk or not a multiple of the CTA's span, and the 8B's
// QKV.
TEST(GpuGemvFused, ConfigsMatchUnfusedReference) {
  CEILING_REQUIRE_GPU();
  Stream s;
  using In = cuda::GemvInput;
  for (const cuda::GemvConfig& c : bench::fused_norm_configs()) {
    for (int N : {13, 1031})
      for (int K : {8, 4104})
        expect_case_passes(
            *bench::make_gemv_fused_case(In::kRmsNorm, false, true, 1, 2 * N, K, N == 13, c), s);
    expect_case_passes(*bench::make_gemv_rope_case(1, 1048, 4, 1, 64, c), s);
    expect_case_passes(*bench::make_gemv_rope_case(1, 4096, 32, 8, 128, c), s);
  }
}

// The tensor-core kernel's fused paths at each CTA shape (N ≤ 2048, ≤ 5120, above) with SiLU
// pairs, the RMS-norm input and the residual add; also the subset run under compute-sanitizer.
TEST(GpuGemvFused, TensorCoreShapesSanitizerSubset) {
  CEILING_REQUIRE_GPU();
  Stream s;
  using In = cuda::GemvInput;
  for (int N : {1000, 5000, 6002})
    for (int M : {3, 9}) {
      expect_case_passes(*bench::make_gemv_fused_case(In::kRmsNorm, false, true, M, N, 520), s);
      expect_case_passes(*bench::make_gemv_fused_case(In::kPlain, true, false, M, N, 1048), s);
      expect_case_passes(*bench::make_gemv_fused_case(In::kRmsNorm, false, false, M, N, 264), s);
    }
  expect_case_passes(*bench::make_gemv_rope_case(7, 264, 8, 2, 64), s);
}

TEST(GpuGemvFused, RejectsBadArguments) {
  CEILING_REQUIRE_GPU();
  DeviceBuffer b(4096);
  cuda::GemvFusion f;
  Status st =
      cuda::gemv_fused(f, b.as<bf16>(), b.as<bf16>(), nullptr, b.as<bf16>(), 17, 8, 8, nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("M 17"), std::string::npos) << st.message();
  st = cuda::gemv_fused(f, b.as<bf16>(), b.as<bf16>(), nullptr, b.as<bf16>(), 1, 8, 7, nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("K 7"), std::string::npos) << st.message();
  f.silu_pairs = true;  // odd N
  st = cuda::gemv_fused(f, b.as<bf16>(), b.as<bf16>(), nullptr, b.as<bf16>(), 1, 7, 8, nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("N 7"), std::string::npos) << st.message();
  f.silu_pairs = false;
  f.input = cuda::GemvInput::kRmsNorm;  // no norm weight, eps 0
  st = cuda::gemv_fused(f, b.as<bf16>(), b.as<bf16>(), nullptr, b.as<bf16>(), 1, 8, 8, nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("eps"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace ceiling
