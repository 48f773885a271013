// The whole-model predictor against hand-worked numbers. Llama-3.1-8B: H = 4096, I = 14336,
// L = 32, Hq = 32, Hkv = 8, D = 128, V = 128256, untied lm_head.
#include "roofline/model_cost.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/status.h"
#include "model/config.h"

using namespace ceiling;
using namespace ceiling::roofline;

namespace {

ModelConfig llama8b() {
  return *find_preset("llama-3.1-8b");
}

Scenario decode(int64_t batch, int64_t context) {
  Scenario s;
  s.phase = Phase::kDecode;
  s.batch = batch;
  s.context = context;
  return s;
}

const OpCost& op(const std::vector<OpCost>& ops, const std::string& name) {
  for (const auto& o : ops)
    if (o.name == name) return o;
  throw std::runtime_error("no op " + name);
}

// Linear-layer weights of Llama-3.1-8B, bf16, per layer:
//   qkv     4096 x (32+8+8)*128 = 4096 x 6144  -> 25,165,824 params
//   o_proj  4096 x 4096                        -> 16,777,216
//   gate_up 4096 x 2*14336                     -> 117,440,512
//   down    14336 x 4096                       -> 58,720,256
//   sum                                           218,103,808 params = 436,207,616 bytes
// x 32 layers = 6,979,321,856 params = 13,958,643,712 bytes; lm_head 4096 x 128256 =
// 525,336,576 params = 1,050,673,152 bytes.
constexpr double kLinearParams = 6979321856.0;
constexpr double kLmHeadParams = 525336576.0;

}  // namespace

TEST(Llama8B, DecodeBatch1Context1024BytesFlopsTime) {
  const GpuCeilings g = ceilings_for("h100-sxm", false);
  const StepReport r = predict_step(llama8b(), g, decode(1, 1024));
  // Bytes: weights 13.959e9 + 1.051e9 (lm_head) + KV read 1025 tokens x 131072 B = 0.134e9,
  // + activations (~12 MB: norms, rope, logits). The embedding table is not read, only one row.
  const double kv = 1025.0 * 131072;
  const double must = 2 * kLinearParams + 2 * kLmHeadParams + kv;  // 15.1437e9
  EXPECT_GT(r.bytes, must);
  EXPECT_LT(r.bytes, must + 20e6) << "activations are a few MB at batch 1";
  EXPECT_NEAR(r.bytes / 1e9, 15.15, 0.02);  // "~15 GB"
  // FLOPs: 2 per weight (7.505e9 params -> 15.009e9) + attention 4*D*keys per head per layer:
  // 4 * 128 * 1025 * 32 heads * 32 layers = 0.537e9 -> 15.546e9, + elementwise (~4 MFLOP).
  const double gemm_attn = 2 * (kLinearParams + kLmHeadParams) + 4.0 * 128 * 1025 * 32 * 32;
  EXPECT_GT(r.flops, gemm_attn);
  EXPECT_LT(r.flops, gemm_attn + 10e6);
  EXPECT_NEAR(r.flops / 1e9, 15.55, 0.01);
  // Every op is memory-bound at batch 1, so the roofline time is bytes / 3.35e12 = 4.52 ms.
  EXPECT_NEAR(r.time_roofline_s, r.bytes / 3.35e12, 1e-9);
  EXPECT_NEAR(r.time_roofline_s * 1e3, 4.52, 0.01);
  EXPECT_EQ(r.roofline_limiter, Limiter::kMemory);
  EXPECT_EQ(r.limiter, Limiter::kMemory);
  // Tensor-core utilization: 15.55e9 / (4.52e-3 s * 989.4e12) = 0.35% against the roofline
  // time; against the (longer) predicted time it is lower.
  const double util_roofline = 15.546e9 / (r.time_roofline_s * 989.4e12);
  EXPECT_NEAR(util_roofline, 0.0035, 0.0001);
  EXPECT_NEAR(r.tensor_core_utilization_roofline, util_roofline, 1e-6);
  EXPECT_LT(r.tensor_core_utilization, util_roofline);
  EXPECT_GT(r.tensor_core_utilization, 0.6 * util_roofline);
  // Layer 2 is slower than layer 1 (achievable bandwidth 0.9, ~200 launches), but not wildly.
  EXPECT_GT(r.time_predicted_s, r.time_roofline_s / 0.9);
  EXPECT_LT(r.time_predicted_s, 1.5 * r.time_roofline_s);
  EXPECT_GT(r.hbm_utilization, 0.6);
  EXPECT_LE(r.hbm_utilization, 1.0);
  EXPECT_NEAR(r.tokens_per_s, 1 / r.time_predicted_s, 1e-9);
  // Per layer at batch 1 the norms, RoPE + KV write and the SiLU run inside the GEMVs: qkv,
  // attention, o, gate/up, down; then embedding, final norm, lm_head, sampling.
  EXPECT_EQ(r.launches, 32 * 5 + 4);
}

