// load_model on models written by the C++ writer: every family × dtype × tied/untied, sharded
// files, progress, unexpected tensors, symlink rules and misaligned files. Every byte of every
// weight view is compared with what was written.
#include "model/loader.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "model/safetensors.h"
#include "model_test_util.h"

namespace ceiling {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

// Every named view of `w` (data == nullptr for absent optional ones).
std::map<std::string, const TensorView*> named_views(const ModelWeights& w) {
  std::map<std::string, const TensorView*> m;
  m["model.embed_tokens.weight"] = &w.embed;
  m["model.norm.weight"] = &w.final_norm;
  m["lm_head.weight"] = &w.lm_head;
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& l = w.layers[i];
    const std::string p = fmt::format("model.layers.{}.", i);
    m[p + "input_layernorm.weight"] = &l.input_norm;
    m[p + "self_attn.q_proj.weight"] = &l.q_proj;
    m[p + "self_attn.k_proj.weight"] = &l.k_proj;
    m[p + "self_attn.v_proj.weight"] = &l.v_proj;
    m[p + "self_attn.q_proj.bias"] = &l.q_bias;
    m[p + "self_attn.k_proj.bias"] = &l.k_bias;
    m[p + "self_attn.v_proj.bias"] = &l.v_bias;
    m[p + "self_attn.q_norm.weight"] = &l.q_norm;
    m[p + "self_attn.k_norm.weight"] = &l.k_norm;
    m[p + "self_attn.o_proj.weight"] = &l.o_proj;
    m[p + "post_attention_layernorm.weight"] = &l.post_attn_norm;
    m[p + "mlp.gate_proj.weight"] = &l.gate_proj;
    m[p + "mlp.up_proj.weight"] = &l.up_proj;
    m[p + "mlp.down_proj.weight"] = &l.down_proj;
  }
  return m;
}

// Checks that every expected tensor is bound with its shape and exactly the written bytes.
void expect_bound(const Model& m, const std::map<std::string, std::vector<std::byte>>& data,
                  DType dtype) {
  const auto views = named_views(m.weights);
  const auto expected = expected_tensors(m.config);
  size_t bound = 0;
  for (const auto& e : expected) {
    SCOPED_TRACE(e.name);
    const TensorView* v = views.at(e.name);
    ASSERT_NE(v->data, nullptr);
    ++bound;
    EXPECT_EQ(v->dtype, dtype);
    ASSERT_EQ(v->ndim, static_cast<int>(e.shape.size()));
    for (int r = 0; r < v->ndim; ++r) EXPECT_EQ(v->shape[r], e.shape[static_cast<size_t>(r)]);
    EXPECT_TRUE(v->is_contiguous());
    // A tied lm_head that was not written is the embedding.
    const std::string source = data.count(e.name) ? e.name : "model.embed_tokens.weight";
    EXPECT_TRUE(test::same_bytes(*v, data.at(source)));
  }
  // Views absent from the architecture stay empty.
  size_t non_null = 0;
  for (const auto& [n, v] : views) non_null += v->data != nullptr;
  EXPECT_EQ(non_null, bound);
}

struct Family {
  const char* model_type;
  Arch arch;
  bool bias, qk_norm;
};

TEST(LoadModel, EveryFamilyDtypeAndTying) {
  std::mt19937_64 rng(std::random_device{}());
  const Family families[] = {{"llama", Arch::kLlama, false, false},
                             {"mistral", Arch::kMistral, false, false},
                             {"qwen2", Arch::kQwen2, true, false},
                             {"qwen3", Arch::kQwen3, false, true}};
  for (const auto& f : families) {
    for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (bool tied : {false, true}) {
        SCOPED_TRACE(fmt::format("{} {} tied={}", f.model_type, dtype_name(dt), tied));
        TempDir dir;
        test::write_text(dir / "config.json", test::tiny_config_json(f.model_type, tied));
        const ModelConfig cfg = load_model_config(dir.path());
        const auto data = test::write_model(dir.path(), cfg, dt, rng);
        const Model m = load_model(dir.path());
        EXPECT_EQ(m.config.arch, f.arch);
        EXPECT_EQ(m.config.attention_bias, f.bias);
        EXPECT_EQ(m.config.qk_norm, f.qk_norm);
        ASSERT_EQ(m.weights.layers.size(), 3u);
        expect_bound(m, data, dt);
        if (tied)
          EXPECT_EQ(m.weights.lm_head.data, m.weights.embed.data);
        else
          EXPECT_NE(m.weights.lm_head.data, m.weights.embed.data);
        EXPECT_TRUE(m.unexpected_tensors.empty());
        EXPECT_EQ(m.dir, dir.path());
      }
    }
  }
}

