// The sm_90a skinny GEMM (gemm_skinny.h) vs cpu::linear: M from 1 to 64 (one and two accumulator
// rows of a warp, a partial last warp), N from one 8-column pair group to several 128/256-row
// tiles with a partial last one, K from one 64-wide k-block to many per split; bias, the
// accumulate epilogue, both widths with one to eight splits (a request beyond that or beyond the
// k-blocks is clamped), a PDL chain of split-K launches in a stream and in a CUDA graph replayed
// twice, the default configuration model, and the errors. Skipped where the device cannot run it
// (not sm_90a).
#include "kernels/cuda/gemm_skinny.h"

#include <cmath>
#include <cstdio>
#include <vector>

#include "bench/cases/linear.h"
#include "gpu_test_util.h"
#include "kernels/cpu/ref.h"

namespace ceiling {
namespace {

using namespace gpu_test;
using bf16 = __nv_bfloat16;

#define REQUIRE_SKINNY()                                           \
  do {                                                             \
    CEILING_REQUIRE_GPU();                                         \
    const char* why_ = nullptr;                                    \
    if (!cuda::skinny_gemm_available(&why_)) GTEST_SKIP() << why_; \
  } while (0)

TEST(GpuSkinnyGemm, MatchesReference) {
  REQUIRE_SKINNY();
  Stream s;
  int i = 0;
  for (int M : {1, 5, 16, 17, 33, 64})
    for (int N : {8, 136, 1032})
      for (int K : {64, 576, 4160}) {
        ++i;
        expect_case_passes(*bench::make_skinny_case(M, N, K, i % 2 == 0, i % 3 == 0), s);
      }
}

TEST(GpuSkinnyGemm, ConfigsMatchReference) {
  REQUIRE_SKINNY();
  Stream s;
  const cuda::SkinnyConfig cfgs[] = {{1, 1}, {1, 3}, {1, 100}, {1, 8}, {2, 1}, {2, 5}, {2, 7}};
  for (const auto& c : cfgs) {
    expect_case_passes(*bench::make_skinny_case(37, 1032, 4160, true, false, c), s);
    expect_case_passes(*bench::make_skinny_case(64, 8, 64, false, true, c), s);
    expect_case_passes(*bench::make_skinny_case(2, 2056, 14336, false, false, c), s);
    expect_case_passes(*bench::make_skinny_case(64, 520, 2048, true, true, c), s);
  }
}

// What the default configuration model saw on this device, on record in the test log.
TEST(GpuSkinnyGemm, Occupancy) {
  REQUIRE_SKINNY();
  const cuda::SkinnyOccupancy occ = cuda::skinny_occupancy();
  for (int w = 0; w < 2; ++w) {
    std::printf("  active clusters, wide %d, splits 1..8:", w + 1);
    for (int s = 0; s < cuda::kSkinnyMaxSplits; ++s) {
      std::printf(" %d", occ.active[w][s]);
      EXPECT_GT(occ.active[w][s], 0);
    }
    std::printf("\n");
  }
}

// x_{l+1} = x_l · W_l^T (square, split K), back to back with PDL on a stream, then captured once
// and replayed twice: each launch must read its predecessor's output only after pdl_wait. Outputs
// are poisoned first; each layer is checked against cpu::linear of the previous layer's GPU output.
TEST(GpuSkinnyGemm, PdlChainAndGraphReplays) {
  REQUIRE_SKINNY();
  Stream s;
  constexpr int kM = 40, kN = 1024, kLayers = 5;
  const cuda::SkinnyConfig cfg = cuda::skinny_resolve(kN, kN, {});
  ASSERT_GT(cfg.splits, 1) << "the chain is meant to exercise the split-K reduction";
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  DeviceBuffer w(size_t{2} * kLayers * kN * kN), acts(size_t{2} * (kLayers + 1) * kM * kN);
  const auto wl = [&](int l) { return w.as<bf16>() + size_t(l) * kN * kN; };
  const auto act = [&](int l) { return acts.as<bf16>() + size_t(l) * kM * kN; };
  // |W| ≤ 0.054 keeps the activations' scale about 1 over the layers (sqrt(K)·0.58·0.031).
  fill_uniform(w.as<bf16>(), size_t(kLayers) * kN * kN, seed, -0.054f, 0.054f, s);
  for (int mode : {0, 1, 2}) {  // stream, graph (first replay), graph (second replay)
    SCOPED_TRACE(mode == 0 ? "stream" : mode == 1 ? "graph" : "graph replayed twice");
    fill_uniform(act(0), size_t(kM) * kN, seed + 1 + mode, -1.0f, 1.0f, s);
    poison(act(1), size_t(kLayers) * kM * kN, s);
    const auto enqueue = [&] {
      for (int l = 0; l < kLayers; ++l) {
        const Status st = cuda::skinny_gemm(act(l), wl(l), nullptr, act(l + 1), kM, kN, kN, s);
        ASSERT_TRUE(st.ok()) << st.message();
      }
    };
    if (mode == 0) {
      enqueue();
    } else {
      cudaGraph_t g = nullptr;
      cudaGraphExec_t ge = nullptr;
      ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
      enqueue();
      ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
      ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
      cudaGraphDestroy(g);
      for (int r = 0; r < mode; ++r) {
        if (r > 0) poison(act(1), size_t(kLayers) * kM * kN, s);
        ASSERT_EQ(cudaGraphLaunch(ge, s), cudaSuccess);
      }
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      cudaGraphExecDestroy(ge);
    }
    const auto host = bench::to_f32(to_host(act(0), size_t(kLayers + 1) * kM * kN, s));
    const auto wh = to_host(w.as<bf16>(), size_t(kLayers) * kN * kN, s);
    for (int l = 0; l < kLayers; ++l) {
      TensorView wv(const_cast<bf16*>(wh.data()) + size_t(l) * kN * kN, DType::kBF16, {kN, kN});
      std::vector<float> ref(size_t(kM) * kN);
      cpu::linear(host.data() + size_t(l) * kM * kN, wv, nullptr, kM, ref.data());
      const std::vector<float> got(host.begin() + size_t(l + 1) * kM * kN,
                                   host.begin() + size_t(l + 2) * kM * kN);
      EXPECT_LE(rel_err(got, ref), bench::kTolBf16Out) << "layer " << l;
    }
  }
}

TEST(GpuSkinnyGemm, Errors) {
  REQUIRE_SKINNY();
  Stream s;
  DeviceBuffer b(size_t{1} << 20);
  Status st = cuda::skinny_gemm(b.as<bf16>(), b.as<bf16>(), nullptr, b.as<bf16>(), 65, 64, 64, s);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("M 65 N 64 K 64"), std::string::npos) << st.message();
  st = cuda::skinny_gemm(b.as<bf16>(), b.as<bf16>(), nullptr, b.as<bf16>(), 8, 64, 100, s);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("K % 64"), std::string::npos) << st.message();
  st = cuda::skinny_gemm(b.as<bf16>(), b.as<bf16>(), nullptr, b.as<bf16>(), 8, 64, 64, s, false,
                         {3, 1});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("w3s1 not built"), std::string::npos) << st.message();
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
}

