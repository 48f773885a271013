#include "dist/shard.h"

#include <fmt/format.h>

#include <cstring>

#include "core/status.h"
#include "engine/ops.h"

namespace ceiling::dist {

namespace {

int vocab_rows(const ModelConfig& c, int world) {
  return (c.vocab_size + world - 1) / world;
}
// The slice, the lookup-miss row, then zero rows up to a multiple of 16 (aligned logits rows).
int padded_rows(int vs) {
  return (vs + 1 + 15) / 16 * 16;
}

// KV heads of the rank, and its first KV head.
int kv_heads(const ModelConfig& c, int world) {
  return std::max(c.num_kv_heads / world, 1);
}
int kv_head0(const ModelConfig& c, int rank, int world) {
  return c.num_kv_heads >= world ? rank * (c.num_kv_heads / world)
                                 : rank / (world / c.num_kv_heads);
}

size_t elem_bytes(const TensorView& t) {
  return dtype_bytes(t.dtype, 1);
}

// Rows [r0, r0 + n) of a row-major [N, K] view (or of a 1-D [N] bias): a view, no copy.
TensorView row_slice(const TensorView& t, int64_t r0, int64_t n) {
  if (t.data == nullptr) return t;
  const int64_t K = t.ndim == 2 ? t.dim(1) : 1;
  TensorView v = t;
  v.data = static_cast<char*>(t.data) + static_cast<size_t>(r0 * K) * elem_bytes(t);
  v.shape[0] = n;
  return v;
}

uint8_t* own(RankShard& s, size_t bytes) {
  s.owned.emplace_back(new uint8_t[std::max<size_t>(bytes, 1)]());  // zeroed
  return s.owned.back().get();
}

// Columns [c0, c0 + n) of a row-major [N, K] view, copied: [N, n] (an empty view stays empty:
// the dense view of a quantized projection).
TensorView col_slice(RankShard& s, const TensorView& t, int64_t c0, int64_t n) {
  if (t.data == nullptr) return t;
  const int64_t N = t.dim(0), K = t.dim(1);
  const size_t e = elem_bytes(t);
  uint8_t* dst = own(s, static_cast<size_t>(N * n) * e);
  const uint8_t* src = static_cast<const uint8_t*>(t.data);
  for (int64_t r = 0; r < N; ++r)
    std::memcpy(dst + static_cast<size_t>(r * n) * e, src + static_cast<size_t>(r * K + c0) * e,
                static_cast<size_t>(n) * e);
  return TensorView(dst, t.dtype, {N, n});
}

// The rank's vocabulary rows of a [V, H] table, then zero rows: [Vp, H], copied.
TensorView slice_vocab_table(RankShard& s, const TensorView& t) {
  const int64_t H = t.dim(1);
  const size_t row = static_cast<size_t>(H) * elem_bytes(t);
  uint8_t* dst = own(s, static_cast<size_t>(s.vocab.rows) * row);
  std::memcpy(dst, static_cast<const uint8_t*>(t.data) + static_cast<size_t>(s.vocab.begin) * row,
              static_cast<size_t>(s.vocab.valid) * row);
  return TensorView(dst, t.dtype, {int64_t{s.vocab.rows}, H});
}

// Rows [r0, r0 + n) of a quantized projection (column-parallel): its values and their per-row
// scales and zero points, as views.
QuantLinear quant_rows(const QuantLinear& q, int64_t r0, int64_t n) {
  if (!q.quantized()) return q;
  QuantLinear o = q;
  o.qweight = row_slice(q.qweight, r0, n);
  o.scale = row_slice(q.scale, r0, n);
  o.zero = row_slice(q.zero, r0, n);
  return o;
}

// Input columns [c0, c0 + n) of a quantized projection (row-parallel), copied. fp8 keeps its
// per-row scales; int4 takes its groups of those columns, which must not straddle two ranks.
QuantLinear quant_cols(RankShard& s, const QuantLinear& q, int64_t c0, int64_t n, int layer,
                       const char* what) {
  if (!q.quantized()) return q;
  QuantLinear o = q;
  o.qweight = col_slice(s, q.qweight, c0, n);
  if (q.format == WeightFormat::kInt4) {
    const int64_t G = q.group_size;
    CEILING_ENSURE(
        G > 0 && n % G == 0 && c0 % G == 0,
        "tensor parallel: layers.{}.{} has int4 groups of {} inputs, which do not divide "
        "the {} inputs of each rank (--tensor-parallel-size {})",
        layer, what, G, n, s.world);
    o.scale = col_slice(s, q.scale, c0 / G, n / G);
    o.zero = col_slice(s, q.zero, c0 / G, n / G);
  }
  return o;
}

}  // namespace

void check_shardable(const ModelConfig& c, int world) {
  CEILING_ENSURE(world >= 1, "--tensor-parallel-size must be >= 1 (got {})", world);
  CEILING_ENSURE(c.num_heads % world == 0,
                 "--tensor-parallel-size {} does not divide num_attention_heads {} of {}", world,
                 c.num_heads, c.name);
  CEILING_ENSURE(c.num_kv_heads % world == 0 || world % c.num_kv_heads == 0,
                 "--tensor-parallel-size {} and num_key_value_heads {} of {} must divide one "
                 "another (KV heads are split, or replicated when fewer than ranks)",
                 world, c.num_kv_heads, c.name);
  CEILING_ENSURE(c.intermediate_size % world == 0,
                 "--tensor-parallel-size {} does not divide intermediate_size {} of {}", world,
                 c.intermediate_size, c.name);
  CEILING_ENSURE(world <= c.vocab_size, "--tensor-parallel-size {} exceeds vocab_size {} of {}",
                 world, c.vocab_size, c.name);
}

ModelConfig shard_config(const ModelConfig& c, int rank, int world) {
  check_shardable(c, world);
  CEILING_ENSURE(rank >= 0 && rank < world, "tensor parallel: rank {} of {} ranks", rank, world);
  ModelConfig s = c;
  s.name = world == 1 ? c.name : fmt::format("{} (rank {} of {})", c.name, rank, world);
  s.num_heads = c.num_heads / world;
  s.num_kv_heads = kv_heads(c, world);
  s.intermediate_size = c.intermediate_size / world;
  s.vocab_size = padded_rows(vocab_rows(c, world));
  return s;
}

VocabSlice vocab_slice(const ModelConfig& c, int rank, int world) {
  const int Vs = vocab_rows(c, world);
  return {rank * Vs, Vs, std::max(0, std::min(Vs, c.vocab_size - rank * Vs)), padded_rows(Vs)};
}

RankShard shard_weights(const ModelConfig& c, const ModelWeights& w, int rank, int world) {
  RankShard s;
  s.rank = rank;
  s.world = world;
  s.config = shard_config(c, rank, world);
  s.vocab = vocab_slice(c, rank, world);
  const int64_t D = c.head_dim, Hq = s.config.num_heads, Hkv = s.config.num_kv_heads;
  const int64_t q0 = rank * Hq * D, kv0 = kv_head0(c, rank, world) * D;
  const int64_t I = s.config.intermediate_size, i0 = rank * I;
  ModelWeights& o = s.weights;
  o.final_norm = w.final_norm;
  o.embed = slice_vocab_table(s, w.embed);
  o.lm_head = w.lm_head.data == w.embed.data ? o.embed : slice_vocab_table(s, w.lm_head);
  for (const LayerWeights& lw : w.layers) {
    const int li = static_cast<int>(o.layers.size());
    LayerWeights l = lw;
    l.q_proj = row_slice(lw.q_proj, q0, Hq * D);
    l.k_proj = row_slice(lw.k_proj, kv0, Hkv * D);
    l.v_proj = row_slice(lw.v_proj, kv0, Hkv * D);
    l.q_bias = row_slice(lw.q_bias, q0, Hq * D);
    l.k_bias = row_slice(lw.k_bias, kv0, Hkv * D);
    l.v_bias = row_slice(lw.v_bias, kv0, Hkv * D);
    l.o_proj = col_slice(s, lw.o_proj, q0, Hq * D);
    l.gate_proj = row_slice(lw.gate_proj, i0, I);
    l.up_proj = row_slice(lw.up_proj, i0, I);
    l.down_proj = col_slice(s, lw.down_proj, i0, I);
    // Quantized projections (fp8, int4) split the same way.
    l.quant[kQProj] = quant_rows(lw.quant[kQProj], q0, Hq * D);
    l.quant[kKProj] = quant_rows(lw.quant[kKProj], kv0, Hkv * D);
    l.quant[kVProj] = quant_rows(lw.quant[kVProj], kv0, Hkv * D);
    l.quant[kOProj] = quant_cols(s, lw.quant[kOProj], q0, Hq * D, li, "self_attn.o_proj");
    l.quant[kGateProj] = quant_rows(lw.quant[kGateProj], i0, I);
    l.quant[kUpProj] = quant_rows(lw.quant[kUpProj], i0, I);
    l.quant[kDownProj] = quant_cols(s, lw.quant[kDownProj], i0, I, li, "mlp.down_proj");
    o.layers.push_back(l);
  }
  return s;
}

}  // namespace ceiling::dist
