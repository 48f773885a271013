// Embedding, RMSNorm (+ residual, per-head), SiLU-mul vs the CPU reference at awkward sizes.
#include "bench/cases/elementwise.h"

#include <cuda_bf16.h>

#include <string>
#include <utility>

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

// Prefill-sized row counts: two rows per lane group for short rows (odd counts leave the last
// group half empty); one row per CTA for long rows.
TEST(GpuRmsNorm, TwoRowsPerCta) {
  CEILING_REQUIRE_GPU();
  Stream s;
  for (bool residual : {true, false})
    for (int rows : {2048, 2051})
      for (int H : {8, 64, 136, 4096})
        expect_case_passes(*bench::make_rms_norm_case(rows, H, residual), s);
  for (int gap : {0, 8})
    expect_case_passes(*bench::make_rms_norm_heads_case(67, 32, 128, 32 * 128 + gap), s);
}

// Long rows (1024 < H <= 16384) at prefill row counts (primes), H whose chunks do not fill the
// CTA (1032: 96 threads; 5000: 313 of 320 threads), one row.
TEST(GpuRmsNorm, LongRows) {
  CEILING_REQUIRE_GPU();
  Stream s;
  for (bool residual : {true, false})
    for (int rows : {1, 1327, 2053})
      for (int H : {1032, 4096, 5000, 8192, 12288})
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

// A chain in which every kernel reads what its predecessor wrote (embedding -> in-place RMSNorm
// with residual, several times -> SiLU-mul -> RMSNorm), launched back to back with PDL on a
// stream and replayed from a CUDA graph, must give bit for bit what the same kernels give with
// the stream synchronized after each (no overlap at all). Outputs are poisoned first.
TEST(GpuElementwise, PdlChainMatchesSerialized) {
  CEILING_REQUIRE_GPU();
  Stream s;
  using bf16 = __nv_bfloat16;
  for (const auto& shape : {std::pair{1, 4096}, std::pair{64, 128}, std::pair{2049, 4096}}) {
    const int T = shape.first, H = shape.second;
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE("T " + std::to_string(T) + " H " + std::to_string(H) + " seed " +
                 std::to_string(seed));
    const int V = 300, I = H / 2;
    const size_t n = size_t(T) * H;
    DeviceBuffer table(size_t{2} * V * H), ids(size_t{4} * T), w(size_t{2} * H), x(2 * n),
        res(2 * n), z(2 * n / 2), z2(2 * n / 2);
    fill_uniform(table.as<bf16>(), size_t(V) * H, seed, -2.0f, 2.0f, s);
    fill_uniform(w.as<bf16>(), H, seed + 1, 0.5f, 1.5f, s);
    bench::fill_uniform_int(ids.as<int32_t>(), T, seed + 2, 0, V, s);
    const auto run = [&](int mode) {  // 0 serialized, 1 PDL stream, 2 PDL graph
      poison(x.get(), 2 * n, s);
      poison(z.get(), n, s);
      poison(z2.get(), n, s);
      fill_uniform(res.as<bf16>(), n, seed + 3, -1.0f, 1.0f, s);
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      const auto step = [&](const Status& st) {
        ASSERT_TRUE(st.ok()) << st.message();
        if (mode == 0) {
          ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
        }
      };
      const auto enqueue = [&] {
        step(cuda::embedding(table.as<bf16>(), V, H, ids.as<int32_t>(), T, x.as<bf16>(), s));
        for (int l = 0; l < 4; ++l)
          step(cuda::rms_norm(x.as<bf16>(), res.as<bf16>(), w.as<bf16>(), T, H, 1e-5f, x.as<bf16>(),
                              s));
        step(cuda::silu_mul(x.as<bf16>(), T, I, z.as<bf16>(), s));
        step(cuda::rms_norm(z.as<bf16>(), nullptr, w.as<bf16>(), T, I, 1e-5f, z2.as<bf16>(), s));
      };
      if (mode == 2)
        run_in_graph(s, enqueue);
      else
        enqueue();
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    };
    run(0);
    const auto want_res = to_host(res.as<uint16_t>(), n, s);
    const auto want = to_host(z2.as<uint16_t>(), n / 2, s);
    for (int mode : {1, 2}) {
      SCOPED_TRACE(mode == 1 ? "stream" : "graph");
      run(mode);
      EXPECT_TRUE(to_host(res.as<uint16_t>(), n, s) == want_res);
      EXPECT_TRUE(to_host(z2.as<uint16_t>(), n / 2, s) == want);
    }
  }
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
