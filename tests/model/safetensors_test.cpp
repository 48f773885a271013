// The safetensors parser on byte spans: every dtype, every validation rule, and random
// corruptions of a valid file (each either parses into a consistent header or throws Error).
#include "model/safetensors.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "model_test_util.h"

namespace ceiling {
namespace {

using Bytes = std::vector<std::byte>;

Bytes make_file(std::string header, const Bytes& data, bool pad = true) {
  if (pad) header.append((8 - header.size() % 8) % 8, ' ');
  Bytes out(8 + header.size());
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<std::byte>(n >> (8 * i));
  std::memcpy(out.data() + 8, header.data(), header.size());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::string error_of(const Bytes& file) {
  try {
    parse_safetensors(file, "x.safetensors");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

#define EXPECT_PARSE_ERROR(file, substring)                                        \
  do {                                                                             \
    const std::string msg_ = error_of(file);                                       \
    EXPECT_NE(msg_.find(substring), std::string::npos) << "got: " << msg_;         \
    EXPECT_EQ(msg_.rfind("x.safetensors: ", 0), 0u) << "names the file: " << msg_; \
    EXPECT_EQ(msg_.find('\n'), std::string::npos) << msg_;                         \
  } while (0)

TEST(Safetensors, EmptyHeaderAndMetadata) {
  SafetensorsHeader h = parse_safetensors(make_file("{}", {}), "x");
  EXPECT_TRUE(h.tensors.empty());
  EXPECT_EQ(h.data_start, 16u);
  h = parse_safetensors(make_file(R"({"__metadata__":{"format":"pt","k":"v"}})", {}), "x");
  EXPECT_EQ(h.metadata.at("format"), "pt");
  EXPECT_EQ(h.metadata.size(), 2u);
  h = parse_safetensors(make_file(R"({"__metadata__":null})", {}), "x");
  EXPECT_TRUE(h.metadata.empty());
  // Unpadded header and an unknown extra field in an entry (the reference ignores it).
  h = parse_safetensors(
      make_file(R"({"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3],"note":1}})",
                test::pattern(3, 0), false),
      "x");
  ASSERT_EQ(h.tensors.size(), 1u);
  EXPECT_EQ(h.tensors[0].nbytes(), 3u);
}

TEST(Safetensors, SortsByOffsetAndFindsByName) {
  const auto f = make_file(R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]},)"
                           R"("a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
                           R"("z":{"dtype":"BF16","shape":[0,5],"data_offsets":[12,12]}})",
                           test::pattern(12, 1));
  const SafetensorsHeader h = parse_safetensors(f, "x");
  ASSERT_EQ(h.tensors.size(), 3u);
  EXPECT_EQ(h.tensors[0].name, "a");
  EXPECT_EQ(h.tensors[0].numel(), 1);  // scalar
  EXPECT_EQ(h.tensors[1].name, "b");
  EXPECT_EQ(h.find("z")->numel(), 0);
  EXPECT_EQ(h.find("z")->shape_str(), "[0, 5]");
  EXPECT_EQ(h.find("nope"), nullptr);
}

