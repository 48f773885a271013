// Tensor parallelism on GPUs (label gpu; skips with fewer than 2 GPUs or without NCCL):
//  * the NCCL communicator's all-reduce against the host sum in rank order: bit for bit on fp32
//    (2 ranks: one addition, exact either way), within one bf16 rounding on bf16; the custom
//    one-shot kernel bit for bit, on both of its paths (LL words up to 64 KB, flags above);
//  * TP = 2 (and 4 where there are 4 GPUs) on CudaOps against CpuOps fp32 on the same bf16
//    weights, judged by the bf16 noise rule (NoiseCheck), over a chunked prefill and decode steps
//    that capture and replay the CUDA graphs with the NCCL calls inside; also with fp8 and int4
//    projections and an fp8 KV cache.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>

#include "dist/tp_group.h"
#include "engine/cpu_ops.h"
#include "engine_test_util.h"
#include "model/quantize.h"
#include "test_models.h"

#if defined(HAVE_CEILING_NCCL)
#include "dist/nccl_communicator.h"
#endif

namespace ceiling::dist {
namespace {

using engine::gpu_test::NoiseCheck;

int gpu_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

#define REQUIRE_GPUS(n)                                                                     \
  if (gpu_count() < (n)) GTEST_SKIP() << "needs " << (n) << " GPUs, found " << gpu_count(); \
  if (!kHaveNccl) GTEST_SKIP() << "built without NCCL"

#if defined(HAVE_CEILING_NCCL)
constexpr bool kHaveNccl = true;
#else
constexpr bool kHaveNccl = false;
#endif

// Both paths on 2 ranks and on 4 where the host has them, three calls in a row per size (the
// one-shot kernel's receive buffers alternate halves between calls), sizes that change its grid
// and alternate its LL path (8-byte multiples up to 64 KB: n 8, 16384) with its flag path.
// The one-shot kernel sums in rank order in fp32: bit for bit the host's sum. NCCL is bit for bit
// on 2 ranks (one addition); on more its ring order differs, within the rounding of the adds.
TEST(NcclCommunicator, AllReduceMatchesHostSum) {
  REQUIRE_GPUS(2);
#if defined(HAVE_CEILING_NCCL)
  constexpr int kReps = 3;
  for (int world : {2, 4}) {
    if (world > gpu_count()) continue;
    auto comms = make_nccl_communicators(world, std::chrono::seconds(60), size_t{1} << 20);
    auto& c0 = dynamic_cast<NcclCommunicator&>(*comms[0]);
    if (c0.custom_max_bytes() == 0) std::cout << "no P2P between the GPUs: custom path untested\n";
    for (int path = 0; path < (c0.custom_max_bytes() ? 2 : 1); ++path)
      for (DType dt : {DType::kF32, DType::kBF16}) {
        for (int64_t n :
             {int64_t{1}, int64_t{7}, int64_t{4099}, int64_t{16384}, int64_t{131072}, int64_t{8}}) {
          SCOPED_TRACE(testing::Message() << "world " << world << (path ? " custom " : " nccl ")
                                          << dtype_name(dt) << " n " << n);
          // in[rep][rank], out[rep][rank]
          std::vector<std::vector<std::vector<float>>> in(
              kReps, std::vector<std::vector<float>>(world, std::vector<float>(n))),
              out = in;
          std::mt19937 rng(static_cast<uint32_t>(n * 7 + world));
          std::normal_distribution<float> nd;
          for (auto& rep : in)
            for (auto& v : rep)
              for (auto& x : v)
                x = dt == DType::kBF16 ? bf16_to_f32(f32_to_bf16(nd(rng))) : nd(rng);
          std::vector<std::thread> threads;
          for (int r = 0; r < world; ++r)
            threads.emplace_back([&, r] {
              cudaSetDevice(r);
              const size_t e = dtype_bytes(dt, 1), bytes = e * static_cast<size_t>(n);
              void* d = nullptr;
              cudaStream_t s = nullptr;
              cudaMalloc(&d, bytes);
              cudaStreamCreate(&s);
              auto& comm = dynamic_cast<NcclCommunicator&>(*comms[static_cast<size_t>(r)]);
              const TensorView x(d, dt, {n}, Device::kCuda);
              std::vector<uint16_t> h16(static_cast<size_t>(n));
              for (int rep = 0; rep < kReps; ++rep) {
                const std::vector<float>& src = in[rep][static_cast<size_t>(r)];
                const void* h = src.data();
                if (dt == DType::kBF16) {
                  for (int64_t i = 0; i < n; ++i) h16[i] = f32_to_bf16(src[i]);
                  h = h16.data();
                }
                cudaMemsetAsync(d, 0xff, bytes, s);  // poison
                cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s);
                cudaStreamSynchronize(s);
                if (path == 0)
                  comm.all_reduce_nccl(x, s);
                else
                  comm.all_reduce_custom(x, s);
                cudaStreamSynchronize(s);
                std::vector<float>& o = out[rep][static_cast<size_t>(r)];
                if (dt == DType::kF32) {
                  cudaMemcpy(o.data(), d, bytes, cudaMemcpyDeviceToHost);
                } else {
                  cudaMemcpy(h16.data(), d, bytes, cudaMemcpyDeviceToHost);
                  for (int64_t i = 0; i < n; ++i) o[i] = bf16_to_f32(h16[i]);
                }
              }
              cudaFree(d);
              cudaStreamDestroy(s);
            });
          for (auto& t : threads) t.join();
          ASSERT_EQ(cudaGetLastError(), cudaSuccess);
          const bool exact = path == 1 || world == 2;
          for (int rep = 0; rep < kReps; ++rep)
            for (int r = 0; r < world; ++r)
              for (int64_t i = 0; i < n; ++i) {
                float want = 0, mag = 0;
                for (int q = 0; q < world; ++q) {
                  want += in[rep][q][i];
                  mag += std::fabs(in[rep][q][i]);
                }
                if (dt == DType::kBF16) want = bf16_to_f32(f32_to_bf16(want));
                const float got = out[rep][static_cast<size_t>(r)][i];
                if (exact) {
                  ASSERT_EQ(got, want) << "rep " << rep << " rank " << r << " i " << i;
                } else {  // every partial sum rounded once more than the rank-order fp32 sum
                  const float ulp = dt == DType::kF32 ? 0x1p-23f : 0x1p-8f;
                  ASSERT_LE(std::fabs(got - want), world * ulp * mag)
                      << "rep " << rep << " rank " << r << " i " << i;
                }
              }
        }
      }
  }
#endif
}

// How compare_tp runs the GPU group.
struct TpRun {
  size_t custom_bytes = 0;  // the custom all-reduce's limit (0: NCCL only)
  bool graphs = true;
  bool fp8_kv = false;  // an E4M3 KV cache (the references round through E4M3 too)
};

// One sequence through TP = world on CudaOps and through CpuOps (fp32 and bf16-emulating), the
// reference's greedy pick fed to all (so the runs never diverge); logits judged by NoiseCheck.
void compare_tp(const ModelConfig& c, const ModelWeights& w, int world, const std::string& what,
                const TpRun& r = {}) {
  const int bs = r.fp8_kv ? 16 : 4, nb = 64, P = 29, steps = 12, V = c.vocab_size;  // fp8: 16+
  const engine::ForwardLimits limits{16, 8};
  engine::CpuOpsOptions ro{0};
  ro.fp8_kv_cache = r.fp8_kv;
  engine::CpuOps ref_ops(ro);
  ref_ops.upload(c, w);
  engine::Forward ref(ref_ops, limits);
  engine::KvCache ref_kv = ref_ops.alloc_kv_cache(nb, bs);
  // The noise yardstick is the same tensor-parallel forward on the CPU with bf16 storage
  // roundings: it rounds where the GPU ranks do, the partial sums before each all-reduce
  // included (a rounding the TP = 1 forward does not have).
  TpOptions eo;
  eo.world = world;
  eo.device = "cpu";
  eo.make_ops = [fp8_kv = r.fp8_kv](int) {
    engine::CpuOpsOptions e{0, true};
    e.fp8_kv_cache = fp8_kv;
    return std::make_unique<engine::CpuOps>(e);
  };
  TpGroup emu(c, w, eo);
  emu.init(limits, nb, bs);
  TpOptions o;
  o.world = world;
  o.device = "cuda";
  o.timeout = std::chrono::seconds(120);
  o.custom_all_reduce_max_bytes = r.custom_bytes;
  o.ops.cuda_graphs = r.graphs;
  o.ops.fp8_kv_cache = r.fp8_kv;
  TpGroup tp(c, w, o);
  tp.init(limits, nb, bs);

  std::vector<int32_t> blocks(nb);
  for (int i = 0; i < nb; ++i) blocks[static_cast<size_t>(i)] = i;
  std::mt19937 rng(11);
  std::vector<int32_t> ids(P);
  for (auto& x : ids) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(V));
  bool w8a8 = false;  // fp8 projections: W8A8 from 17 rows on both sides (model/weights.h)
  for (const QuantLinear& q : w.layers.at(0).quant) w8a8 = w8a8 || q.format == WeightFormat::kFp8;
  NoiseCheck check(r.fp8_kv ? engine::gpu_test::kMaxRoundingNoiseFp8Kv
                   : w8a8   ? engine::gpu_test::kMaxRoundingNoiseW8A8
                            : engine::gpu_test::kMaxRoundingNoise);
  int done = 0;
  auto host = [](engine::Ops& ops, const TensorView& l) {
    std::vector<float> v(static_cast<size_t>(l.numel()));
    ops.to_host(l, v.data());
    return v;
  };
  while (done < P + steps) {
    const int n = done < P ? std::min(limits.max_tokens, P - done) : 1;
    engine::StepBatch step;
    step.max_blocks = nb;
    engine::append_sequence(step, std::vector<int32_t>(ids.begin() + done, ids.begin() + done + n),
                            done, blocks, bs, true);
    const auto want = host(ref_ops, ref.run(step, ref_kv));
    const std::span<const float> e = emu.run(step);
    const std::vector<float> noise(e.begin(), e.end());
    const std::span<const float> g = tp.run(step);
    check.expect(std::vector<float>(g.begin(), g.end()), want, noise,
                 what + " tokens " + std::to_string(done) + "+" + std::to_string(n));
    done += n;
    if (done >= P && static_cast<int>(ids.size()) < P + steps)
      ids.push_back(engine::gpu_test::argmax(want.data(), V));
  }
  std::cout << what << ": " << check.summary() << "\n";
}