TEST(LoadModel, TiedButLmHeadPresentUsesIt) {
  std::mt19937_64 rng(std::random_device{}());
  TempDir dir;
  test::write_text(dir / "config.json", test::tiny_config_json("llama", /*tied=*/true));
  const auto data = test::write_model(dir.path(), load_model_config(dir.path()), DType::kBF16, rng,
                                      0, /*include_optional=*/true);
  const Model m = load_model(dir.path());
  EXPECT_NE(m.weights.lm_head.data, m.weights.embed.data);
  EXPECT_TRUE(test::same_bytes(m.weights.lm_head, data.at("lm_head.weight")));
}

TEST(LoadModel, ShardedWithProgressAndUnexpectedTensors) {
  std::mt19937_64 rng(std::random_device{}());
  TempDir dir;
  test::write_text(dir / "config.json", test::tiny_config_json("qwen3"));
  test::write_text(dir / "generation_config.json", R"({"temperature": 0.7, "eos_token_id": 5})");
  const ModelConfig cfg = load_model_config(dir.path());
  const auto data =
      test::write_model(dir.path(), cfg, DType::kBF16, rng, /*shard_bytes=*/700, false,
                        {{"model.layers.0.self_attn.rotary_emb.inv_freq", DType::kF32, {3}},
                         {"extra.scale", DType::kI32, {}}});
  std::vector<LoadProgress> seen;
  const Model m = load_model(dir.path(), [&](const LoadProgress& p) { seen.push_back(p); });
  expect_bound(m, data, DType::kBF16);
  EXPECT_GT(m.files->files().size(), 3u);
  EXPECT_EQ(
      m.unexpected_tensors,
      (std::vector<std::string>{"extra.scale", "model.layers.0.self_attn.rotary_emb.inv_freq"}));
  EXPECT_EQ(m.generation.temperature, 0.7f);
  EXPECT_EQ(m.generation.eos_token_ids, std::vector<int>{5});
  ASSERT_FALSE(seen.empty());
  for (size_t i = 1; i < seen.size(); ++i) {
    EXPECT_GE(seen[i].bytes_mapped, seen[i - 1].bytes_mapped);
    EXPECT_GE(seen[i].tensors_checked, seen[i - 1].tensors_checked);
  }
  EXPECT_EQ(seen.back().bytes_mapped, seen.back().bytes_total);
  EXPECT_EQ(seen.back().bytes_total, m.files->file_bytes());
  EXPECT_EQ(seen.back().tensors_checked, seen.back().tensors_total);
  EXPECT_EQ(seen.back().tensors_total, static_cast<int>(data.size()));
}