TEST(Safetensors, PythonWrittenFileWithEveryDtype) {
  const auto path =
      std::filesystem::path(CEILING_SOURCE_DIR) / "tests/model/pyref/all_dtypes.safetensors";
  auto set = SafetensorsSet::open_file(path);
  struct Want {
    const char* name;
    const char* st;
    std::vector<int64_t> shape;
    std::optional<DType> dt;
  };
  const std::vector<Want> want = {{"bool", "BOOL", {5}, DType::kBool},
                                  {"u8", "U8", {3, 1}, DType::kU8},
                                  {"i8", "I8", {2, 3}, DType::kI8},
                                  {"e5m2", "F8_E5M2", {7}, DType::kF8E5M2},
                                  {"e4m3", "F8_E4M3", {1, 9}, DType::kF8E4M3},
                                  {"i16", "I16", {5}, DType::kI16},
                                  {"u16", "U16", {2, 2}, std::nullopt},
                                  {"f16", "F16", {3}, DType::kF16},
                                  {"bf16", "BF16", {3, 3}, DType::kBF16},
                                  {"i32", "I32", {2}, DType::kI32},
                                  {"u32", "U32", {1}, std::nullopt},
                                  {"f32", "F32", {2, 1, 3}, DType::kF32},
                                  {"f64", "F64", {}, DType::kF64},
                                  {"i64", "I64", {2}, DType::kI64},
                                  {"u64", "U64", {1}, std::nullopt},
                                  {"empty", "F32", {4, 0}, DType::kF32}};
  ASSERT_EQ(set->tensors().size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    SCOPED_TRACE(want[k].name);
    const auto* e = set->find(want[k].name);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->info->st->name, want[k].st);
    EXPECT_EQ(e->info->shape, want[k].shape);
    const auto bytes = set->bytes(want[k].name);
    const auto expect = test::pattern(bytes.size(), static_cast<int>(k));
    ASSERT_TRUE(std::equal(bytes.begin(), bytes.end(), expect.begin(), expect.end()));
    if (want[k].dt) {
      const TensorView v = set->view(want[k].name);
      EXPECT_EQ(v.dtype, *want[k].dt);
      EXPECT_EQ(v.ndim, static_cast<int>(want[k].shape.size()));
      EXPECT_TRUE(v.is_contiguous());
      EXPECT_EQ(v.nbytes(), bytes.size());
      EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data) % std::max(1, dtype_bits(v.dtype) / 8), 0u);
    } else {
      EXPECT_THROW(set->view(want[k].name), Error);
    }
  }
}

TEST(Safetensors, FileLayerRules) {
  EXPECT_PARSE_ERROR(Bytes(5), "shorter than the 8-byte header length");
  Bytes huge = make_file("{}", {});
  huge[5] = std::byte{1};  // 2^40
  EXPECT_PARSE_ERROR(huge, "header too large");
  Bytes past = make_file("{}", {});
  past[0] = std::byte{9};
  EXPECT_PARSE_ERROR(past, "header past EOF");
  EXPECT_PARSE_ERROR(make_file("{\"a\xc3\x28\":1}", {}), "not valid UTF-8");
  EXPECT_PARSE_ERROR(make_file("{\"\xed\xa0\x80\":1}", {}), "not valid UTF-8");  // surrogate
  EXPECT_PARSE_ERROR(make_file("{\"\xc0\xaf\":1}", {}), "not valid UTF-8");      // overlong
  EXPECT_PARSE_ERROR(make_file("", {}), "must start with '{'");
  EXPECT_PARSE_ERROR(make_file("  {}", {}), "must start with '{'");
  EXPECT_PARSE_ERROR(make_file("{", {}), "not valid JSON");
  EXPECT_PARSE_ERROR(make_file("{}x", {}), "not valid JSON");
  EXPECT_PARSE_ERROR(make_file("{}", Bytes(3)), "3 trailing bytes");
  // Numbers past double range make nlohmann throw out_of_range, not parse_error (found by fuzzing).
  EXPECT_PARSE_ERROR(make_file(R"({"a":{"dtype":"U8","shape":[1e999],"data_offsets":[0,1]}})", {}),
                     "number out of range");
  // Valid multi-byte UTF-8 in a name is fine.
  EXPECT_NO_THROW(parse_safetensors(
      make_file("{\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\":{\"dtype\":\"U8\",\"shape\":[1],"
                "\"data_offsets\":[0,1]}}",
                Bytes(1)),
      "x"));
}

