// GEMV, cuBLASLt and the dispatcher vs cpu::linear: M 1..16 (and beyond for cuBLASLt), N and K
// off the tiles (primes, N not a multiple of the rows per CTA, K % 8 != 0 takes the scalar GEMV),
// bias, f32 output, every built M = 1 configuration, and a PDL-launched chain in which each GEMV
// reads its predecessor's output.
#include "bench/cases/linear.h"

#include <cmath>
#include <vector>

#include "gpu_test_util.h"
#include "kernels/cpu/ref.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/linear.h"

namespace ceiling {
namespace {

using namespace gpu_test;
using bench::LinearImpl;
using bf16 = __nv_bfloat16;

TEST(GpuGemv, MatchesReference) {
  CEILING_REQUIRE_GPU();
  Stream s;
  for (int M : {1, 2, 3, 5, 8, 11, 16})
    for (int N : {1, 13, 257, 1031})
      for (int K : {8, 7, 24, 1003, 4096, 4104})
        for (bool bias : {false, true})
          expect_case_passes(*bench::make_linear_case(LinearImpl::kGemv, M, N, K, bias,
                                                      (M + N) % 2 ? DType::kF32 : DType::kBF16),
                             s);
}

// N from below the grid (1, 13) to one or two rows per CTA (133, just above the SM count) and
// several row groups per CTA (primes 1031, 4099); K from one 16-byte chunk to column tiles with a
// short last tile (520, 2056, 4104).
TEST(GpuGemv, ConfigsMatchReference) {
  CEILING_REQUIRE_GPU();
  Stream s;
  for (const auto& c : bench::gemv_register_configs()) {
    for (int N : {1, 13, 133, 1031})
      for (int K : {8, 24, 520, 4104})
        for (bool bias : {false, true})
          expect_case_passes(*bench::make_gemv_config_case(
                                 c, N, K, bias, (N + K) % 3 ? DType::kBF16 : DType::kF32),
                             s);
    expect_case_passes(*bench::make_gemv_config_case(c, 4099, 2056, true), s);
    expect_case_passes(*bench::make_gemv_config_case(c, 4099, 4104, false, DType::kF32), s);
    expect_case_passes(*bench::make_gemv_config_case(c, 263, 14336, true), s);
  }
}

// The subset run under compute-sanitizer (memcheck, racecheck): every configuration on a tiny
// shape and on one with several row groups per CTA.
TEST(GpuGemv, ConfigsMatchReferenceSanitizerSubset) {
  CEILING_REQUIRE_GPU();
  Stream s;
  for (const auto& c : bench::gemv_register_configs()) {
    expect_case_passes(*bench::make_gemv_config_case(c, 13, 24, true), s);
    expect_case_passes(*bench::make_gemv_config_case(c, 4099, 2056, false), s);
  }
}

// Every built configuration of the tensor-core kernel (gemv_mma_with_config): M at and around the
// 8-token tile (2, 7, 8, 9, 16), N off the 16-row tiles (1, 13, 31, 1031) and several CTAs, K
// from one 16-byte piece to a short last 64-wide chunk (8, 24, 520) and many chunks per k slice.
TEST(GpuGemv, MmaConfigsMatchReference) {
  CEILING_REQUIRE_GPU();
  Stream s;
  for (const auto& c : bench::gemv_mma_configs()) {
    for (int M : {2, 7, 8, 9, 16})
      for (int N : {1, 13, 31, 1031})
        for (int K : {8, 24, 520, 4104})
          expect_case_passes(
              *bench::make_gemv_config_case(c, N, K, (M + N) % 2 == 0, DType::kBF16, M), s);
    expect_case_passes(*bench::make_gemv_config_case(c, 4099, 14336, true, DType::kBF16, 16), s);
  }
}

// The subset run under compute-sanitizer: every tensor-core configuration at one and two token
// tiles, on a tiny shape and on one with several CTAs and a short last k chunk.
TEST(GpuGemv, MmaConfigsSanitizerSubset) {
  CEILING_REQUIRE_GPU();
  Stream s;
  for (const auto& c : bench::gemv_mma_configs()) {
    for (int M : {3, 12}) {
      expect_case_passes(*bench::make_gemv_config_case(c, 13, 24, true, DType::kBF16, M), s);
      expect_case_passes(*bench::make_gemv_config_case(c, 1031, 1048, false, DType::kBF16, M), s);
    }
  }
}

TEST(GpuGemv, RejectsLargeM) {
  CEILING_REQUIRE_GPU();
  const Status st = cuda::gemv(nullptr, nullptr, nullptr, nullptr, DType::kBF16, 17, 8, 8, nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("M 17"), std::string::npos) << st.message();
}

TEST(GpuGemv, RejectsUnbuiltConfig) {
  CEILING_REQUIRE_GPU();
  cuda::GemvConfig c;
  c.threads = 96;
  DeviceBuffer b(4096);
  const Status st = cuda::gemv_with_config(c, b.as<bf16>(), b.as<bf16>(), nullptr, b.get(),
                                           DType::kBF16, 8, 8, nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("t96r2u2"), std::string::npos) << st.message();
}

// A chain of GEMVs (x_{i+1} = W_i · x_i, square), launched back to back with PDL on a stream and
// then replayed from a CUDA graph: each one must read its predecessor's output only after
// pdl_wait. Outputs are poisoned first, so a read before the write gives NaN; each layer is checked
// against cpu::linear of the previous layer's GPU output. Variants: M = 1 and 2 through gemv(),
// M = 1 through a non-default configuration (four rows per CTA).
TEST(GpuGemv, PdlChainReadsPredecessorOutput) {
  CEILING_REQUIRE_GPU();
  Stream s;
  cuda::GemvConfig r4;
  r4.rows = 4;
  for (int variant : {0, 1, 2}) {
    const int M = variant == 2 ? 2 : 1;
    constexpr int kN = 2056, kLayers = 6;
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE("variant " + std::to_string(variant) + " seed " + std::to_string(seed));
    DeviceBuffer w(size_t{2} * kLayers * kN * kN), acts(size_t{2} * (kLayers + 1) * M * kN);
    const auto wl = [&](int l) { return w.as<bf16>() + size_t(l) * kN * kN; };
    const auto act = [&](int l) { return acts.as<bf16>() + size_t(l) * M * kN; };
    // |W| ≤ 0.066 keeps the activations' scale about 1 over the layers (sqrt(K)·0.58·0.038).
    fill_uniform(w.as<bf16>(), size_t(kLayers) * kN * kN, seed, -0.066f, 0.066f, s);
    for (bool graph : {false, true}) {
      SCOPED_TRACE(graph ? "graph" : "stream");
      fill_uniform(act(0), size_t(M) * kN, seed + 1 + graph, -1.0f, 1.0f, s);
      poison(act(1), size_t{2} * kLayers * M * kN, s);
      const auto enqueue = [&] {
        for (int l = 0; l < kLayers; ++l) {
          const Status st =
              variant == 1
                  ? cuda::gemv_with_config(r4, act(l), wl(l), nullptr, act(l + 1), DType::kBF16, kN,
                                           kN, s)
                  : cuda::gemv(act(l), wl(l), nullptr, act(l + 1), DType::kBF16, M, kN, kN, s);
          ASSERT_TRUE(st.ok()) << st.message();
        }
      };
      if (graph)
        run_in_graph(s, enqueue);
      else
        enqueue();
      const auto host = bench::to_f32(to_host(act(0), size_t(kLayers + 1) * M * kN, s));
      const auto wh = to_host(w.as<bf16>(), size_t(kLayers) * kN * kN, s);
      for (int l = 0; l < kLayers; ++l) {
        TensorView wv(const_cast<bf16*>(wh.data()) + size_t(l) * kN * kN, DType::kBF16, {kN, kN});
        std::vector<float> ref(size_t(M) * kN);
        cpu::linear(host.data() + size_t(l) * M * kN, wv, nullptr, M, ref.data());
        const std::vector<float> got(host.begin() + size_t(l + 1) * M * kN,
                                     host.begin() + size_t(l + 2) * M * kN);
        EXPECT_LE(rel_err(got, ref), bench::kTolBf16Out) << "layer " << l;
      }
    }
  }
}

TEST(GpuCublasLt, MatchesReference) {
  CEILING_REQUIRE_GPU();
  Stream s;
  for (int M : {1, 17, 64, 300})
    for (int N : {8, 264})
      for (int K : {16, 1000}) {
        expect_case_passes(*bench::make_linear_case(LinearImpl::kCublasLt, M, N, K, false), s);
        expect_case_passes(*bench::make_linear_case(LinearImpl::kCublasLt, M, N, K, true), s);
        expect_case_passes(
            *bench::make_linear_case(LinearImpl::kCublasLt, M, N, K, false, DType::kF32), s);
      }
}

TEST(GpuLinear, DispatchMatchesReferenceOnBothSides) {
  CEILING_REQUIRE_GPU();
  Stream s;
  for (int M : {1, 4, 9, 16, 17, 100})
    expect_case_passes(*bench::make_linear_case(LinearImpl::kDispatch, M, 520, 512, M % 2 == 0), s);
}

// The committed tables (no GPU needed): one per measured GPU model, picked by the device name,
// the first for a GPU without one; every crossover within 1 .. kGemvMaxM + 1.
TEST(GpuLinear, CrossoverTablesAreUsable) {
  const cuda::CrossoverTable& h100 = cuda::crossover_table("NVIDIA H100 80GB HBM3");
  const cuda::CrossoverTable& h200 = cuda::crossover_table("NVIDIA H200");
  EXPECT_STREQ(h100.gpu, "H100");
  EXPECT_STREQ(h200.gpu, "H200");
  EXPECT_EQ(&cuda::crossover_table("NVIDIA A100-SXM4-80GB"), &h100);
  for (const cuda::CrossoverTable* t : {&h100, &h200}) {
    EXPECT_NE(std::string(t->source).find(t->gpu), std::string::npos) << t->source;
    ASSERT_FALSE(t->rows.empty());
    for (const cuda::Crossover& c : t->rows) {
      EXPECT_GE(c.m, 1);
      EXPECT_LE(c.m, cuda::kGemvMaxM + 1);
    }
    const int m = cuda::linear_crossover_m(*t, 4096, 4096);
    EXPECT_EQ(cuda::linear_path(*t, m - 1, 4096, 4096), cuda::LinearPath::kGemv);
    EXPECT_EQ(cuda::linear_path(*t, cuda::kGemvMaxM + 1, 4096, 4096), cuda::LinearPath::kCublasLt);
  }
}

}  // namespace
}  // namespace ceiling
