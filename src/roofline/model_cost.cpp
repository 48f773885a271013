#include "roofline/model_cost.h"

#include <algorithm>
#include <cmath>

#include "core/status.h"
#include "roofline/parameters.h"

namespace ceiling::roofline {

std::string_view phase_name(Phase p) {
  return p == Phase::kPrefill ? "prefill" : "decode";
}

Phase parse_phase(std::string_view s) {
  if (s == "prefill") return Phase::kPrefill;
  if (s == "decode") return Phase::kDecode;
  fail("unknown phase '{}' (expected prefill or decode)", s);
}

std::string_view weight_dtype_name(WeightDtype w) {
  switch (w) {
    case WeightDtype::kBF16:
      return "bf16";
    case WeightDtype::kFP8:
      return "fp8";
    case WeightDtype::kINT8:
      return "int8";
    case WeightDtype::kINT4:
      return "int4";
  }
  return "?";
}

WeightDtype parse_weight_dtype(std::string_view s) {
  if (s == "bf16") return WeightDtype::kBF16;
  if (s == "fp8") return WeightDtype::kFP8;
  if (s == "int8") return WeightDtype::kINT8;
  if (s == "int4") return WeightDtype::kINT4;
  fail("unknown weight dtype '{}' (expected bf16, fp8, int8 or int4)", s);
}

DType parse_kv_dtype(std::string_view s) {
  if (s == "bf16") return DType::kBF16;
  if (s == "fp8") return DType::kF8E4M3;
  fail("unknown KV-cache dtype '{}' (expected bf16 or fp8)", s);
}

void validate(const ModelConfig& m, const Scenario& s) {
  constexpr int64_t kMax = int64_t{1} << 24;
  CEILING_ENSURE(s.batch >= 1 && s.batch <= kMax, "batch must be in 1..{} (got {})", kMax, s.batch);
  CEILING_ENSURE(s.context >= 1 && s.context <= kMax, "context must be in 1..{} (got {})", kMax,
                 s.context);
  CEILING_ENSURE(s.tp >= 1 && s.tp <= 1024, "tensor-parallel size must be in 1..1024 (got {})",
                 s.tp);
  CEILING_ENSURE(s.group_size >= 1 && s.group_size <= 65536,
                 "group size must be in 1..65536 (got {})", s.group_size);
  CEILING_ENSURE(s.kv_dtype == DType::kBF16 || s.kv_dtype == DType::kF8E4M3,
                 "KV-cache dtype must be bf16 or fp8 (got {})", dtype_name(s.kv_dtype));
  CEILING_ENSURE(m.hidden_size > 0 && m.num_heads > 0 && m.num_kv_heads > 0 && m.head_dim > 0 &&
                     m.num_layers > 0 && m.intermediate_size > 0 && m.vocab_size > 0,
                 "model '{}': every dimension must be positive", m.name);
  CEILING_ENSURE(m.num_heads % s.tp == 0,
                 "tensor-parallel size {} does not divide num_attention_heads {} of '{}'", s.tp,
                 m.num_heads, m.name);
  CEILING_ENSURE(m.num_kv_heads % s.tp == 0,
                 "tensor-parallel size {} does not divide num_key_value_heads {} of '{}' (KV-head "
                 "replication is not modelled)",
                 s.tp, m.num_kv_heads, m.name);
  CEILING_ENSURE(m.intermediate_size % s.tp == 0,
                 "tensor-parallel size {} does not divide intermediate_size {} of '{}'", s.tp,
                 m.intermediate_size, m.name);
  const int64_t positions = s.context + (s.phase == Phase::kDecode ? 1 : 0);
  CEILING_ENSURE(positions <= m.max_position_embeddings,
                 "context {} ({} positions) exceeds max_position_embeddings {} of '{}'", s.context,
                 positions, m.max_position_embeddings, m.name);
}

namespace {

constexpr double kAct = 2;  // bytes per activation element (bf16)

struct Dims {
  double T, Tout;              // tokens in the step; tokens that need logits
  double B, S;                 // sequences; context
  double H, I, D, V, hq, hkv;  // per GPU where split
  double kvb;                  // KV bytes per element
};

// Bytes of a K x N weight matrix (K = input features) with its quantization scales.
double weight_bytes(const Scenario& s, double K, double N) {
  switch (s.weights) {
    case WeightDtype::kBF16:
      return 2 * K * N;
    case WeightDtype::kFP8:
    case WeightDtype::kINT8:
      return K * N + 4 * N;  // + fp32 scale per output column
    case WeightDtype::kINT4:
      return 0.5 * K * N + 2 * std::ceil(K / s.group_size) * N;  // + bf16 scale per group
  }
  return 0;
}

DType gemm_math(const Scenario& s) {
  if (s.w8a8 && s.weights == WeightDtype::kFP8) return DType::kF8E4M3;
  if (s.w8a8 && s.weights == WeightDtype::kINT8) return DType::kI8;
  return DType::kBF16;
}

struct Builder {
  const GpuCeilings& gpu;
  const Scenario& s;
  std::vector<OpCost> ops;

