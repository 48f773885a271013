// Embedding, RMSNorm (+ residual, per-head), SiLU-mul vs the CPU reference at awkward sizes.
#include "bench/cases/elementwise.h"

#include <cuda_bf16.h>

#include "gpu_test_util.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/rms_norm.h"
#include "kernels/cuda/silu_mul.h"

namespace ceiling {
namespace {

using namespace gpu_test;

TEST(GpuEmbedding, MatchesReferenceExactly) {
  CEILING_REQUIRE_GPU();
  Stream s;
  for (int T : {1, 7, 130})
    for (int H : {1, 3, 8, 4096, 4104})
      for (int V : {1, 13, 1000}) expect_case_passes(*bench::make_embedding_case(T, H, V), s);
}

TEST(GpuEmbedding, OutOfRangeIdsGiveZeroRows) {
  CEILING_REQUIRE_GPU();
  Stream s;
  const int V = 5, H = 16, T = 4;
  DeviceBuffer table(V * H * 2), ids(T * 4), out(T * H * 2);
  fill_uniform(table.as<__nv_bfloat16>(), V * H, fresh_seed(), 1.0f, 2.0f, s);
  to_device(ids.as<int32_t>(), std::vector<int32_t>{-1, 5, 1 << 30, 2}, s);
  poison(out.get(), T * H * 2, s);
  ASSERT_TRUE(cuda::embedding(table.as<__nv_bfloat16>(), V, H, ids.as<int32_t>(), T,
                              out.as<__nv_bfloat16>(), s)
                  .ok());
  const auto o = bench::to_f32(to_host(out.as<__nv_bfloat16>(), T * H, s));
  for (int i = 0; i < 3 * H; ++i) EXPECT_EQ(o[i], 0.0f) << i;
  for (int i = 3 * H; i < 4 * H; ++i) EXPECT_GE(o[i], 1.0f) << i;
}

TEST(GpuRmsNorm, MatchesReference) {
  CEILING_REQUIRE_GPU();
  Stream s;
  for (bool residual : {true, false})
    for (int rows : {1, 3, 129})
      for (int H : {1, 7, 64, 127, 1024, 1032, 4096, 8200, 16392})
        expect_case_passes(*bench::make_rms_norm_case(rows, H, residual), s);
}

TEST(GpuRmsNorm, PerHeadNormInPlace) {
  CEILING_REQUIRE_GPU();
  Stream s;
  for (int T : {1, 5})
    for (int heads : {1, 3, 32})
      for (int D : {64, 128, 72})
        for (int gap : {0, 8, 5})
          expect_case_passes(*bench::make_rms_norm_heads_case(T, heads, D, heads * D + gap), s);
}

TEST(GpuRmsNorm, RejectsBadShapes) {
  CEILING_REQUIRE_GPU();
  const Status st = cuda::rms_norm(nullptr, nullptr, nullptr, 1, 0, 1e-5f, nullptr, nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("H 0"), std::string::npos) << st.message();
  EXPECT_FALSE(cuda::rms_norm_heads(nullptr, 100, 1, 2, 64, nullptr, 1e-6f, nullptr).ok());
}

TEST(GpuSiluMul, MatchesReference) {
  CEILING_REQUIRE_GPU();
  Stream s;
  for (int T : {1, 3, 33})
    for (int I : {1, 7, 8, 13, 4096, 4101, 14336})
      expect_case_passes(*bench::make_silu_mul_case(T, I), s);
  EXPECT_FALSE(cuda::silu_mul(nullptr, 1, 0, nullptr, s).ok());
}

}  // namespace
}  // namespace ceiling