std::string load_error(const fs::path& dir) {
  try {
    load_model(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(LoadModel, QwenWithoutBiasAndQwen3WithoutNormAreMissingTensors) {
  std::mt19937_64 rng(std::random_device{}());
  for (const char* type : {"qwen2", "qwen3"}) {
    TempDir dir;
    // Written as a llama (no bias, no q/k norm), read as qwen2 / qwen3.
    test::write_text(dir / "config.json", test::tiny_config_json("llama"));
    test::write_model(dir.path(), load_model_config(dir.path()), DType::kF16, rng);
    test::write_text(dir / "config.json", test::tiny_config_json(type));
    const std::string msg = load_error(dir.path());
    EXPECT_NE(msg.find(std::string(type) == "qwen2"
                           ? "missing tensor 'model.layers.0.self_attn.q_proj.bias'"
                           : "missing tensor 'model.layers.0.self_attn.q_norm.weight'"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find(dir.path().string()), std::string::npos) << msg;
  }
}

TEST(LoadModel, ShapeFromConfigIsEnforced) {
  std::mt19937_64 rng(std::random_device{}());
  TempDir dir;
  test::write_text(dir / "config.json", test::tiny_config_json("llama"));
  test::write_model(dir.path(), load_model_config(dir.path()), DType::kF16, rng);
  // Same files, config with a different intermediate size.
  test::write_text(dir / "config.json",
                   test::tiny_config_json("llama", false, R"(, "intermediate_size": 9)"));
  const std::string msg = load_error(dir.path());
  EXPECT_NE(
      msg.find("tensor 'model.layers.0.mlp.gate_proj.weight' has shape [7, 12] but config.json "
               "implies [9, 12] (wrong shape)"),
      std::string::npos)
      << msg;
}

TEST(LoadModel, SymlinksMustStayInside) {
  std::mt19937_64 rng(std::random_device{}());
  TempDir root;
  fs::create_directories(root / "outside");
  fs::create_directories(root / "model/sub");
  test::write_text(root / "model/config.json", test::tiny_config_json("llama"));
  const ModelConfig cfg = load_model_config(root / "model");
  test::write_model(root / "outside", cfg, DType::kBF16, rng);
  fs::create_symlink("../outside/model.safetensors", root / "model/model.safetensors");
  const std::string msg = load_error(root / "model");
  EXPECT_NE(msg.find("outside the model directory"), std::string::npos) << msg;

  // A link to a file inside the directory is fine.
  fs::remove(root / "model/model.safetensors");
  fs::rename(root / "outside/model.safetensors", root / "model/sub/real.safetensors");
  fs::create_symlink("sub/real.safetensors", root / "model/model.safetensors");
  EXPECT_NO_THROW(load_model(root / "model"));

  // A dangling link is a missing file.
  fs::remove(root / "model/model.safetensors");
  fs::create_symlink("sub/none.safetensors", root / "model/model.safetensors");
  EXPECT_NE(load_error(root / "model").find("does not exist"), std::string::npos);
}

TEST(LoadModel, HuggingFaceCacheSnapshotMayLinkIntoBlobs) {
  std::mt19937_64 rng(std::random_device{}());
  TempDir root;
  const fs::path repo = root / "models--org--tiny";
  const fs::path snap = repo / "snapshots" / "0123abcd";
  fs::create_directories(snap);
  fs::create_directories(repo / "blobs");
  test::write_text(repo / "blobs/cfg", test::tiny_config_json("mistral"));
  fs::create_symlink("../../blobs/cfg", snap / "config.json");
  const auto data = test::write_model(repo / "blobs", load_model_config(repo / "blobs/cfg"),
                                      DType::kF32, rng, /*shard_bytes=*/2000);
  for (const auto& e : fs::directory_iterator(repo / "blobs")) {
    if (e.path().extension() == ".json" || e.path().extension() == ".safetensors")
      fs::create_symlink("../../blobs/" + e.path().filename().string(), snap / e.path().filename());
  }
  const Model m = load_model(snap);
  expect_bound(m, data, DType::kF32);
}

// A file whose header is not padded: tensors sit at odd file offsets and are copied to aligned
// memory; the bytes still match.
TEST(LoadModel, MisalignedTensorsAreRealigned) {
  TempDir dir;
  const std::string header =
      R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},"b":{"dtype":"BF16","shape":[5],"data_offsets":[12,22]}})";
  ASSERT_NE(header.size() % 4, 0u);
  std::vector<std::byte> file(8);
  for (int i = 0; i < 8; ++i)
    file[static_cast<size_t>(i)] = static_cast<std::byte>(header.size() >> (8 * i));
  for (char c : header) file.push_back(static_cast<std::byte>(c));
  const auto payload = test::pattern(22, 4);
  file.insert(file.end(), payload.begin(), payload.end());
  {
    std::ofstream out(dir / "x.safetensors", std::ios::binary);
    out.write(reinterpret_cast<const char*>(file.data()),
              static_cast<std::streamsize>(file.size()));
  }
  auto set = SafetensorsSet::open_file(dir / "x.safetensors");
  const TensorView a = set->view("a"), b = set->view("b");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data) % 4, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data) % 2, 0u);
  EXPECT_EQ(std::memcmp(a.data, payload.data(), 12), 0);
  EXPECT_EQ(std::memcmp(b.data, payload.data() + 12, 10), 0);
}

TEST(LoadModel, NotADirectory) {
  EXPECT_NE(load_error("/nonexistent/ceiling-model").find("not a model directory"),
            std::string::npos);
}

}  // namespace
}  // namespace ceiling
