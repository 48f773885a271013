// Fused RoPE + paged KV write (and the Qwen3 q/k norm) vs cpu::rope + cpu::kv_write: scattered
// blocks, contexts ending mid-block, skipped slots (-1), untouched cache slots still poisoned;
// head dims that are not multiples of 16 (the narrow kernel), with the norm and an fp8 cache.
#include "bench/cases/rope_kv.h"

#include <fmt/format.h>

#include "gpu_test_util.h"
#include "kernels/cuda/rope_kv.h"

namespace ceiling {
namespace {

using namespace gpu_test;

TEST(GpuRopeKv, MatchesReference) {
  CEILING_REQUIRE_GPU();
  Stream s;
  const int heads[][2] = {{1, 1}, {4, 2}, {32, 8}, {5, 1}};
  for (int T : {1, 3, 17, 100})
    for (const auto& [Hq, Hkv] : heads)
      for (int D : {8, 16, 24, 40, 64, 80, 128, 256})  // 8, 24, 40: the narrow kernel
        for (int bs : {1, 7, 16}) {
          bench::RopeKvShape sh;
          sh.T = T;
          sh.Hq = Hq;
          sh.Hkv = Hkv;
          sh.D = D;
          sh.block_size = bs;
          sh.num_blocks = (T + bs - 1) / bs + 3;
          sh.skip_every = T > 2 ? 3 : 0;
          sh.qk_norm = (T + D) % 2 == 1;
          expect_case_passes(*bench::make_rope_kv_case(sh), s);
        }
}

// T >= 512 takes the prefill configuration (four tasks a thread, one token a CTA, evict-first
// stores); the Configurations test below covers several tokens a CTA.
TEST(GpuRopeKv, PrefillSizes) {
  CEILING_REQUIRE_GPU();
  Stream s;
  const int heads[][2] = {{32, 8}, {5, 1}};
  for (int T : {512, 601})
    for (const auto& [Hq, Hkv] : heads)
      for (int D : {16, 80, 128, 256})
        for (bool qk_norm : {false, true}) {
          if (T == 512 && (Hq != 32 || D != 128)) continue;
          bench::RopeKvShape sh;
          sh.T = T;
          sh.Hq = Hq;
          sh.Hkv = Hkv;
          sh.D = D;
          sh.block_size = 16;
          sh.num_blocks = (T + 15) / 16 + 3;
          sh.skip_every = 5;
          sh.qk_norm = qk_norm;
          expect_case_passes(*bench::make_rope_kv_case(sh), s);
        }
}

// Every configuration at awkward sizes: token counts that are not multiples of the tokens a CTA
// (1, primes), heads that do not fill the warps, D whose lanes do not fill a power of two (80),
// skipped slots, with and without the q/k norm; consecutive slots (a prefill's layout).
TEST(GpuRopeKv, Configurations) {
  CEILING_REQUIRE_GPU();
  Stream s;
  const int heads[][2] = {{32, 8}, {5, 1}};
  for (int tokens : {1, 2, 3, 4})
    for (int tasks : {1, 4})
      for (int T : {1, 7, 37})
        for (const auto& [Hq, Hkv] : heads)
          for (int D : {16, 80, 128, 512}) {
            bench::RopeKvShape sh;
            sh.T = T;
            sh.Hq = Hq;
            sh.Hkv = Hkv;
            sh.D = D;
            sh.block_size = T % 2 ? 16 : 7;
            sh.num_blocks = (T + sh.block_size - 1) / sh.block_size + 2;
            sh.skip_every = T > 2 ? 3 : 0;
            sh.qk_norm = (T + D + tokens) % 2 == 1;
            sh.seq_slots = tasks == 4 && D == 128;
            sh.cfg = cuda::RopeKvConfig{tokens, tasks, T == 7};
            SCOPED_TRACE(cuda::rope_kv_config_name(*sh.cfg));
            expect_case_passes(*bench::make_rope_kv_case(sh), s);
          }
  cuda::RopeKvArgs a;
  a.T = 0;
  a.Hq = a.Hkv = 1;
  a.D = 64;
  a.block_size = a.num_blocks = 1;
  for (cuda::RopeKvConfig c : {cuda::RopeKvConfig{0, 4}, cuda::RopeKvConfig{5, 4},
                               cuda::RopeKvConfig{2, 2}, cuda::RopeKvConfig{1, 12}}) {
    const Status st = cuda::rope_kv_write_with_config(a, c, s);
    EXPECT_FALSE(st.ok()) << cuda::rope_kv_config_name(c);
    EXPECT_NE(st.message().find("not built"), std::string::npos) << st.message();
  }
}

// An fp8 (E4M3) cache: k holds e4m3 of its bf16 value · (1 / k_scale), v the same of its copy
// (bit-exact against model/quantize.h's e4m3_round); decode and prefill sizes, both task counts,
// the q/k norm, scale 1 (E4M3 subnormals) and uneven scales, skipped slots, poison elsewhere.
TEST(GpuRopeKv, Fp8Cache) {
  CEILING_REQUIRE_GPU();
  Stream s;
  const int heads[][2] = {{32, 8}, {5, 1}};
  for (auto [ks, vs] : {std::pair{1.0f, 1.0f}, {0.0173f, 0.0091f}})
    for (int T : {1, 3, 17, 601})
      for (const auto& [Hq, Hkv] : heads)
        for (int D : {8, 40, 64, 128})
          for (bool qk_norm : {false, true}) {
            bench::RopeKvShape sh;
            sh.T = T;
            sh.Hq = Hq;
            sh.Hkv = Hkv;
            sh.D = D;
            sh.block_size = T % 2 ? 16 : 7;
            sh.num_blocks = (T + sh.block_size - 1) / sh.block_size + 2;
            sh.skip_every = T > 2 ? 3 : 0;
            sh.qk_norm = qk_norm;
            sh.fp8_kv = true;
            sh.k_scale = ks;
            sh.v_scale = vs;
            expect_case_passes(*bench::make_rope_kv_case(sh), s);
          }
  cuda::RopeKvArgs a;
  a.T = 1;
  a.Hq = a.Hkv = 1;
  a.D = 64;
  a.block_size = a.num_blocks = 1;
  a.kv_format = cuda::KvFormat::kFP8;
  a.v_scale_inv = 0.0f;
  const Status st = cuda::rope_kv_write(a, s);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("reciprocal scales"), std::string::npos) << st.message();
}

TEST(GpuRopeKv, ManyHeadsAtDecode) {  // more warp-iterations than 32 warps cover
  CEILING_REQUIRE_GPU();
  Stream s;
  bench::RopeKvShape sh;
  sh.T = 3;
  sh.Hq = 80;
  sh.Hkv = 20;
  sh.D = 512;
  sh.qk_norm = true;
  expect_case_passes(*bench::make_rope_kv_case(sh), s);
}

TEST(GpuRopeKv, LongPositionsAndQkNorm) {
  CEILING_REQUIRE_GPU();
  Stream s;
  bench::RopeKvShape sh;
  sh.T = 64;
  sh.qk_norm = true;
  sh.max_position = 131072;
  expect_case_passes(*bench::make_rope_kv_case(sh), s);
}

TEST(GpuRopeKv, RejectsUnsupportedHeadDim) {
  CEILING_REQUIRE_GPU();
  cuda::RopeKvArgs a;
  a.T = 1;
  a.Hq = a.Hkv = 1;
  a.block_size = a.num_blocks = 1;
  for (int D : {73, 514, 0}) {
    a.D = D;
    const Status st = cuda::rope_kv_write(a, nullptr);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find(fmt::format("head_dim {}", D)), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace ceiling