TEST(Llama8B, KvBytesPerTokenIsExact) {
  // 2 (K and V) x 32 layers x 8 KV heads x 128 dims x 2 bytes = 131072.
  const GpuCeilings g = ceilings_for("h100-sxm", false);
  EXPECT_EQ(memory_report(llama8b(), g, decode(1, 1024)).kv_bytes_per_token, 131072.0);
  Scenario s = decode(1, 1024);
  s.kv_dtype = DType::kF8E4M3;
  EXPECT_EQ(memory_report(llama8b(), g, s).kv_bytes_per_token, 65536.0);
  s.tp = 2;  // each GPU holds 4 of the 8 KV heads
  EXPECT_EQ(memory_report(llama8b(), g, s).kv_bytes_per_token, 32768.0);
}

TEST(Llama8B, MemoryFit) {
  // Weights: linear 13.959e9 + embedding 1.051e9 + lm_head 1.051e9 + norms 2*4096*2*32 + 4096*2
  // = 16.0605e9 B. H100 SXM: 80 GiB * 0.9 = 77.309e9 usable; decode at context 1024 keeps 1025
  // tokens -> 65 blocks of 16 = 1040 tokens x 131072 B = 136.3e6 B per sequence:
  // (77.309e9 - 16.0605e9) / 136.3e6 = 449.3 -> 449.
  const GpuCeilings g = ceilings_for("h100-sxm", false);
  const MemoryReport m = memory_report(llama8b(), g, decode(1, 1024));
  EXPECT_NEAR(m.weights_bytes, 2 * kLinearParams + 4 * kLmHeadParams + 2 * 4096 * 65, 1);
  EXPECT_NEAR(m.usable_bytes, 80.0 * 1073741824 * 0.9, 1);
  EXPECT_EQ(m.max_sequences, 449);
}

TEST(Llama8B, PrefillIsComputeBound) {
  const GpuCeilings h100 = ceilings_for("h100-sxm", false);
  Scenario s;
  s.phase = Phase::kPrefill;
  s.batch = 1;
  s.context = 4096;
  const StepReport r = predict_step(llama8b(), h100, s);
  EXPECT_EQ(r.roofline_limiter, Limiter::kCompute);
  EXPECT_EQ(r.limiter, Limiter::kCompute);
  // GEMMs at M = 4096 tokens: intensity ~ 2*M*K*N / (2*K*N + 2*M*(K+N)) ~ 1000+ FLOP/B, over the
  // ridge (295). Attention: causal 2*D*S*(S+1) per head per layer.
  EXPECT_EQ(op(r.ops, "gate_up_proj").pred.roofline_limiter, Limiter::kCompute);
  const OpCost& attn = op(r.ops, "attention");
  EXPECT_NEAR(attn.cost.flops, 32.0 * 2 * 128 * 4096 * 4097, 1);
  EXPECT_EQ(attn.pred.roofline_limiter, Limiter::kCompute);
  // FLOPs: linear 2 * 6.979e9 params * 4096 tokens = 57.174e12; lm_head for the last token only
  // 2 * 0.525e9 = 0.001e12; attention 32 layers * 32 heads * 2 * 128 * 4096 * 4097 = 4.399e12;
  // elementwise ~0.02e12 -> 61.59e12.
  EXPECT_NEAR(r.flops / 1e12, 61.59, 0.02);
  // Roofline time: compute-bound GEMMs and attention (57.174e12 + 4.399e12) / 989.4e12 = 62.23 ms,
  // plus memory-bound elementwise ops at 3.35e12 B/s: per layer two norms (2 x 4096 x 4096 x 2 B
  // each = 67 MB), silu_mul (3 x 4096 x 14336 x 2 B = 352 MB), rope (~122 MB) -> ~608 MB x 32 =
  // 19.5 GB = 5.8 ms; lm_head 0.31 ms -> ~68.3 ms. (The residual adds ride on compute-bound GEMMs.)
  EXPECT_NEAR(r.time_roofline_s * 1e3, 68.3, 0.5);
  EXPECT_NEAR(r.ttft_s, r.time_predicted_s, 1e-12);
  EXPECT_NEAR(r.tokens_per_s, 4096 / r.time_predicted_s, 1e-6);
  // TC utilization is high but below the compute efficiency factor (0.8).
  EXPECT_GT(r.tensor_core_utilization, 0.6);
  EXPECT_LT(r.tensor_core_utilization, 0.8);
}

