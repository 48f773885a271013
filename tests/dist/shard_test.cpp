// Megatron sharding rules: which TP sizes a model accepts (errors name the field), the shard's
// shapes, and that the slices are the right rows and columns of the checkpoint.
#include "dist/shard.h"

#include <gtest/gtest.h>

#include "core/status.h"
#include "test_models.h"

namespace ceiling::dist {
namespace {

using engine::testing::make_random_model;
using engine::testing::small_config;

std::string error_of(const ModelConfig& c, int world) {
  try {
    check_shardable(c, world);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Shard, BadTensorParallelSizesNameTheField) {
  ModelConfig c = small_config();  // 6 heads, 2 KV heads, intermediate 80
  EXPECT_EQ(error_of(c, 1), "");
  EXPECT_EQ(error_of(c, 2), "");
  EXPECT_NE(error_of(c, 4).find("num_attention_heads 6"), std::string::npos) << error_of(c, 4);
  EXPECT_NE(error_of(c, 0).find("must be >= 1"), std::string::npos);
  c.num_kv_heads = 3;
  EXPECT_NE(error_of(c, 2).find("num_key_value_heads 3"), std::string::npos) << error_of(c, 2);
  c.num_kv_heads = 6;
  EXPECT_NE(error_of(c, 3).find("intermediate_size 80"), std::string::npos) << error_of(c, 3);
  c.num_heads = 8;
  c.num_kv_heads = 2;
  EXPECT_EQ(error_of(c, 4), "");  // KV heads replicated: 2 ranks per KV head
  c.intermediate_size = 84;
  EXPECT_NE(error_of(c, 8).find("intermediate_size 84"), std::string::npos) << error_of(c, 8);
}

TEST(Shard, ShapesAndSlices) {
  ModelConfig c = small_config(Arch::kQwen2);  // biases; vocab 101 is not a multiple of 2
  const auto m = make_random_model(c, DType::kF32, 3);
  const int H = c.hidden_size, D = c.head_dim;
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(rank);
    const RankShard s = shard_weights(c, m->weights, rank, 2);
    EXPECT_EQ(s.config.num_heads, 3);
    EXPECT_EQ(s.config.num_kv_heads, 1);
    EXPECT_EQ(s.config.intermediate_size, 40);
    EXPECT_EQ(s.config.vocab_size, 64);  // 51 + the lookup-miss row, rounded up to 16
    EXPECT_EQ(s.vocab.begin, rank * 51);
    EXPECT_EQ(s.vocab.valid, rank == 0 ? 51 : 50);
    const LayerWeights& full = m->weights.layers[1];
    const LayerWeights& l = s.weights.layers[1];
    // q rows of heads [3·rank, 3·rank + 3): a view into the checkpoint.
    EXPECT_EQ(l.q_proj.as<float>(), full.q_proj.as<float>() + int64_t{rank} * 3 * D * H);
    EXPECT_EQ(l.k_bias.as<float>(), full.k_bias.as<float>() + int64_t{rank} * D);
    // o_proj columns of the rank's heads, copied.
    for (int n = 0; n < H; ++n)
      for (int k = 0; k < 3 * D; ++k)
        ASSERT_EQ(l.o_proj.as<float>()[n * 3 * D + k],
                  full.o_proj.as<float>()[n * 6 * D + rank * 3 * D + k]);
    for (int n = 0; n < H; ++n)
      for (int k = 0; k < 40; ++k)
        ASSERT_EQ(l.down_proj.as<float>()[n * 40 + k],
                  full.down_proj.as<float>()[n * 80 + rank * 40 + k]);
    // Vocabulary rows, then zero rows (past V on the last rank, and the lookup-miss row).
    for (int v = 0; v < 64; ++v)
      for (int h = 0; h < H; ++h) {
        const float want =
            v < s.vocab.valid ? m->weights.embed.as<float>()[(s.vocab.begin + v) * H + h] : 0.0f;
        ASSERT_EQ(s.weights.embed.as<float>()[v * H + h], want) << v;
      }
    EXPECT_EQ(s.vocab.local_token(rank * 51 + 5), 5);
    EXPECT_EQ(s.vocab.local_token(rank == 0 ? 60 : 3), 51);  // another rank's id: the zero row
  }
}

TEST(Shard, KvHeadsReplicatedWhenFewerThanRanks) {
  ModelConfig c = small_config();
  c.num_heads = 8;
  c.num_kv_heads = 2;
  const auto m = make_random_model(c, DType::kF32, 4);
  const int64_t D = c.head_dim, H = c.hidden_size;
  for (int rank = 0; rank < 4; ++rank) {
    const RankShard s = shard_weights(c, m->weights, rank, 4);
    EXPECT_EQ(s.config.num_heads, 2);
    EXPECT_EQ(s.config.num_kv_heads, 1);
    // Query heads 2r, 2r + 1 belong to KV head (2r) / 4 = r / 2.
    EXPECT_EQ(s.weights.layers[0].k_proj.as<float>(),
              m->weights.layers[0].k_proj.as<float>() + (rank / 2) * D * H);
  }
}

}  // namespace
}  // namespace ceiling::dist