  OpCost& add(std::string name, std::string note, int64_t count, bool per_layer, DType math,
              double flops, double wbytes, double abytes, double kvbytes, double l2_reuse,
              int64_t tiles) {
    OpCost op;
    op.name = std::move(name);
    op.note = std::move(note);
    op.count = count;
    op.per_layer = per_layer;
    op.math = math;
    op.weight_bytes = wbytes;
    op.activation_bytes = abytes;
    op.kv_bytes = kvbytes;
    op.cost.flops = flops;
    op.cost.bytes = wbytes + abytes + kvbytes;
    op.cost.l2_reuse_bytes = l2_reuse;
    op.cost.tiles = tiles;
    op.cost.launches = 1;
    // Every op of the step loads, then stores what it computed from the loads (two dependent
    // phases); the embedding first reads the token ids (three).
    op.cost.round_trips = op.name == "embedding" ? 3 : 2;
    ops.push_back(std::move(op));
    return ops.back();
  }

  // CTAs of an M x N GEMM: output tiles, and when there are fewer tiles than SMs, split along K
  // into floor(SMs / tiles) slices (split-K, as cuBLAS does for skinny GEMMs; the partial-sum
  // reduction is not costed).
  int64_t gemm_ctas(double M, double N) const {
    const int64_t tiles = gemm_tiles(gpu, static_cast<int64_t>(M), static_cast<int64_t>(N));
    return tiles < gpu.sm_count ? tiles * (gpu.sm_count / tiles) : tiles;
  }

  // Y[M,N] = X[M,K] W[K,N] (+ bias). X is the previous op's output (an L2 reuse candidate).
  void gemm(std::string name, std::string note, int64_t count, bool per_layer, double M, double K,
            double N, double wbytes, DType math, double bias_bytes = 0) {
    add(std::move(name), std::move(note), count, per_layer, math, 2 * M * K * N,
        wbytes + bias_bytes, kAct * (M * K + M * N), 0, kAct * M * K, gemm_ctas(M, N))
        .cost.write_bytes = kAct * M * N;
  }

  // RMSNorm over [T, H]: reads the residual stream, writes the normalized rows.
  void norm(std::string name, std::string note, int64_t count, bool per_layer, double T, double H) {
    add(std::move(name), std::move(note), count, per_layer, DType::kF32, 4 * T * H, 2 * H,
        kAct * 2 * T * H, 0, kAct * T * H, 0)
        .cost.write_bytes = kAct * T * H;
  }