TEST(Llama8B, Int4CutsDecodeByTheByteRatioAtBatch1NotAt256) {
  // Batch 1: int4 linear weights = 0.5 B/param + a bf16 scale per 128 -> 3.599e9 B; lm_head stays
  // bf16 (1.051e9), KV 0.134e9 -> 4.80e9 B against 15.16e9: ratio 3.16 (3.8 if lm_head were
  // int4 too). All memory-bound, so time scales with bytes.
  const GpuCeilings g = ceilings_for("h100-sxm", false);
  Scenario s = decode(1, 1024);
  const StepReport bf16 = predict_step(llama8b(), g, s);
  s.weights = WeightDtype::kINT4;
  s.group_size = 128;
  const StepReport int4 = predict_step(llama8b(), g, s);
  const double byte_ratio = bf16.bytes / int4.bytes;
  EXPECT_NEAR(byte_ratio, 3.16, 0.02);
  EXPECT_NEAR(bf16.time_roofline_s / int4.time_roofline_s, byte_ratio, 0.01);
  // (+ the input norm's weight and RoPE's inv_freq [64] f32, read by the fused GEMV at batch 1)
  EXPECT_NEAR(op(int4.ops, "qkv_proj").weight_bytes,
              4096 * 6144 / 2.0 + 2 * 32 * 6144 + 2 * 4096 + 4 * 64, 1);
  EXPECT_EQ(op(int4.ops, "lm_head").weight_bytes, 2 * kLmHeadParams);
  // Batch 256: KV reads (256 x 1025 x 131072 = 34.4e9 B) dominate and int4 GEMMs go compute-bound
  // (bf16 math): the cut is small.
  Scenario b = decode(256, 1024);
  const StepReport bf16_256 = predict_step(llama8b(), g, b);
  b.weights = WeightDtype::kINT4;
  const StepReport int4_256 = predict_step(llama8b(), g, b);
  const double ratio256 = bf16_256.time_roofline_s / int4_256.time_roofline_s;
  EXPECT_GT(ratio256, 1.0);
  EXPECT_LT(ratio256, 1.3);
  EXPECT_EQ(op(int4_256.ops, "gate_up_proj").pred.roofline_limiter, Limiter::kCompute);
}

TEST(Llama8B, CriticalBatchNearTheRidge) {
  // bf16 GEMM intensity at batch B is ~B FLOP/B (2*B*K*N over 2*K*N weight bytes), a little less
  // for activation bytes: the linear layers cross the 295 ridge a bit above B = 295.
  const GpuCeilings g = ceilings_for("h100-sxm", false);
  const StepReport r = predict_step(llama8b(), g, decode(1, 1024));
  ASSERT_TRUE(r.critical_batch.has_value());
  EXPECT_GT(*r.critical_batch, 295);
  EXPECT_LT(*r.critical_batch, 360);
  // int4 weights (0.5 + 2/128 B/param) with bf16 math: the GEMMs alone cross near B ~ 80; the
  // bf16 lm_head (intensity ~B) is part of the sum and moves the crossing to ~100.
  Scenario s = decode(1, 1024);
  s.weights = WeightDtype::kINT4;
  const StepReport q = predict_step(llama8b(), g, s);
  ASSERT_TRUE(q.critical_batch.has_value());
  EXPECT_GT(*q.critical_batch, 70);
  EXPECT_LT(*q.critical_batch, 120);
}

