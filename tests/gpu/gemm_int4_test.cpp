// The int4-weight GEMM (gemm_int4.h) vs the dequantized weights in double (the benchmark case's
// check, bench/cases/linear_int4.h): M from 1 to past several token tiles (17, 33, 100, 257:
// partial 32- and 64-token tiles), N off the 64/128-row tiles, K one k tile to many, groups of 128
// and 256, bias and the residual epilogue, every built configuration, the engine's 8B shapes;
// then a PDL chain of two launches (the second reads the first's output) in a stream and in a CUDA
// graph, bit-exact against the same launches serialized; the SiLU-pairs epilogue; the default
// configuration's rules; and the one-line errors.
#include "kernels/cuda/gemm_int4.h"

#include <cstring>
#include <vector>

#include "bench/cases/linear_fp8.h"
#include "bench/cases/linear_int4.h"
#include "bench/quant_weights.h"
#include "gpu_test_util.h"

namespace ceiling {
namespace {

using namespace gpu_test;
using bf16 = __nv_bfloat16;
using bench::Int4Path;

TEST(GpuGemmInt4, MatchesDequantizedReference) {
  CEILING_REQUIRE_GPU();
  Stream s;
  int i = 0;
  for (int M : {1, 17, 33, 100, 257})
    for (int N : {13, 136, 1031})
      for (int K : {128, 384, 4352}) {
        ++i;
        const int G = (K % 256 == 0 && i % 2 == 0) ? 256 : 128;
        expect_case_passes(
            *bench::make_linear_int4_case(Int4Path::kGemm, M, N, K, G, i % 3 == 0, i % 2 == 1), s);
      }
}

TEST(GpuGemmInt4, EveryConfiguration) {
  CEILING_REQUIRE_GPU();
  Stream s;
  for (const cuda::GemmInt4Config& c : cuda::gemm_int4_configs())
    for (int M : {1, 5, 70})
      for (bool residual : {false, true})
        expect_case_passes(*bench::make_linear_int4_case(Int4Path::kConfig, M, 200, 640, 128,
                                                         !residual, residual, c),
                           s);
}

// The SiLU epilogue (W = [gate; up], out [M, N/2]): pairs off the tiles' 16-pair halves, bias,
// every configuration, the 8B's gate/up at the decode sizes it runs.
TEST(GpuGemmInt4, SiluPairs) {
  CEILING_REQUIRE_GPU();
  Stream s;
  int i = 0;
  for (int M : {1, 3, 16, 40})
    for (int half : {13, 136, 1031}) {
      ++i;
      expect_case_passes(*bench::make_linear_int4_case(Int4Path::kGemm, M, 2 * half, 384, 128,
                                                       i % 2 == 0, false, {}, true),
                         s);
    }
  for (const cuda::GemmInt4Config& c : cuda::gemm_int4_configs())
    for (int M : {1, 9})
      expect_case_passes(*bench::make_linear_int4_case(Int4Path::kConfig, M, 2 * 100, 640, 128,
                                                       true, false, c, true),
                         s);
  for (int M : {1, 8, 16})
    expect_case_passes(
        *bench::make_linear_int4_case(Int4Path::kGemm, M, 28672, 4096, 128, false, false, {}, true),
        s);
}

TEST(GpuGemmInt4, EngineShapes) {
  CEILING_REQUIRE_GPU();
  Stream s;
  for (int M : {64, 300}) {
    expect_case_passes(*bench::make_linear_int4_case(Int4Path::kGemm, M, 6144, 4096, 128), s);
    expect_case_passes(
        *bench::make_linear_int4_case(Int4Path::kGemm, M, 4096, 14336, 128, false, true), s);
  }
  // The path it replaced, checked the same way (the benchmark's comparison).
  expect_case_passes(*bench::make_linear_int4_case(Int4Path::kDequant, 48, 1031, 384, 128), s);
}

TEST(GpuGemmInt4, PdlChainAndGraphBitExact) {
  CEILING_REQUIRE_GPU();
  Stream s;
  const int M = 77, K = 512, N1 = 512, N2 = 300;
  const uint64_t seed = fresh_seed();
  bench::QuantWeightPool w1(cuda::GemvWeightFormat::kInt4, N1, K, 128, 1);
  bench::QuantWeightPool w2(cuda::GemvWeightFormat::kInt4, N2, N1, 128, 1);
  w1.fill(seed, s);
  w2.fill(seed + 1, s);
  DeviceBuffer x(size_t(M) * K * 2), h(size_t(M) * N1 * 2), y(size_t(M) * N2 * 2),
      y0(size_t(M) * N2 * 2);
  fill_uniform(x.as<bf16>(), size_t(M) * K, seed + 2, -1.0f, 1.0f, s);
  fill_uniform(y0.as<bf16>(), size_t(M) * N2, seed + 3, -1.0f, 1.0f, s);
  // y = y0 + (x · W1ᵀ) · W2ᵀ
  const auto chain = [&](bool sync) {
    ASSERT_EQ(cudaMemcpyAsync(y.get(), y0.get(), size_t(M) * N2 * 2, cudaMemcpyDeviceToDevice, s),
              cudaSuccess);
    ASSERT_TRUE(
        cuda::gemm_int4(x.as<bf16>(), w1.at(0), nullptr, h.as<bf16>(), M, N1, K, false, s).ok());
    if (sync) {
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    }
    ASSERT_TRUE(
        cuda::gemm_int4(h.as<bf16>(), w2.at(0), nullptr, y.as<bf16>(), M, N2, N1, true, s).ok());
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  };
  chain(true);
  const std::vector<bf16> want = to_host(y.as<bf16>(), size_t(M) * N2, s);
  for (int mode : {0, 1}) {
    SCOPED_TRACE(mode == 0 ? "stream" : "graph");
    poison(h.get(), size_t(M) * N1 * 2, s);
    if (mode == 0) {
      chain(false);
    } else {
      ASSERT_EQ(cudaMemcpyAsync(y.get(), y0.get(), size_t(M) * N2 * 2, cudaMemcpyDeviceToDevice, s),
                cudaSuccess);
      run_in_graph(s, [&] {
        EXPECT_TRUE(
            cuda::gemm_int4(x.as<bf16>(), w1.at(0), nullptr, h.as<bf16>(), M, N1, K, false, s)
                .ok());
        EXPECT_TRUE(
            cuda::gemm_int4(h.as<bf16>(), w2.at(0), nullptr, y.as<bf16>(), M, N2, N1, true, s)
                .ok());
      });
    }
    const std::vector<bf16> got = to_host(y.as<bf16>(), size_t(M) * N2, s);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 2), 0);
  }
}

