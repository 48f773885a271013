// Issue 18: hostile config.json, safetensors headers, index files and model-directory symlinks.
// Each case failed (crash, wrong acceptance, quadratic time or unbounded memory) before the fix.
#include <gtest/gtest.h>

#include <cstring>

#include "../core/measure.h"
#include "model/config.h"
#include "model/loader.h"
#include "model/safetensors.h"
#include "model_test_util.h"

namespace ceiling {
namespace {

using test::TempDir;
namespace fs = std::filesystem;
using Bytes = std::vector<std::byte>;

std::string config_error(const std::string& json) {
  try {
    parse_model_config(json, "config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string llama(const std::string& fields) {
  return R"({"model_type": "llama", "vocab_size": 64, "hidden_size": 64, "intermediate_size": 64,
             "num_hidden_layers": 1, )" +
         fields + "}";
}

// Finding 1: 67108865 × 64 wraps a 32-bit q_dim to 64; [64, 64] tensors then passed the shape
// check and the forward read out of bounds.
TEST(ConfigHardening, DerivedSizesAreCheckedIn64Bits) {
  const std::string e = config_error(
      llama(R"("num_attention_heads": 67108865, "num_key_value_heads": 1, "head_dim": 64)"));
  EXPECT_NE(e.find("q_dim"), std::string::npos) << e;
  EXPECT_EQ(e.rfind("config.json: ", 0), 0u) << e;
  EXPECT_NE(config_error(llama(R"("num_attention_heads": 1, "num_key_value_heads": 1,
                                  "head_dim": 2, "vocab_size": 1073741824,
                                  "hidden_size": 1073741824)"))
                .find("over the limit"),
            std::string::npos);
  const std::string kv = config_error(
      R"({"model_type": "llama", "vocab_size": 64, "hidden_size": 64, "intermediate_size": 64,
          "num_hidden_layers": 4096, "num_attention_heads": 1, "head_dim": 1048576})");
  EXPECT_NE(kv.find("KV elements per token"), std::string::npos) << kv;
  // q_dim and kv_dim each at 2^30 (the fuzzer's find: 2 · kv_dim overflowed an int in
  // num_params): the fused QKV width is bounded as well.
  const std::string qkv = config_error(
      llama(R"("num_attention_heads": 16777216, "num_key_value_heads": 16777216, "head_dim": 64)"));
  EXPECT_NE(qkv.find("fused QKV width"), std::string::npos) << qkv;
  // Real shapes still pass.
  EXPECT_EQ(config_error(llama(R"("num_attention_heads": 8, "num_key_value_heads": 2)")),
            "(no error)");
}

// Finding 10: errors name the file, the field and the rule (not bad_alloc or a JSON type error).
TEST(ConfigHardening, ErrorsNameFileFieldAndRule) {
  std::string e = config_error(
      R"({"model_type": "llama", "vocab_size": 64, "hidden_size": 64, "intermediate_size": 64,
          "num_hidden_layers": 1073741824, "num_attention_heads": 8})");
  EXPECT_NE(e.find("config.json: field 'num_hidden_layers' must be in [1, 4096]"),
            std::string::npos)
      << e;
  e = config_error(R"({"model_type": 5})");
  EXPECT_NE(e.find("config.json: field 'model_type' must be a string"), std::string::npos) << e;
  e = config_error(llama(R"("num_attention_heads": 8, "rope_scaling": {"rope_type": 3})"));
  EXPECT_NE(e.find("field 'rope_type' must be a string"), std::string::npos) << e;
  e = config_error(llama(R"("num_attention_heads": 8, "bos_token_id": 4294967297)"));
  EXPECT_NE(e.find("field 'bos_token_id' holds a token id outside"), std::string::npos) << e;
  e = config_error(llama(R"("num_attention_heads": 8, "rope_scaling": {"rope_type": "llama3",
                            "original_max_position_embeddings": 1e300})"));
  EXPECT_NE(e.find("original_max_position_embeddings"), std::string::npos) << e;
}

// Finding 7: NUL ended the JSON; what followed it was ignored.
TEST(ConfigHardening, NulAndTrailingBytesAreRefused) {
  const std::string good = llama(R"("num_attention_heads": 8)");
  EXPECT_NE(config_error(good + std::string(1, '\0') + "garbage").find("NUL byte"),
            std::string::npos);
  EXPECT_NE(config_error(good + " }").find("syntax error"), std::string::npos);
}

Bytes st_file(std::string header) {
  header.append((8 - header.size() % 8) % 8, ' ');
  Bytes out(8 + header.size());
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<std::byte>(n >> (8 * i));
  std::memcpy(out.data() + 8, header.data(), header.size());
  return out;
}

std::string st_error(const Bytes& file) {
  try {
    parse_safetensors(file, "x.safetensors");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(SafetensorsHardening, NulAfterTheHeaderObjectIsRefused) {
  std::string h = "{}";
  h += '\0';
  h += "garbage";
  EXPECT_NE(st_error(st_file(h)).find("NUL byte at byte 2"), std::string::npos)
      << st_error(st_file(h));
}

TEST(SafetensorsHardening, DeepNestingIsRefusedAtOnce) {
  const Bytes file = st_file("{\"a\":" + std::string(4 << 20, '['));
  const test::Cost c = test::measure([&] { parse_safetensors(file, "x.safetensors"); });
  ASSERT_FALSE(c.crashed);
  EXPECT_TRUE(c.threw);
  EXPECT_NE(c.error.find("nested deeper than"), std::string::npos) << c.error;
  EXPECT_LT(c.peak_mib, 4.0);
}

// {"t0": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]}, ...}: many empty tensors.
Bytes many_entries(size_t bytes) {
  std::string h = "{";
  for (size_t i = 0; h.size() < bytes; ++i)
    h += (i ? ",\"t" : "\"t") + std::to_string(i) +
         R"(":{"dtype":"U8","shape":[0],"data_offsets":[0,0]})";
  return st_file(h + "}");
}

// Finding 2: an 80k-entry (951 KB) header took 29 s (the callback parser rescanned the parent
// object at every nested object's end). Now linear, and memory a small multiple of the header.
TEST(SafetensorsHardening, ParsingIsLinearInTheHeader) {
  const Bytes small = many_entries(1 << 20), large = many_entries(4 << 20);
  const test::Cost a = test::measure([&] { parse_safetensors(small, "x"); }, 2);
  const test::Cost b = test::measure([&] { parse_safetensors(large, "x"); }, 2);
  ASSERT_FALSE(a.crashed || b.crashed);
  ASSERT_FALSE(b.threw) << b.error;
  EXPECT_LT(b.seconds, 8 * std::max(a.seconds, 0.02)) << a.seconds << " s -> " << b.seconds;
  EXPECT_LT(b.seconds, 10.0);
  // DOM + TensorInfo per entry: under 40 bytes per header byte.
  EXPECT_LT(b.peak_mib, 40.0 * 4) << b.peak_mib;
}

TEST(SafetensorsHardening, IndexParsingIsLinearAndCapped) {
  auto index = [](size_t bytes) {
    std::string s = R"({"metadata": {"total_size": 0}, "weight_map": {)";
    for (size_t i = 0; s.size() < bytes; ++i)
      s += (i ? ",\"t" : "\"t") + std::to_string(i) + "\":\"model.safetensors\"";
    return s + "}}";
  };
  const std::string small = index(1 << 20), large = index(4 << 20);
  const test::Cost a = test::measure([&] { parse_safetensors_index(small, "i"); }, 2);
  const test::Cost b = test::measure([&] { parse_safetensors_index(large, "i"); }, 2);
  ASSERT_FALSE(a.crashed || b.crashed);
  ASSERT_FALSE(b.threw) << b.error;
  EXPECT_LT(b.seconds, 8 * std::max(a.seconds, 0.02)) << a.seconds << " s -> " << b.seconds;
  // The file itself is capped before it is read.
  TempDir dir;
  {
    std::ofstream out(dir / "model.safetensors.index.json", std::ios::binary);
    out.seekp(static_cast<std::streamoff>(kSafetensorsMaxIndexBytes));
    out << ' ';
  }
  try {
    SafetensorsSet::open_dir(dir.path());
    ADD_FAILURE() << "an oversized index was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("over the limit"), std::string::npos) << e.what();
  }
}

// Finding 8: config.json (and every other file of the directory) must resolve inside it, and
// an error never shows what an outside file holds.
TEST(ModelDirHardening, MetadataSymlinksStayInside) {
  TempDir root;
  fs::create_directories(root / "model");
  test::write_text(root / "secret", "root:$6$SECRET-HASH:19000:0:99999:7:::\n");
  fs::create_symlink(root / "secret", root / "model/config.json");
  try {
    load_model_config(root / "model");
    ADD_FAILURE() << "followed a link out of the model directory";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("outside the model directory"), std::string::npos) << m;
    EXPECT_EQ(m.find("SECRET"), std::string::npos) << m;
  }
  fs::remove(root / "model/config.json");
  test::write_text(root / "model/config.json", test::tiny_config_json("llama"));
  fs::create_symlink(root / "secret", root / "model/generation_config.json");
  EXPECT_THROW(load_generation_config(root / "model"), Error);
}

// The Hugging Face cache layout: every file of snapshots/<rev>/ links into ../../blobs/.
TEST(ModelDirHardening, HuggingFaceCacheLayoutLoads) {
  TempDir cache;
  const fs::path repo = cache / "models--org--tiny";
  const fs::path snap = repo / "snapshots/0123abc";
  fs::create_directories(snap);
  fs::create_directories(repo / "blobs");
  TempDir staging;
  const ModelConfig cfg = parse_model_config(test::tiny_config_json("llama"), "config.json");
  std::mt19937_64 rng(1);
  test::write_model(staging.path(), cfg, DType::kF32, rng);
  test::write_text(staging / "config.json", test::tiny_config_json("llama"));
  test::write_text(staging / "generation_config.json", R"({"temperature": 0.5})");
  int i = 0;
  for (const char* name : {"config.json", "generation_config.json", "model.safetensors"}) {
    const std::string blob = "blob" + std::to_string(i++);
    fs::copy_file(staging / name, repo / "blobs" / blob);
    fs::create_symlink("../../blobs/" + blob, snap / name);
  }
  const Model m = load_model(snap);
  EXPECT_EQ(m.config.num_layers, 3);
  EXPECT_FLOAT_EQ(*m.generation.temperature, 0.5f);
}

}  // namespace
}  // namespace ceiling