TEST(Ops, StructureFollowsTheModel) {
  const GpuCeilings g = ceilings_for("h100-sxm", false);
  // Qwen2.5 has q/k/v bias; tp = 2 adds two all-reduces per layer, the embedding's and the
  // logits gather.
  const ModelConfig qwen = *find_preset("qwen2.5-7b");
  Scenario s = decode(4, 512);
  s.tp = 2;
  const auto ops = model_ops(qwen, g, s);
  EXPECT_NE(op(ops, "qkv_proj").note.find("bias"), std::string::npos);
  EXPECT_EQ(op(ops, "attn_allreduce").count, 28);
  EXPECT_EQ(op(ops, "mlp_allreduce").pred.limiter, Limiter::kCommunication);
  EXPECT_NO_THROW(op(ops, "embedding_allreduce"));
  EXPECT_NO_THROW(op(ops, "logits_allgather"));
  // Per-GPU qkv: (28 + 2*4)/2 heads * 128 = 2304 columns.
  EXPECT_NEAR(op(ops, "qkv_proj").cost.flops, 2.0 * 4 * 3584 * 2304, 1);
  // Sums of parts equal the whole.
  for (const auto& o : ops)
    EXPECT_NEAR(o.weight_bytes + o.activation_bytes + o.kv_bytes, o.cost.bytes, 1e-6) << o.name;
}

// Decode at batch 1 (one GPU or tensor parallel) is costed as CudaOps runs it: the norms, RoPE +
// KV write and SiLU inside the GEMVs. Bytes move between ops but the step reads the same weights and K/V;
// Qwen3's per-head q/k norm keeps RoPE a kernel of its own; batch 2 is unfused.
TEST(Ops, DecodeBatch1IsFusedAsTheEngineRunsIt) {
  const GpuCeilings g = ceilings_for("h100-sxm", false);
  const ModelConfig m = llama8b();
  const auto fused = model_ops(m, g, decode(1, 1024));
  const auto unfused = model_ops(m, g, decode(2, 1024));
  for (const char* name : {"attn_norm", "mlp_norm", "silu_mul", "rope_kv_write"}) {
    EXPECT_ANY_THROW(op(fused, name)) << name;
    EXPECT_NO_THROW(op(unfused, name)) << name;
  }
  EXPECT_NE(op(fused, "qkv_proj").note.find("RoPE"), std::string::npos);
  EXPECT_NE(op(fused, "gate_up_proj").note.find("SiLU"), std::string::npos);
  // The fused QKV writes q only (k and v go to the cache, counted as KV bytes), gate/up writes
  // silu(gate)·up [1, I]; the residual adds are read by o_proj and down_proj in both.
  EXPECT_NEAR(op(fused, "qkv_proj").kv_bytes, 2.0 * 8 * 128 * 2, 1e-9);
  EXPECT_NEAR(op(fused, "gate_up_proj").activation_bytes, 2.0 * (4096 + 14336), 1e-9);
  EXPECT_NEAR(op(fused, "o_proj").activation_bytes, 2.0 * (4096 + 2 * 4096), 1e-9);
  double wf = 0, wu = 0;
  for (const auto& o : fused) wf += o.weight_bytes * o.count;
  for (const auto& o : unfused) wu += o.weight_bytes * o.count;
  // The same weights either way, except RoPE's inv_freq table (D/2 floats per layer), which the
  // fused QKV reads as a constant (the unfused rope kernel's cos/sin count as activations), and
  // the embedding rows gathered (one per token: batch 2 reads one more row of 4096 bf16).
  EXPECT_NEAR(wf - wu, 4.0 * 64 * 32 - 2.0 * 4096, 1.0);
  ModelConfig qk = m;  // Qwen3-style per-head q/k norm
  qk.qk_norm = true;
  const auto qwen3 = model_ops(qk, g, decode(1, 1024));
  EXPECT_NO_THROW(op(qwen3, "qk_norm_rope_kv_write"));
  EXPECT_ANY_THROW(op(qwen3, "silu_mul"));
  for (const auto& o : fused)
    EXPECT_NEAR(o.weight_bytes + o.activation_bytes + o.kv_bytes, o.cost.bytes, 1e-6) << o.name;
  Scenario tp = decode(1, 1024);  // the same fused steps, plus the all-reduces of the residual
  tp.tp = 2;
  const auto tp_ops = model_ops(m, g, tp);
  for (const char* name : {"attn_norm", "mlp_norm", "silu_mul", "rope_kv_write"})
    EXPECT_ANY_THROW(op(tp_ops, name)) << name;
  EXPECT_EQ(op(tp_ops, "attn_allreduce").count, 32);
  EXPECT_EQ(op(tp_ops, "mlp_allreduce").count, 32);
}