TEST(Safetensors, EntryRules) {
  auto one = [](const std::string& entry, size_t data = 8) {
    return make_file("{\"t\":" + entry + "}", Bytes(data));
  };
  EXPECT_PARSE_ERROR(one("[1]"), "tensor 't': entry must be an object");
  EXPECT_PARSE_ERROR(one(R"({"shape":[2],"data_offsets":[0,8]})"), "missing 'dtype'");
  EXPECT_PARSE_ERROR(one(R"({"dtype":4,"shape":[2],"data_offsets":[0,8]})"),
                     "'dtype' must be a string");
  EXPECT_PARSE_ERROR(one(R"({"dtype":"f32","shape":[2],"data_offsets":[0,8]})"),
                     "unknown dtype 'f32'");
  EXPECT_PARSE_ERROR(one(R"({"dtype":"F32","data_offsets":[0,8]})"), "missing 'shape'");
  EXPECT_PARSE_ERROR(one(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})"), "bad shape");
  EXPECT_PARSE_ERROR(one(R"({"dtype":"F32","shape":[2.0],"data_offsets":[0,8]})"), "bad shape");
  EXPECT_PARSE_ERROR(one(R"({"dtype":"F32","shape":["2"],"data_offsets":[0,8]})"), "bad shape");
  EXPECT_PARSE_ERROR(one(R"({"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,8]})"),
                     "bad shape");
  EXPECT_PARSE_ERROR(one(R"({"dtype":"F32","shape":[2]})"), "missing 'data_offsets'");
  EXPECT_PARSE_ERROR(one(R"({"dtype":"F32","shape":[2],"data_offsets":[0]})"), "[begin, end]");
  EXPECT_PARSE_ERROR(one(R"({"dtype":"F32","shape":[2],"data_offsets":[0,-8]})"), "[begin, end]");
  EXPECT_PARSE_ERROR(one(R"({"dtype":"F32","shape":[2],"data_offsets":{"a":0}})"), "[begin, end]");
  EXPECT_PARSE_ERROR(one(R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})"),
                     "end before they begin");
  EXPECT_PARSE_ERROR(one(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})"), "size mismatch");
  EXPECT_PARSE_ERROR(one(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]})"),
                     "overflows 64 bits");
  EXPECT_PARSE_ERROR(one(R"({"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,8]})"),
                     "overflows 64 bits");
  EXPECT_PARSE_ERROR(one(R"({"dtype":"F4","shape":[3],"data_offsets":[0,8]})"),
                     "whole number of bytes");
  EXPECT_PARSE_ERROR(one(R"({"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]})"),
                     "key 'dtype' appears twice");
  EXPECT_PARSE_ERROR(make_file(R"({"__metadata__":{"a":1}})", {}), "__metadata__");
  EXPECT_PARSE_ERROR(make_file(R"({"__metadata__":[]})", {}), "__metadata__");
  EXPECT_PARSE_ERROR(make_file(R"({"__metadata__":{"a":"1","a":"2"}})", {}), "appears twice");
  // F4 with an even count is whole bytes.
  EXPECT_NO_THROW(
      parse_safetensors(one(R"({"dtype":"F4","shape":[16],"data_offsets":[0,8]})"), "x"));
  // Names with control characters are escaped in messages (still one line).
  const std::string msg = error_of(
      make_file("{\"a\\nb\":{\"dtype\":\"F17\",\"shape\":[],\"data_offsets\":[0,0]}}", {}));
  EXPECT_NE(msg.find("tensor 'a\\x0ab'"), std::string::npos) << msg;
}