  // Ring all-reduce of [T, H] bf16 across tp GPUs: each GPU sends 2(tp-1)/tp of it each way.
  void allreduce(std::string name, int64_t count, bool per_layer, double elems) {
    const double tp = s.tp;
    OpCost& op = add(std::move(name), "ring all-reduce over NVLink", count, per_layer, DType::kF32,
                     elems * (tp - 1) / tp, 0, kAct * 2 * elems, 0, kAct * elems, 0);
    op.cost.write_bytes = kAct * elems;
    op.cost.nvlink_bytes = 2 * (tp - 1) / tp * kAct * elems;
    op.cost.collective = true;
  }
};

Dims dims(const ModelConfig& m, const Scenario& s) {
  Dims d;
  d.B = static_cast<double>(s.batch);
  d.S = static_cast<double>(s.context);
  d.T = s.phase == Phase::kPrefill ? d.B * d.S : d.B;
  d.Tout = d.B;
  d.H = m.hidden_size;
  d.I = static_cast<double>(m.intermediate_size) / s.tp;
  d.D = m.head_dim;
  d.V = std::ceil(static_cast<double>(m.vocab_size) / s.tp);
  d.hq = static_cast<double>(m.num_heads) / s.tp;
  d.hkv = static_cast<double>(m.num_kv_heads) / s.tp;
  d.kvb = dtype_bits(s.kv_dtype) / 8.0;
  return d;
}

}  // namespace

std::vector<OpCost> model_ops(const ModelConfig& m, const GpuCeilings& gpu, const Scenario& s) {
  validate(m, s);
  const Dims d = dims(m, s);
  const int64_t L = m.num_layers;
  const DType math = gemm_math(s);
  const bool tp = s.tp > 1;
  Builder b{gpu, s, {}};

  // Embedding gather (bf16 table): read T rows, write [T, H]; token ids are int32.
  b.add("embedding", tp ? "vocab-parallel gather (bf16 table)" : "gather (bf16 table)", 1, false,
        DType::kF32, 0, kAct * d.T * d.H, kAct * d.T * d.H + 4 * d.T, 0, 0, 0)
      .cost.write_bytes = kAct * d.T * d.H;
  if (tp) b.allreduce("embedding_allreduce", 1, false, d.T * d.H);

  // --- one decoder layer, x L ---
  // Decode at batch 1: the norms run inside the GEMVs (prologue), SiLU-and-multiply as the
  // gate/up GEMV's epilogue (it writes [T, I], not [T, 2I]). Otherwise norms and SiLU are kernels
  // of their own. The residual add is always the epilogue of o_proj / down_proj (out = residual
  // + x·W); under tensor parallelism rank 0 adds it there, the others store their partial sums,
  // and the all-reduce of the residual that follows completes it (the same fused steps).
  const bool fused = s.phase == Phase::kDecode && s.batch == 1;
  const double gamma = kAct * d.H;  // a norm's weight, read by the fused GEMV
  if (!fused) b.norm("attn_norm", "RMSNorm of the residual stream", L, true, d.T, d.H);
  const double nqkv = (d.hq + 2 * d.hkv) * d.D;
  b.gemm(
      "qkv_proj",
      std::string(m.attention_bias ? "fused Q,K,V projection + bias" : "fused Q,K,V projection") +
          (fused ? ", RMSNorm in its prologue" : ""),
      L, true, d.T, d.H, nqkv, weight_bytes(s, d.H, nqkv) + (fused ? gamma : 0), math,
      m.attention_bias ? kAct * nqkv : 0);
  {
    // RoPE on q and k (2 mul + 1 add per element; cos/sin table fp32, 4*D bytes per token),
    // q written back, k and v written into the paged KV cache in the cache dtype. Fused at decode
    // batch 1 (no q/k norm): the QKV GEMV's epilogue rotates its own outputs, so the q/k/v
    // activations are not read back and k, v are not written as activations.
    const double rot = (d.hq + d.hkv) * d.D;
    const double flops = d.T * rot * (3 + (m.qk_norm ? 4 : 0));
    const double kv = d.T * 2 * d.hkv * d.D * d.kvb;
    if (fused && !m.qk_norm) {
      OpCost& qkv = b.ops.back();
      qkv.note += ", RoPE and the KV-cache write in its epilogue";
      const double unwritten = kAct * d.T * 2 * d.hkv * d.D;  // k, v go to the cache instead
      qkv.activation_bytes -= unwritten;
      qkv.kv_bytes += kv;
      qkv.weight_bytes += 4.0 * d.D / 2;  // inv_freq
      qkv.cost.bytes += kv - unwritten + 4.0 * d.D / 2;
      qkv.cost.write_bytes += kv - unwritten;
      qkv.cost.flops += flops;
    } else {
      const double act = kAct * d.T * nqkv + kAct * d.T * d.hq * d.D + 4 * d.T * d.D;
      const double norm_weights = m.qk_norm ? kAct * 2 * d.D : 0;  // q_norm and k_norm, [D] each
      b.add(m.qk_norm ? "qk_norm_rope_kv_write" : "rope_kv_write",
            std::string(m.qk_norm ? "per-head q/k RMSNorm, " : "") +
                "RoPE on q,k; k,v written to the paged cache",
            L, true, DType::kF32, flops, norm_weights, act, kv, kAct * d.T * nqkv, 0)
          .cost.write_bytes = kAct * d.T * d.hq * d.D + kv;  // q back, k and v into the cache
    }
  }
  if (s.phase == Phase::kPrefill) {
    // Causal: query i attends to keys 0..i, S(S+1)/2 pairs per head; QK^T and PV 2*D each.
    const double flops = d.B * d.hq * 2 * d.D * d.S * (d.S + 1);
    const double act = kAct * 2 * d.T * d.hq * d.D;   // read q, write o
    const double kv = d.T * 2 * d.hkv * d.D * d.kvb;  // K and V read once each
    const auto tiles = static_cast<int64_t>(d.B * d.hq * std::ceil(d.S / 128));
    b.add("attention", "causal flash attention (prefill), 128-row query tiles", L, true,
          DType::kBF16, flops, 0, act, kv, kAct * d.T * d.hq * d.D, tiles)
        .cost.write_bytes = kAct * d.T * d.hq * d.D;
  } else {
    const double keys = d.S + 1;  // the cached context and the new token
    const double flops = d.B * d.hq * 4 * d.D * keys;
    const double act = kAct * 2 * d.B * d.hq * d.D;
    const double kv = d.B * keys * 2 * d.hkv * d.D * d.kvb;
    b.add("attention", "paged decode attention (split-KV, enough CTAs to fill the GPU)", L, true,
          DType::kBF16, flops, 0, act, kv, kAct * d.B * d.hq * d.D, 0)
        .cost.write_bytes = kAct * d.B * d.hq * d.D;
  }
  const double residual = kAct * d.T * d.H;  // the residual read by an accumulating epilogue
  b.gemm("o_proj", "attention output projection, residual add in its epilogue", L, true, d.T,
         d.hq * d.D, d.H, weight_bytes(s, d.hq * d.D, d.H), math);
  b.ops.back().activation_bytes += residual;
  b.ops.back().cost.bytes += residual;
  if (tp) b.allreduce("attn_allreduce", L, true, d.T * d.H);
  if (!fused) b.norm("mlp_norm", "RMSNorm of the residual stream", L, true, d.T, d.H);
  b.gemm("gate_up_proj",
         std::string("fused gate and up projections") +
             (fused ? ", RMSNorm in its prologue, SiLU(gate) * up in its epilogue" : ""),
         L, true, d.T, d.H, 2 * d.I, weight_bytes(s, d.H, 2 * d.I) + (fused ? gamma : 0), math);
  if (fused) {
    OpCost& gu = b.ops.back();
    gu.activation_bytes -= kAct * d.T * d.I;  // writes silu(gate) * up [T, I]
    gu.cost.bytes -= kAct * d.T * d.I;
    gu.cost.write_bytes -= kAct * d.T * d.I;
    gu.cost.flops += 5 * d.T * d.I;
  } else {
    b.add("silu_mul", "SiLU(gate) * up", L, true, DType::kF32, 5 * d.T * d.I, 0,
          kAct * 3 * d.T * d.I, 0, kAct * 2 * d.T * d.I, 0)
        .cost.write_bytes = kAct * d.T * d.I;
  }
  b.gemm("down_proj", "MLP down projection, residual add in its epilogue", L, true, d.T, d.I, d.H,
         weight_bytes(s, d.I, d.H), math);
  b.ops.back().activation_bytes += residual;
  b.ops.back().cost.bytes += residual;
  if (tp) b.allreduce("mlp_allreduce", L, true, d.T * d.H);

  // --- head ---
  b.norm("final_norm", "RMSNorm of the residual stream", 1, false, d.T, d.H);
  {
    // Logits only for the last position of each sequence; bf16 weights, fp32 logits.
    const double flops = 2 * d.Tout * d.H * d.V;
    b.add("lm_head", m.tie_word_embeddings ? "bf16, tied to the embedding" : "bf16 (not quantized)",
          1, false, DType::kBF16, flops, kAct * d.H * d.V, kAct * d.Tout * d.H + 4 * d.Tout * d.V,
          0, kAct * d.Tout * d.H, b.gemm_ctas(d.Tout, d.V))
        .cost.write_bytes = 4 * d.Tout * d.V;
  }
  if (tp) {
    const double full_v = m.vocab_size;
    OpCost& op = b.add("logits_allgather", "ring all-gather of fp32 logits over NVLink", 1, false,
                       DType::kF32, 0, 0, 4 * d.Tout * (d.V + full_v), 0, 0, 0);
    op.cost.write_bytes = 4 * d.Tout * full_v;
    op.cost.nvlink_bytes = (s.tp - 1.0) / s.tp * 4 * d.Tout * full_v;
    op.cost.collective = true;
  }
  {
    const double full_v = m.vocab_size;
    b.add("sampling", "one fused pass over fp32 logits (temperature, softmax, top-k/top-p)", 1,
          false, DType::kF32, 5 * d.Tout * full_v, 0, 4 * d.Tout * full_v + 4 * d.Tout, 0,
          4 * d.Tout * full_v, 0)
        .cost.write_bytes = 4 * d.Tout;
  }
  for (auto& op : b.ops) op.pred = predict(gpu, op.cost, op.math, s.cuda_graphs);
  return b.ops;
}

MemoryReport memory_report(const ModelConfig& m, const GpuCeilings& gpu, const Scenario& s) {
  validate(m, s);
  const Dims d = dims(m, s);
  const double nqkv = (d.hq + 2 * d.hkv) * d.D;
  double layer = weight_bytes(s, d.H, nqkv) + weight_bytes(s, d.hq * d.D, d.H) +
                 weight_bytes(s, d.H, 2 * d.I) + weight_bytes(s, d.I, d.H) + kAct * 2 * d.H;
  if (m.attention_bias) layer += kAct * nqkv;
  if (m.qk_norm) layer += kAct * 2 * d.D;
  const double embed = kAct * d.V * d.H;
  MemoryReport r;
  r.weights_bytes = embed + m.num_layers * layer + kAct * d.H + (m.tie_word_embeddings ? 0 : embed);
  r.kv_bytes_per_token = 2.0 * m.num_layers * d.hkv * d.D * d.kvb;
  const ModelAssumptions& a = model_assumptions();
  r.usable_bytes = gpu.memory_bytes * (1 - a.memory_reserve_fraction);
  const double tokens = static_cast<double>(s.context + (s.phase == Phase::kDecode ? 1 : 0));
  const double blocks = std::ceil(tokens / a.kv_block_size);
  const double per_seq = blocks * a.kv_block_size * r.kv_bytes_per_token;
  const double free_bytes = r.usable_bytes - r.weights_bytes;
  r.max_sequences = free_bytes > 0 ? static_cast<int64_t>(std::floor(free_bytes / per_seq)) : 0;
  return r;
}

}  // namespace ceiling::roofline