TEST(Ops, BadScenariosFailWithOneLine) {
  const GpuCeilings g = ceilings_for("h100-sxm", false);
  auto expect_fail = [&](const ModelConfig& m, const Scenario& s, const std::string& needle) {
    try {
      predict_step(m, g, s);
      ADD_FAILURE() << "expected an error containing " << needle;
    } catch (const Error& e) {
      const std::string w = e.what();
      EXPECT_NE(w.find(needle), std::string::npos) << w;
      EXPECT_EQ(w.find('\n'), std::string::npos) << "one line: " << w;
    }
  };
  const ModelConfig m = llama8b();
  expect_fail(m, decode(0, 1024), "batch");
  expect_fail(m, decode(1, 0), "context");
  expect_fail(m, decode(-3, 10), "batch");
  Scenario s = decode(1, 1024);
  s.tp = 3;
  expect_fail(m, s, "does not divide num_attention_heads 32");
  s.tp = 16;  // 32 heads split fine, 8 KV heads don't
  expect_fail(m, s, "num_key_value_heads 8");
  s = decode(1, 131072);  // 131073 positions > 131072
  expect_fail(m, s, "max_position_embeddings");
  s = decode(1, 10);
  s.weights = WeightDtype::kINT4;
  s.group_size = 0;
  expect_fail(m, s, "group size");
  EXPECT_THROW(parse_phase("train"), Error);
  EXPECT_THROW(parse_weight_dtype("int3"), Error);
  EXPECT_THROW(parse_kv_dtype("int8"), Error);
  // fp8 on a GPU without fp8 (w8a8 math) names the missing path.
  Scenario f = decode(1, 10);
  f.weights = WeightDtype::kFP8;
  f.w8a8 = true;
  EXPECT_THROW(predict_step(m, ceilings_for("a100-sxm-80gb", false), f), Error);
}

TEST(Ops, BadConfigFilesFailNamingTheField) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("roofline-cfg-" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  auto write = [&](const std::string& text) {
    std::ofstream(dir / "config.json") << text;
    return dir.string();
  };
  const std::string base =
      R"("model_type": "llama", "vocab_size": 1000, "hidden_size": 256, "intermediate_size": 512,
         "num_hidden_layers": 2, "num_key_value_heads": 2)";
  EXPECT_THROW(resolve_model(write("{" + base + "}")), Error);  // num_attention_heads missing
  try {
    resolve_model(write("{" + base + R"(, "num_attention_heads": 0})"));
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("num_attention_heads"), std::string::npos) << e.what();
  }
  const ModelConfig ok = resolve_model(write("{" + base + R"(, "num_attention_heads": 4})"));
  EXPECT_NO_THROW(predict_step(ok, ceilings_for("l4", false), decode(2, 100)));
  EXPECT_THROW(resolve_model("no-such-model"), Error);
  fs::remove_all(dir);
}

TEST(Ops, EagerLaunchesCostMoreThanGraphsAtSmallBatch) {
  // Llama-3.2-1B decode at batch 1: ~150 kernels of a few microseconds each; eager launches are
  // bounded by the host launch rate (3.1 us per kernel), graphs by the per-node cost (0.8 us).
  const GpuCeilings g = ceilings_for("h100-sxm", false);
  Scenario s = decode(1, 512);
  const StepReport graphs = predict_step(*find_preset("llama-3.2-1b"), g, s);
  s.cuda_graphs = false;
  const StepReport eager = predict_step(*find_preset("llama-3.2-1b"), g, s);
  EXPECT_EQ(graphs.launches, eager.launches);
  EXPECT_GT(eager.time_predicted_s, graphs.time_predicted_s);
  EXPECT_EQ(eager.time_roofline_s, graphs.time_roofline_s) << "layer 1 has no launches";
  // The eager step can't be shorter than launches x 3.1 us.
  EXPECT_GE(eager.time_predicted_s, eager.launches * g.launch_eager_s * (1 - 1e-12));
}