TEST(SafetensorsIndex, Rules) {
  auto error_of_index = [](const std::string& text) -> std::string {
    try {
      parse_safetensors_index(text, "i.json");
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  const SafetensorsIndex idx = parse_safetensors_index(
      R"({"metadata": {"total_size": 12}, "weight_map": {"a": "s1", "b": "s2", "c": "s1"}})", "i");
  EXPECT_EQ(idx.weight_map.size(), 3u);
  EXPECT_EQ(idx.weight_map.at("c"), "s1");
  EXPECT_EQ(idx.total_size, 12u);
  const std::pair<const char*, const char*> cases[] = {
      {"-4444444444444444444444444444e444444+4", "number out of range"},  // found by fuzzing
      {"{", "not valid JSON"},
      {"[]", "index must be a JSON object"},
      {R"({"metadata": {}})", "'weight_map' is missing"},
      {R"({"weight_map": {"a": 1}})", "must be a file name"},
      {R"({"weight_map": {"a": ""}})", "not a plain file name"},
      {R"({"weight_map": {"a": ".."}})", "not a plain file name"},
      {R"({"weight_map": {"a": "sub/s1"}})", "not a plain file name"},
      {R"({"weight_map": {"a": "sub\\s1"}})", "not a plain file name"},
      {R"({"weight_map": {"a": "/abs"}})", "not a plain file name"},
      {R"({"weight_map": {"a": "s\u0000"}})", "not a plain file name"},
      {R"({"weight_map": {"a": "s1", "a": "s2"}})", "tensor 'a' is listed twice in weight_map"},
      {R"({"weight_map": {}, "weight_map": {}})", "appears twice"},
  };
  for (const auto& [text, want] : cases) {
    const std::string msg = error_of_index(text);
    EXPECT_NE(msg.find(want), std::string::npos) << text << " -> " << msg;
  }
}

TEST(Safetensors, TilingRules) {
  auto two = [](uint64_t b0, uint64_t e0, uint64_t b1, uint64_t e1, size_t data) {
    return make_file(fmt::format(R"({{"a":{{"dtype":"U8","shape":[{}],"data_offsets":[{},{}]}},)"
                                 R"("b":{{"dtype":"U8","shape":[{}],"data_offsets":[{},{}]}}}})",
                                 e0 - b0, b0, e0, e1 - b1, b1, e1),
                     Bytes(data));
  };
  EXPECT_NO_THROW(parse_safetensors(two(0, 4, 4, 9, 9), "x"));
  EXPECT_NO_THROW(parse_safetensors(two(5, 9, 0, 5, 9), "x"));  // any order in the header
  EXPECT_PARSE_ERROR(two(0, 4, 3, 9, 9), "overlapping offsets");
  EXPECT_PARSE_ERROR(two(0, 4, 0, 4, 4), "overlapping offsets");  // same range twice
  EXPECT_PARSE_ERROR(two(0, 4, 5, 9, 9), "gap between tensors");
  EXPECT_PARSE_ERROR(two(1, 4, 4, 9, 9), "gap of 1 bytes after the start of the data");
  EXPECT_PARSE_ERROR(two(0, 4, 4, 9, 8), "truncated file");
  EXPECT_PARSE_ERROR(two(0, 4, 4, 9, 12), "3 trailing bytes");
  EXPECT_PARSE_ERROR(two(0, 4, 4, 9, 0), "truncated file");
  EXPECT_PARSE_ERROR(make_file(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                               R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                               Bytes(2)),
                     "tensor 'a' appears twice in the header (duplicate tensor)");
}

// Random corruptions of a valid file: the parser either accepts a consistent header or throws
// Error; it never reads outside the span (the buffer is exactly the file's size) or crashes.
TEST(Safetensors, RandomCorruptionsNeverCrash) {
  const auto path =
      std::filesystem::path(CEILING_SOURCE_DIR) / "tests/model/pyref/all_dtypes.safetensors";
  const Bytes good = test::read_bytes(path);
  ASSERT_GT(good.size(), 64u);
  std::mt19937_64 rng(std::random_device{}());
  int accepted = 0, rejected = 0;
  for (int it = 0; it < 3000; ++it) {
    Bytes f = good;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      switch (rng() % 4) {
        case 0:
          f[rng() % f.size()] = static_cast<std::byte>(rng());
          break;
        case 1:
          f.resize(rng() % (f.size() + 1));
          break;
        case 2:
          f.insert(f.begin() + static_cast<long>(rng() % (f.size() + 1)),
                   static_cast<std::byte>(rng()));
          break;
        case 3:
          f[rng() % std::min<size_t>(f.size(), 8)] = static_cast<std::byte>(rng());
          break;
      }
      if (f.empty()) break;
    }
    auto heap = std::make_unique<std::byte[]>(f.size());  // exact size: ASan sees overreads
    std::memcpy(heap.get(), f.data(), f.size());
    try {
      const SafetensorsHeader h = parse_safetensors({heap.get(), f.size()}, "x");
      uint64_t covered = 0;
      for (const auto& t : h.tensors) {
        EXPECT_EQ(t.begin, covered);
        covered = t.end;
      }
      EXPECT_EQ(h.data_start + covered, f.size());
      ++accepted;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 1000);
  EXPECT_GT(accepted, 0);  // byte flips inside tensor data keep the file valid
}

}  // namespace
}  // namespace ceiling