ModelConfig random_tp_config() {
  ModelConfig c = engine::testing::small_config(Arch::kLlama);
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.head_dim = 64;  // the GPU kernels' head dim
  c.hidden_size = 256;
  c.intermediate_size = 512;  // 256 down_proj inputs a rank at TP 2: two int4 groups of 128
  c.vocab_size = 1001;
  return c;
}

TEST(TensorParallelGpu, RandomModelMatchesCpuWithinBf16Noise) {
  REQUIRE_GPUS(2);
  const auto m = engine::testing::make_random_model(random_tp_config(), DType::kBF16, 5);
  for (int world : {2, 4}) {
    if (world > gpu_count()) continue;
    const std::string tp = "TP=" + std::to_string(world);
    compare_tp(m->config, m->weights, world, tp);
    compare_tp(m->config, m->weights, world, tp + " custom all-reduce",
               {.custom_bytes = size_t{1} << 20});
  }
}

// Quantized projections (sharded like their dense form) and an fp8 KV cache on every rank,
// against CpuOps with the same weights and E4M3 cache rounding.
TEST(TensorParallelGpu, QuantizedWeightsAndFp8KvMatchCpu) {
  REQUIRE_GPUS(2);
  const auto m = engine::testing::make_random_model(random_tp_config(), DType::kBF16, 7);
  for (WeightFormat fmt : {WeightFormat::kDense, WeightFormat::kFp8, WeightFormat::kInt4}) {
    ModelWeights q = m->weights;
    WeightArena arena;
    if (fmt != WeightFormat::kDense) quantize_projections(q, fmt, 128, arena);
    for (bool fp8_kv : {false, true}) {
      if (fmt == WeightFormat::kDense && !fp8_kv) continue;  // the test above
      const std::string what = std::string(weight_format_name(fmt)) + (fp8_kv ? " fp8 KV" : "");
      compare_tp(m->config, q, 2, what + " TP=2 custom all-reduce",
                 {.custom_bytes = size_t{1} << 20, .fp8_kv = fp8_kv});
      if (gpu_count() >= 4)
        compare_tp(m->config, q, 4, what + " TP=4", {.custom_bytes = 0, .fp8_kv = fp8_kv});
    }
  }
}

TEST(TensorParallelGpu, Stories260kMatchesCpuWithinBf16Noise) {
  REQUIRE_GPUS(2);
  const Model m = load_model(std::filesystem::path(CEILING_SOURCE_DIR) / "models/stories260K");
  const auto w = engine::gpu_test::to_bf16(m.weights);  // CudaOps computes with bf16 weights
  compare_tp(m.config, w->views, 2, "stories260K TP=2 eager", {.graphs = false});
  compare_tp(m.config, w->views, 2, "stories260K TP=2");
}

TEST(TensorParallelGpu, MoreRanksThanGpusIsAnError) {
  REQUIRE_GPUS(1);
  if (gpu_count() >= 4) GTEST_SKIP() << "stories260K splits at most 4 ways; this host has 4 GPUs";
  const Model m = load_model(std::filesystem::path(CEILING_SOURCE_DIR) / "models/stories260K");
  TpOptions o;
  o.world = 4;
  o.device = "cuda";
  try {
    TpGroup tp(m.config, m.weights, o);
    FAIL() << "TP = 4 started on " << gpu_count() << " GPUs";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs 4 GPUs"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ceiling::dist