TEST(GpuSkinnyGemm, ClampsSplits) {
  EXPECT_EQ(cuda::skinny_clamp({1, 100}, 4096).splits, 8);
  EXPECT_EQ(cuda::skinny_clamp({1, 8}, 256).splits, 1);   // 4 k-blocks: one split
  EXPECT_EQ(cuda::skinny_clamp({1, 3}, 4096).splits, 3);  // 64 k-blocks: 22, 22, 20
  EXPECT_EQ(cuda::skinny_clamp({1, 7}, 1792).splits, 7);  // 28 k-blocks: 4 each
  EXPECT_EQ(cuda::skinny_clamp({1, 6}, 1600).splits, 5);  // 25 k-blocks: 5 × 5, none empty
}

// The modeled choice on an H100-like device (clusters limited by GPCs of 16–18 SMs): enough CTAs
// to saturate HBM in one wave, then the fewest splits.
TEST(GpuSkinnyGemm, DefaultConfigModel) {
  cuda::SkinnyOccupancy occ;
  const int active[cuda::kSkinnyMaxSplits] = {132, 66, 42, 30, 24, 20, 16, 14};
  for (int w = 0; w < 2; ++w)
    for (int s = 0; s < cuda::kSkinnyMaxSplits; ++s) occ.active[w][s] = active[s];
  auto cfg = [&](int N, int K) {
    return cuda::skinny_config_name(cuda::skinny_default_config(N, K, occ));
  };
  EXPECT_EQ(cfg(4096, 4096), "w1s2");   // 32 tiles: 64 CTAs; 4 splits would not fit one wave
  EXPECT_EQ(cfg(6144, 4096), "w1s2");   // 48 tiles: 96 CTAs
  EXPECT_EQ(cfg(4096, 14336), "w1s2");  // 3 splits: more CTAs past saturation, no gain
  EXPECT_EQ(cfg(28672, 4096), "w2s1");  // 224 narrow tiles take two waves, 112 wide ones one
  EXPECT_EQ(cfg(2048, 2048), "w1s4");   // 16 tiles: 64 CTAs
  const cuda::SkinnyOccupancy none;     // no device: one CTA a tile
  EXPECT_EQ(cuda::skinny_config_name(cuda::skinny_default_config(4096, 4096, none)), "w1s1");
}

}  // namespace
}  // namespace ceiling