TEST(GpuGemmInt4, DefaultConfiguration) {
  // Decode batches ≤ 16: 128 × 8 tiles in 2 k slices to 8 rows, 64 × 16 in 2 above (r86). Past
  // 16, r78's rule: 64 × 32 tiles in 4 k slices while 128 × 32 tiles would leave the SMs short,
  // two slices of 128 × 32 up to three tiles an SM, one slice above.
  const auto name = [](int M, int N) {
    return cuda::gemm_int4_config_name(cuda::gemm_int4_default_config(M, N, 132));
  };
  EXPECT_EQ(name(1, 28672), "n128m8k2s4");
  EXPECT_EQ(name(8, 28672), "n128m8k2s4");
  EXPECT_EQ(name(16, 28672), "n64m16k2s4");
  EXPECT_EQ(name(32, 4096), "n64m32k4s3");
  EXPECT_EQ(name(64, 4096), "n64m32k4s3");
  EXPECT_EQ(name(64, 6144), "n128m32k2s3");
  EXPECT_EQ(name(32, 28672), "n128m32k2s3");
  EXPECT_EQ(name(64, 28672), "n128m32k1s4");
  EXPECT_EQ(name(128, 4096), "n128m32k2s3");
  EXPECT_EQ(name(2048, 4096), "n128m32k1s4");
  for (int M : {1, 64, 8192})
    for (int N : {1, 4096, 6144, 28672}) {
      const cuda::GemmInt4Config c = cuda::gemm_int4_default_config(M, N, 132);
      bool built = false;
      for (const cuda::GemmInt4Config& b : cuda::gemm_int4_configs())
        built |= cuda::gemm_int4_config_name(b) == cuda::gemm_int4_config_name(c);
      EXPECT_TRUE(built) << cuda::gemm_int4_config_name(c);
    }
}

// The harness sizes a case's rotation of input sets from set_bytes() before setup() makes the
// sets: the quantized weights must be counted then (they were not: 8B gate/up at M = 1 asked for
// 4096 sets, 254 GB).
TEST(GpuGemmInt4, InputSetsCountTheWeights) {
  CEILING_REQUIRE_GPU();  // the cases hold a cuBLASLt handle
  const double int4 = 28672.0 * 4096 / 2, fp8 = 28672.0 * 4096;
  EXPECT_GE(double(bench::make_linear_int4_case(Int4Path::kGemm, 1, 28672, 4096, 128)->set_bytes()),
            int4);
  EXPECT_GE(double(bench::make_linear_fp8_case(true, 1, 28672, 4096)->set_bytes()), fp8);
}

TEST(GpuGemmInt4, Errors) {
  CEILING_REQUIRE_GPU();
  Stream s;
  bench::QuantWeightPool w(cuda::GemvWeightFormat::kInt4, 64, 256, 64, 1);
  bench::QuantWeightPool w128(cuda::GemvWeightFormat::kInt4, 64, 256, 128, 1);
  DeviceBuffer x(64 * 256 * 2 + 16), out(64 * 64 * 2);
  const auto run = [&](const cuda::GemvWeights& ww, const bf16* xp, int M, int N, int K) {
    return cuda::gemm_int4(xp, ww, nullptr, out.as<bf16>(), M, N, K, false, s);
  };
  const auto expect_error = [](const Status& st, const char* what) {
    ASSERT_FALSE(st.ok()) << what;
    EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
  };
  expect_error(run(w.at(0), x.as<bf16>(), 20, 64, 256), "group size 64");
  expect_error(run(w128.at(0), x.as<bf16>(), 20, 64, 192), "K 192");
  expect_error(run(w128.at(0), x.as<bf16>(), 0, 64, 256), "M 0");
  expect_error(run(w128.at(0), x.as<bf16>() + 1, 20, 64, 256), "not 16-byte aligned");
  bench::QuantWeightPool f8(cuda::GemvWeightFormat::kFP8, 64, 256, 0, 1);
  expect_error(run(f8.at(0), x.as<bf16>(), 20, 64, 256), "not int4");
  expect_error(cuda::gemm_int4_with_config({96, 32, 1, 4}, x.as<bf16>(), w128.at(0), nullptr,
                                           out.as<bf16>(), 20, 64, 256, false, s),
               "n96m32k1s4 is not built");
  expect_error(cuda::gemm_int4(x.as<bf16>(), w128.at(0), nullptr, out.as<bf16>(), 20, 63, 256,
                               false, s, /*silu_pairs=*/true),
               "even N (63)");
  expect_error(cuda::gemm_int4(x.as<bf16>(), w128.at(0), nullptr, out.as<bf16>(), 20, 64, 256, true,
                               s, /*silu_pairs=*/true),
               "no accumulation");
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
}

}  // namespace
}  // namespace ceiling
