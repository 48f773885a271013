// The streaming writers: byte-exact against the Python generator, random round trips with
// chunked writes, sharding, and the misuse errors.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <random>

#include "model/safetensors.h"
#include "model/safetensors_writer.h"
#include "model_test_util.h"

namespace ceiling {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

TEST(SafetensorsWriter, MatchesPythonGeneratorByteForByte) {
  // The same list as pyref() in make_malformed.py.
  const std::vector<TensorDecl> golden = {
      {"w.f32", DType::kF32, {3, 5}},  {"w.bf16", DType::kBF16, {7}},
      {"w.i8", DType::kI8, {2, 3, 1}}, {"w.empty", DType::kU8, {0}},
      {"w.scalar", DType::kF64, {}},   {"w.bool", DType::kBool, {4}},
      {"w.e4m3", DType::kF8E4M3, {9}}, {"w.i64", DType::kI64, {1}}};
  TempDir dir;
  const fs::path out = dir / "golden.safetensors";
  {
    SafetensorsWriter w(out, golden, {{"producer", "ceiling-test"}, {"format", "pt"}});
    for (size_t k = 0; k < golden.size(); ++k)
      w.write(golden[k].name, test::pattern(tensor_decl_bytes(golden[k]), static_cast<int>(k)));
    w.finish();
  }
  const auto want = test::read_bytes(fs::path(CEILING_SOURCE_DIR) /
                                     "tests/model/pyref/writer_golden.safetensors");
  const auto got = test::read_bytes(out);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_TRUE(got == want);
}

// Random tensors of every storable dtype and awkward shapes, written in random chunks, read back.
TEST(SafetensorsWriter, RandomRoundTripWithChunks) {
  std::mt19937_64 rng(std::random_device{}());
  const DType kTypes[] = {DType::kF64,    DType::kF32,    DType::kF16, DType::kBF16,
                          DType::kF8E4M3, DType::kF8E5M2, DType::kI64, DType::kI32,
                          DType::kI16,    DType::kI8,     DType::kU8,  DType::kBool};
  for (int round = 0; round < 20; ++round) {
    TempDir dir;
    std::vector<TensorDecl> decls;
    const int n = 1 + static_cast<int>(rng() % 17);
    for (int i = 0; i < n; ++i) {
      TensorDecl d{
          fmt::format("layer.{}.w{}", i, rng() % 1000), kTypes[rng() % std::size(kTypes)], {}};
      const int rank = static_cast<int>(rng() % 5);
      for (int r = 0; r < rank; ++r) d.shape.push_back(static_cast<int64_t>(rng() % 13));
      decls.push_back(d);
    }
    std::vector<std::vector<std::byte>> data;
    const fs::path path = dir / "m.safetensors";
    {
      SafetensorsWriter w(path, decls);
      for (const auto& d : decls) {
        data.push_back(test::random_bytes(tensor_decl_bytes(d), rng));
        std::span<const std::byte> rest(data.back());
        while (!rest.empty()) {  // random chunk sizes, including empty chunks
          const size_t c = std::min<size_t>(rest.size(), rng() % 40);
          w.write(d.name, rest.first(c));
          rest = rest.subspan(c);
        }
      }
      EXPECT_TRUE(w.complete());
      w.finish();
      EXPECT_EQ(w.header_bytes() % 8, 0u);
      EXPECT_EQ(fs::file_size(path), w.header_bytes() + w.data_bytes());
    }
    auto set = SafetensorsSet::open_file(path);
    ASSERT_EQ(set->tensors().size(), decls.size());
    for (size_t i = 0; i < decls.size(); ++i) {
      SCOPED_TRACE(decls[i].name);
      const TensorView v = set->view(decls[i].name);
      EXPECT_EQ(v.dtype, decls[i].dtype);
      ASSERT_EQ(v.ndim, static_cast<int>(decls[i].shape.size()));
      for (int r = 0; r < v.ndim; ++r)
        EXPECT_EQ(v.shape[r], decls[i].shape[static_cast<size_t>(r)]);
      EXPECT_TRUE(test::same_bytes(v, data[i]));
      // Laid out widest-first: no tensor needed a realigned copy.
      EXPECT_EQ(static_cast<const void*>(set->find(decls[i].name)->data),
                static_cast<const void*>(
                    set->find(decls[i].name)->file->bytes(*set->find(decls[i].name)->info).data()));
    }
  }
}

TEST(SafetensorsWriter, Misuse) {
  TempDir dir;
  const fs::path p = dir / "m.safetensors";
  const std::vector<TensorDecl> decls = {{"a", DType::kF32, {2}}, {"b", DType::kU8, {3}}};
  auto expect_error = [](auto&& fn, const std::string& want) {
    try {
      fn();
      ADD_FAILURE() << "no error, want " << want;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  {
    SafetensorsWriter w(p, decls);
    expect_error([&] { w.write("b", std::vector<std::byte>(3)); }, "out of order");
    expect_error([&] { w.write("a", std::vector<std::byte>(9)); }, "overrun");
    w.write("a", std::vector<std::byte>(8));
    expect_error([&] { w.finish(); }, "tensor 'b' incomplete (0 of 3 bytes");
    EXPECT_TRUE(fs::exists(dir / "m.safetensors.partial"));
  }
  // Destroyed before finish(): nothing left behind.
  EXPECT_FALSE(fs::exists(p));
  EXPECT_FALSE(fs::exists(dir / "m.safetensors.partial"));
  expect_error(
      [&] {
        SafetensorsWriter w(p, {{"a", DType::kF32, {1}}, {"a", DType::kF32, {1}}});
      },
      "declared twice");
  expect_error([&] { SafetensorsWriter w(p, {{"a", DType::kF32, {-1}}}); }, "negative dimension");
  expect_error([&] { SafetensorsWriter w(p, {{"a", DType::kI4, {2}}}); }, "cannot be stored");
  expect_error(
      [&] {
        SafetensorsWriter w(p, {{"__metadata__", DType::kF32, {1}}});
      },
      "not a tensor name");
  expect_error([&] { SafetensorsWriter w(dir / "no/such/dir/m.safetensors", decls); },
               "cannot create");
  expect_error(
      [&] {
        SafetensorsWriter w(p, {{std::string("bad\xff"), DType::kF32, {1}}});
      },
      "UTF-8");
}

TEST(ShardedSafetensorsWriter, SplitsAndLoadsBack) {
  std::mt19937_64 rng(std::random_device{}());
  TempDir dir;
  std::vector<TensorDecl> decls;
  for (int i = 0; i < 23; ++i)
    decls.push_back({fmt::format("t{:02d}", i),
                     i % 3 ? DType::kBF16 : DType::kF32,
                     {1 + static_cast<int64_t>(rng() % 9), 1 + static_cast<int64_t>(rng() % 7)}});
  decls.push_back({"big", DType::kF32, {40, 10}});  // larger than a shard: a shard of its own
  const uint64_t max_shard = 256;
  std::map<std::string, std::vector<std::byte>> data;
  ShardedSafetensorsWriter w(dir.path(), decls, max_shard);
  for (const auto& d : decls) {
    data[d.name] = test::random_bytes(tensor_decl_bytes(d), rng);
    w.write(d.name, data[d.name]);
  }
  w.finish();
  ASSERT_GE(w.shard_paths().size(), 3u);
  EXPECT_EQ(w.index_path(), dir / "model.safetensors.index.json");
  for (const auto& sp : w.shard_paths()) {
    const SafetensorsFile f(sp);
    EXPECT_TRUE(f.header().data_size <= max_shard || f.header().tensors.size() == 1) << sp;
    EXPECT_NE(sp.filename().string().find(fmt::format("-of-{:05d}", w.shard_paths().size())),
              std::string::npos);
  }
  std::ifstream in(w.index_path());
  const auto idx = nlohmann::json::parse(in);
  uint64_t total = 0;
  for (const auto& [n, b] : data) total += b.size();
  EXPECT_EQ(idx["metadata"]["total_size"].get<uint64_t>(), total);
  EXPECT_EQ(idx["weight_map"].size(), decls.size());

  auto set = SafetensorsSet::open_dir(dir.path());
  EXPECT_EQ(set->files().size(), w.shard_paths().size());
  for (const auto& d : decls)
    EXPECT_TRUE(test::same_bytes(set->view(d.name), data[d.name])) << d.name;
  EXPECT_EQ(set->index_total_size(), total);
}

TEST(ShardedSafetensorsWriter, OutOfOrderAcrossShards) {
  TempDir dir;
  ShardedSafetensorsWriter w(dir.path(), {{"a", DType::kU8, {8}}, {"b", DType::kU8, {8}}}, 8);
  EXPECT_THROW(w.write("b", std::vector<std::byte>(8)), Error);
  EXPECT_THROW(w.write("zz", std::vector<std::byte>(1)), Error);
  EXPECT_THROW(w.finish(), Error);
}

}  // namespace
}  // namespace ceiling
