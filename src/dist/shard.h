// Megatron-style tensor-parallel sharding of an ordinary Hugging Face checkpoint, done at load
// time on the host: rank r of N gets
//   q/k/v_proj [Hq/N·D | Hkv/N·D, H]  column-parallel: a row slice (a view, no copy); KV heads
//                                     replicated (head r / (N / Hkv)) when Hkv < N
//   o_proj [H, Hq/N·D]                row-parallel: a column slice (copied); partial sums
//   gate/up_proj [I/N, H]             column-parallel (views)
//   down_proj [H, I/N]                row-parallel (copied); partial sums
//   embed, lm_head [Vp, H]            vocab-parallel: rows [r·Vs, (r+1)·Vs) with Vs = ceil(V/N)
//                                     (zero rows past V), then zero rows up to Vp = Vs + 1 rounded
//                                     up to 16 (aligned logits rows); tokens outside the slice
//                                     look up zero row Vs (local_token), so the all-reduced
//                                     embedding is exact; logits columns from Vs on are dropped
//   norms, biases (sliced with their rows), q/k norms: as the weights they belong to
//   quantized projections (fp8, int4): split as their dense form, with their per-row scales
//                                     (row slices) or their int4 groups (column slices: a
//                                     group may not straddle two ranks, else a one-line error)
// The rank's ModelConfig has num_heads Hq/N, num_kv_heads max(Hkv/N, 1), intermediate I/N and
// vocab_size Vp, so an unmodified Ops (CpuOps, CudaOps) runs the shard.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/config.h"
#include "model/weights.h"

namespace ceiling::dist {

// Throws ceiling::Error naming the field when N ranks cannot shard `c` (N must divide
// num_attention_heads and intermediate_size; N and num_key_value_heads must divide one another).
void check_shardable(const ModelConfig& c, int world);

struct VocabSlice {
  int begin = 0;  // first vocabulary id of the rank
  int size = 0;   // Vs = ceil(V / N): rows of the slice (the last rank's may pass V)
  int valid = 0;  // ids of the slice that exist: min(Vs, V - begin)
  int rows = 0;   // Vp: rows of the rank's tables (the slice, then zero rows)
  // The rank's row of token `id`: id - begin inside the slice, else the zero row Vs.
  int32_t local_token(int32_t id) const {
    return id >= begin && id < begin + size ? id - begin : size;
  }
};

struct RankShard {
  int rank = 0, world = 1;
  ModelConfig config;    // the rank's shapes (see above)
  ModelWeights weights;  // host views: into the checkpoint, or into `owned`
  VocabSlice vocab;
  std::vector<std::unique_ptr<uint8_t[]>> owned;  // copies (row-parallel slices, vocab slices)
};

ModelConfig shard_config(const ModelConfig& c, int rank, int world);
// Rank `rank`'s vocabulary slice (what shard_weights puts in RankShard::vocab).
VocabSlice vocab_slice(const ModelConfig& c, int rank, int world);
// Host weights `w` (views in f32/bf16/f16, e.g. load_model's mmap) -> rank's shard. `w` must
// outlive the shard.
RankShard shard_weights(const ModelConfig& c, const ModelWeights& w, int rank, int world);

}  // namespace ceiling::dist
