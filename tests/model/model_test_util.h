// Helpers shared by the model tests: scratch directories, the byte pattern the Python generator
// uses (tests/model/make_malformed.py), small config.json files and whole-model writers.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "model/loader.h"
#include "model/safetensors_writer.h"

namespace ceiling::test {

namespace fs = std::filesystem;

// A fresh directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("ceiling-model-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) +
             "-" + std::to_string(std::random_device{}()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& s) const { return path_ / s; }

 private:
  fs::path path_;
};

// byte j = (31 j + 7 seed + 1) mod 256 — the Python generator's pattern.
inline std::vector<std::byte> pattern(size_t n, int seed) {
  std::vector<std::byte> v(n);
  for (size_t j = 0; j < n; ++j)
    v[j] = static_cast<std::byte>((31 * j + 7 * static_cast<size_t>(seed) + 1) % 256);
  return v;
}

inline std::vector<std::byte> random_bytes(size_t n, std::mt19937_64& rng) {
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng() & 0xff);
  return v;
}

inline void write_text(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good()) << p;
}

inline std::vector<std::byte> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(c.size());
  for (size_t i = 0; i < c.size(); ++i) out[i] = static_cast<std::byte>(c[i]);
  return out;
}

inline bool same_bytes(const TensorView& v, const std::vector<std::byte>& want) {
  return v.nbytes() == want.size() &&
         (want.empty() || std::memcmp(v.data, want.data(), want.size()) == 0);
}

// A small config.json for `model_type` with awkward sizes (head_dim 6, GQA 4/2, odd vocab).
inline std::string tiny_config_json(const std::string& model_type, bool tied = false,
                                    const std::string& extra = "") {
  return "{\"model_type\": \"" + model_type +
         "\", \"vocab_size\": 11, \"hidden_size\": 12, \"intermediate_size\": 7, "
         "\"num_hidden_layers\": 3, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
         "\"head_dim\": 6, \"tie_word_embeddings\": " +
         (tied ? "true" : "false") + extra + "}";
}

// Writes every expected tensor of `config` (plus `extra` tensors) with random bytes in `dtype`
// into dir/model.safetensors, or shards of `shard_bytes` when non-zero. Returns name -> bytes.
inline std::map<std::string, std::vector<std::byte>> write_model(
    const fs::path& dir, const ModelConfig& config, DType dtype, std::mt19937_64& rng,
    uint64_t shard_bytes = 0, bool include_optional = false,
    const std::vector<TensorDecl>& extra = {}) {
  std::vector<TensorDecl> decls;
  for (const auto& e : expected_tensors(config))
    if (!e.optional || include_optional) decls.push_back({e.name, dtype, e.shape});
  for (const auto& e : extra) decls.push_back(e);
  std::map<std::string, std::vector<std::byte>> data;
  for (const auto& d : decls) data[d.name] = random_bytes(tensor_decl_bytes(d), rng);
  if (shard_bytes == 0) {
    SafetensorsWriter w(dir / "model.safetensors", decls, {{"format", "pt"}});
    for (const auto& d : decls) w.write(d.name, data[d.name]);
    w.finish();
  } else {
    ShardedSafetensorsWriter w(dir, decls, shard_bytes);
    for (const auto& d : decls) w.write(d.name, data[d.name]);
    w.finish();
  }
  return data;
}

}  // namespace ceiling::test
