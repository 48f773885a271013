// The fp8 / int4 GEMV (gemv_fused_quant) vs the CPU reference of the dequantized weights (the
// benchmark case's check, model/quantize.h dequantize_row): every fusion of the bf16 kernel (RMS
// norm input, residual add, SiLU pairs, RoPE + KV write), M 1..16 (the register kernel at M = 1
// and for int4 groups under 128, the tensor-core kernel above),
// N off the CTA's rows, K a few loads or not a multiple of the CTA's span, int4 groups of 32 and
// 128. Weights are random codes of the format (all finite E4M3 values, every nibble and zero
// point); outputs NaN-poisoned. Then dequantize_weights bit-exact against the reference rounded
// to bf16, and the one-line errors.
#include "kernels/cuda/gemv_quant.h"

#include <set>
#include <vector>

#include "bench/cases/gemv_fused.h"
#include "bench/quant_weights.h"
#include "gpu_test_util.h"
#include "kernels/cuda/carveout.h"

namespace ceiling {
namespace {

using namespace gpu_test;
using bf16 = __nv_bfloat16;
using W = cuda::GemvWeightFormat;
using In = cuda::GemvInput;

TEST(GpuGemvQuant, MatchesDequantizedReference) {
  CEILING_REQUIRE_GPU();
  Stream s;
  for (W fmt : {W::kFP8, W::kInt4})
    for (In input : {In::kPlain, In::kRmsNorm})
      for (int out : {0, 1, 2})  // plain, accumulate, SiLU pairs (N even)
        for (int M : {1, 3, 5, 16})
          for (int N : {1, 13, 1031})
            for (int K : {32, 96, 4128}) {
              const int n = out == 2 ? 2 * N : N;
              const int G = fmt == W::kInt4 ? 32 : 0;
              expect_case_passes(*bench::make_gemv_quant_case(fmt, G, input, out == 1, out == 2, M,
                                                              n, K, (M + N + K) % 2 == 1),
                                 s);
            }
  // int4 with G = 128 through the tensor-core kernel (M ≥ 2; G = 32 above took the register
  // kernel): K a single group and K = 33 groups, N off the 16-row tiles, one and two token tiles.
  for (In input : {In::kPlain, In::kRmsNorm})
    for (int out : {0, 1, 2})
      for (int M : {2, 9, 16})
        for (int N : {13, 1031})
          for (int K : {128, 4224}) {
            const int n = out == 2 ? 2 * N : N;
            expect_case_passes(*bench::make_gemv_quant_case(W::kInt4, 128, input, out == 1,
                                                            out == 2, M, n, K, N == 13),
                               s);
          }
  // The engine's 8B decode shapes, int4 with G = 128.
  for (W fmt : {W::kFP8, W::kInt4}) {
    const int G = fmt == W::kInt4 ? 128 : 0;
    expect_case_passes(
        *bench::make_gemv_quant_case(fmt, G, In::kRmsNorm, false, false, 1, 6144, 4096), s);
    expect_case_passes(
        *bench::make_gemv_quant_case(fmt, G, In::kRmsNorm, false, true, 1, 28672, 4096), s);
    expect_case_passes(
        *bench::make_gemv_quant_case(fmt, G, In::kPlain, true, false, 1, 4096, 14336), s);
    expect_case_passes(
        *bench::make_gemv_quant_case(fmt, G, In::kPlain, true, false, 16, 4096, 14336), s);
  }
  // fp8 with the norm input in eight-row CTAs (gemv_quant.cu: N / 8 ≥ 2048 one warp a CTA, ≥ 768
  // two), N off the eight rows, plain and SiLU pairs.
  for (int N : {6151, 16391})
    for (bool pairs : {false, true})
      expect_case_passes(*bench::make_gemv_quant_case(W::kFP8, 0, In::kRmsNorm, false, pairs, 1,
                                                      pairs ? N + 1 : N, 4096),
                         s);
}

// RoPE + KV write epilogue with quantized QKV weights; padding rows (slot -1) stay unwritten.
TEST(GpuGemvQuant, RopeEpilogueMatchesReference) {
  CEILING_REQUIRE_GPU();
  Stream s;
  for (W fmt : {W::kFP8, W::kInt4})
    for (int M : {1, 2, 5, 16})
      for (In input : {In::kRmsNorm, In::kPlain})  // plain: the engine's QKV above M = 1
        for (const auto& [H, Hq, Hkv, D] :
             {std::tuple{64, 2, 2, 16}, std::tuple{1056, 4, 1, 64}, std::tuple{4096, 32, 8, 128}})
          expect_case_passes(*bench::make_gemv_quant_rope_case(
                                 fmt, fmt == W::kInt4 ? (H % 128 == 0 ? 128 : 32) : 0, M, H, Hq,
                                 Hkv, D, {}, input),
                             s);
}

// Every tensor-core configuration (one and two 16-row tiles a warp) with every fusion: M 1, 8,
// 9, 16 (one and two token tiles), N off the tiles, K one group and many chunks a k slice with a
// short last chunk (4224 = 33 groups), fp8 and int4 G = 128.
TEST(GpuGemvQuant, MmaConfigsMatchReference) {
  CEILING_REQUIRE_GPU();
  Stream s;
  for (const cuda::GemvConfig& c : bench::quant_mma_configs())
    for (W fmt : {W::kFP8, W::kInt4}) {
      const int G = fmt == W::kInt4 ? 128 : 0;
      // Two warp tiles are built for the plain input only (gemv_quant.cu, kInt4TwoTilesMinN):
      // with the RMS-norm input the configuration is rejected (RejectsBadArguments).
      const bool norm_built = c.warp_tiles == 1;
      for (int M : {1, 8, 9, 16}) {
        for (In input : {In::kPlain, In::kRmsNorm})
          for (int out : {0, 1, 2})
            for (int N : {13, 1031})
              for (int K : {128, 4224}) {
                if (input == In::kRmsNorm && !norm_built) continue;
                const int n = out == 2 ? 2 * N : N;
                expect_case_passes(*bench::make_gemv_quant_case(fmt, G, input, out == 1, out == 2,
                                                                M, n, K, N == 13, c),
                                   s);
              }
        expect_case_passes(
            *bench::make_gemv_quant_rope_case(fmt, G, M, 4096, 32, 8, 128, c,
                                              norm_built ? In::kRmsNorm : In::kPlain),
            s);
      }
      expect_case_passes(
          *bench::make_gemv_quant_case(fmt, G, In::kPlain, true, false, 16, 4096, 14336, false, c),
          s);
    }
}

// The GEMM path's dequantization: bit-exact against bf16(dequantize_row) (fp8: e4m3 · scale in
// fp32; int4: (q − zero) · scale with bf16-valued scales, which the group word holds exactly).
// The tensor-core kernel asks for its L1 / shared-memory split (carveout.h) — without it a GEMV
// after gemm_int4 ran with ~28 KB of L1 (bench/lowprec_notes.md r164–r169) and only the latency
// runs would show it: after fp8 and int4 launches at M = 16 each kernel it ran has a request on
// this device, the driver holds that percent, and it leaves most of the SM to L1.
TEST(GpuGemvQuant, TensorCoreKernelAsksForItsSplit) {
  CEILING_REQUIRE_GPU();
  Stream s;
  for (W fmt : {W::kFP8, W::kInt4})
    expect_case_passes(*bench::make_gemv_quant_case(fmt, fmt == W::kInt4 ? 128 : 0, In::kPlain,
                                                    true, false, 16, 4096, 4096),
                       s);
  int dev = -1;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  std::set<const void*> kernels;
  for (const cuda::CarveoutRequest& r : cuda::carveout_requests()) {
    if (r.device != dev) continue;
    kernels.insert(r.kernel);
    cudaFuncAttributes a{};
    ASSERT_EQ(cudaFuncGetAttributes(&a, r.kernel), cudaSuccess);
    EXPECT_EQ(a.preferredShmemCarveout, r.percent);
    EXPECT_GE(r.percent, 1);
    EXPECT_LE(r.percent, 50) << "a GEMV's split should leave most of the SM to L1";
  }
  EXPECT_GE(kernels.size(), 2u) << "fp8 and int4 at M = 16 run two tensor-core kernels";
}

TEST(GpuGemvQuant, DequantizeIsExact) {
  CEILING_REQUIRE_GPU();
  Stream s;
  for (W fmt : {W::kFP8, W::kInt4})
    for (const auto& [N, K] : {std::pair{7, 64}, std::pair{300, 4096}}) {
      const int G = fmt == W::kInt4 ? (K >= 128 ? 128 : 32) : 0;
      bench::QuantWeightPool pool(fmt, N, K, G, 1);
      pool.fill(41 + N, s);
      DeviceBuffer out(size_t(N) * K * sizeof(bf16));
      ASSERT_TRUE(cuda::dequantize_weights(pool.at(0), N, K, out.as<bf16>(), s).ok());
      const auto got = bench::to_f32(bench::to_host(out.as<bf16>(), size_t(N) * K, s));
      const auto ref = pool.dequantized();
      size_t bad = 0;
      for (size_t i = 0; i < ref.size(); ++i) bad += got[i] != bf16_to_f32(f32_to_bf16(ref[i]));
      EXPECT_EQ(bad, 0u) << cuda::gemv_weight_format_name(fmt) << " N " << N << " K " << K;
    }
}

TEST(GpuGemvQuant, RejectsBadArguments) {
  CEILING_REQUIRE_GPU();
  DeviceBuffer b(1 << 16);
  cuda::GemvFusion f;
  cuda::GemvWeights w;
  w.format = W::kInt4;
  w.data = b.as<char>();
  w.groups = b.as<uint32_t>();
  w.group_size = 48;  // not a power of two
  auto err = [&](int M, int N, int K) {
    return cuda::gemv_fused_quant(f, b.as<bf16>(), w, nullptr, b.as<bf16>(), M, N, K, nullptr)
        .message();
  };
  EXPECT_NE(err(1, 8, 96).find("group size 48"), std::string::npos) << err(1, 8, 96);
  w.group_size = 32;
  EXPECT_NE(err(17, 8, 64).find("M 17"), std::string::npos) << err(17, 8, 64);
  EXPECT_NE(err(1, 8, 48).find("K % 32"), std::string::npos) << err(1, 8, 48);
  w.groups = nullptr;
  EXPECT_NE(err(1, 8, 64).find("group scales"), std::string::npos) << err(1, 8, 64);
  w.format = W::kFP8;
  EXPECT_NE(err(1, 8, 64).find("row scales"), std::string::npos) << err(1, 8, 64);
  w.row_scale = b.as<float>();
  EXPECT_TRUE(err(1, 8, 64).empty()) << err(1, 8, 64);
  w.format = W::kBF16;
  EXPECT_NE(err(1, 8, 64).find("bf16"), std::string::npos) << err(1, 8, 64);
  // A configuration the input has no kernel for: two warp tiles with the RMS-norm input.
  w.format = W::kInt4;
  w.groups = b.as<uint32_t>();
  w.group_size = 128;
  f.input = In::kRmsNorm;
  f.norm_weight = b.as<bf16>();
  f.eps = 1e-5f;
  const std::string msg =
      cuda::gemv_fused_quant_with_config({256, 32, 1, 2}, f, b.as<bf16>(), w, nullptr, b.as<bf16>(),
                                         16, 4096, 128, nullptr)
          .message();
  EXPECT_NE(msg.find("not built for M 16 with the RMS-norm input"), std::string::npos) << msg;
}

}  // namespace
}  // namespace ceiling
