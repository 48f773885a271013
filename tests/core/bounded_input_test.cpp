// core/file_read.h and core/json_bounded.h: what every file, flag and request body from outside
// goes through. Hostile inputs are measured (time and peak memory, in a child) at two sizes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/file_read.h"
#include "core/json_bounded.h"
#include "core/status.h"
#include "measure.h"

namespace ceiling {
namespace {

namespace fs = std::filesystem;

class Scratch {
 public:
  Scratch() {
    static std::atomic<int> n{0};
    path_ = fs::temp_directory_path() /
            ("ceiling-core-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    fs::create_directories(path_);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  fs::path operator/(const std::string& s) const { return path_ / s; }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void write(const fs::path& p, const std::string& s) {
  std::ofstream(p, std::ios::binary) << s;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ReadRegularFile, ReadsAFileUnderItsCap) {
  Scratch d;
  write(d / "a.txt", "hello");
  EXPECT_EQ(read_regular_file(d / "a.txt", 5), "hello");
  EXPECT_NE(error_of([&] { read_regular_file(d / "a.txt", 4); }).find("over the limit of 4"),
            std::string::npos);
}

TEST(ReadRegularFile, RefusesDirectoriesDevicesAndFifos) {
  Scratch d;
  EXPECT_NE(error_of([&] { read_regular_file(d.path(), 1 << 20); }).find("is a directory"),
            std::string::npos);
  // /dev/zero never ends: it must be refused before reading, not after a bad_alloc.
  EXPECT_NE(error_of([&] { read_regular_file("/dev/zero", 1 << 20); }).find("not a regular file"),
            std::string::npos);
  ASSERT_EQ(::mkfifo((d / "fifo").c_str(), 0600), 0);
  EXPECT_NE(error_of([&] { read_regular_file(d / "fifo", 1 << 20); }).find("not a regular file"),
            std::string::npos);  // and does not wait for a writer
  EXPECT_NE(error_of([&] { read_regular_file(d / "missing", 1); }).find("cannot open"),
            std::string::npos);
}

TEST(ContainedFile, RefusesSymlinksOutOfTheDirectory) {
  Scratch d;
  fs::create_directories(d / "model");
  write(d / "secret", "root:x:0:0:SECRET-CONTENT");
  fs::create_symlink(d / "secret", d / "model/config.json");
  const std::string e =
      error_of([&] { read_model_file(d / "model", "config.json", "config", 100); });
  EXPECT_NE(e.find("outside the model directory"), std::string::npos) << e;
  EXPECT_EQ(e.find("SECRET"), std::string::npos) << e;
  // A link that stays inside is fine.
  write(d / "model/real.json", "{}");
  fs::create_symlink("real.json", d / "model/link.json");
  EXPECT_EQ(read_model_file(d / "model", "link.json", "config", 100), "{}");
}

TEST(ContainedFile, HuggingFaceCacheSnapshotsLinkIntoBlobs) {
  Scratch d;
  const fs::path repo = d / "models--org--name";
  fs::create_directories(repo / "blobs");
  fs::create_directories(repo / "snapshots/abc123");
  write(repo / "blobs/0123abcd", "{\"x\": 1}");
  fs::create_symlink("../../blobs/0123abcd", repo / "snapshots/abc123/config.json");
  EXPECT_EQ(read_model_file(repo / "snapshots/abc123", "config.json", "config", 100), "{\"x\": 1}");
  // ...but not anywhere else in the cache.
  write(repo / "other", "{}");
  fs::create_symlink("../../other", repo / "snapshots/abc123/tokenizer.json");
  EXPECT_NE(error_of([&] {
              read_model_file(repo / "snapshots/abc123", "tokenizer.json", "tokenizer", 100);
            }).find("outside the model directory"),
            std::string::npos);
}

TEST(QuoteText, EscapesAndCuts) {
  EXPECT_EQ(quote_text("a'b\n", 10), "'a\\x27b\\x0a'");
  EXPECT_EQ(quote_text("abcdef", 3), "'abc...'");
}

TEST(JsonBounded, RefusesNulAndTrailingGarbage) {
  // nlohmann's lexer takes NUL as the end of input: {"a": 1}\0garbage used to parse.
  const std::string nul = std::string("{\"a\": 1}") + '\0' + "garbage";
  auto r = parse_json_bounded(nul);
  ASSERT_TRUE(r.error.has_value());
  EXPECT_NE(r.error->find("NUL byte at byte 8"), std::string::npos) << *r.error;
  r = parse_json_bounded("{\"a\": 1} x");
  ASSERT_TRUE(r.error.has_value());
  EXPECT_NE(r.error->find("syntax error at byte"), std::string::npos) << *r.error;
  r = parse_json_bounded("{\"a\": 1}    \n\t ");  // whitespace (and safetensors' padding) is fine
  EXPECT_FALSE(r.error.has_value());
}

TEST(JsonBounded, ErrorsNeverEchoTheText) {
  const auto r = parse_json_bounded("root:x:0:0:SECRET");
  ASSERT_TRUE(r.error.has_value());
  EXPECT_EQ(r.error->find("root"), std::string::npos) << *r.error;
  EXPECT_EQ(r.error->find("SECRET"), std::string::npos) << *r.error;
}

TEST(JsonBounded, FindsDuplicateKeysWithTheirPath) {
  auto r = parse_json_bounded(R"({"m": {"x": 1, "y": [{"x": 2}], "x": 3}})");
  ASSERT_FALSE(r.error.has_value());
  EXPECT_EQ(r.duplicate_path, (std::vector<std::string>{"m", "x"}));
  r = parse_json_bounded(R"({"a": 1, "b": {"a": 2}})");
  EXPECT_TRUE(r.duplicate_path.empty());
  EXPECT_EQ(r.value["b"]["a"], 2);
}

TEST(JsonBounded, CapsDepthAtParseTime) {
  EXPECT_FALSE(parse_json_bounded("[[[[1]]]]", {.max_depth = 4}).error.has_value());
  const auto r = parse_json_bounded("[[[[[1]]]]]", {.max_depth = 4});
  ASSERT_TRUE(r.error.has_value());
  EXPECT_NE(r.error->find("nested deeper than 4"), std::string::npos) << *r.error;
  // 8 MB of '[' (the review's 99 MB header took 7.5 GB and 37 s): refused at the cap, no memory.
  const std::string deep(8 << 20, '[');
  const test::Cost c = test::measure([&] { parse_json_bounded(deep); });
  ASSERT_FALSE(c.crashed);
  EXPECT_LT(c.peak_mib, 4.0);
  EXPECT_LT(c.seconds, 1.0);
}

// {"t0": {"a": [0, 0]}, "t1": ...}: the shape of a safetensors header with many entries.
std::string many_objects(size_t bytes) {
  std::string s = "{";
  for (size_t i = 0; s.size() < bytes; ++i)
    s += (i ? ",\"t" : "\"t") + std::to_string(i) + "\":{\"a\":[0,0]}";
  return s + "}";
}

// Time linear in the input (quadratic would be 16x for 4x the input) and memory a small
// multiple of it, for the worst shapes: many nested objects, and a long flat list of numbers.
TEST(JsonBounded, LinearTimeAndBoundedMemory) {
  for (const auto& make : {+[](size_t n) { return many_objects(n); },
                           +[](size_t n) {
                             std::string s = "[0";
                             while (s.size() < n) s += ",0";
                             return s + "]";
                           }}) {
    const std::string small = make(1 << 20), large = make(4 << 20);
    const test::Cost a = test::measure([&] { parse_json_bounded(small); }, 2);
    const test::Cost b = test::measure([&] { parse_json_bounded(large); }, 2);
    ASSERT_FALSE(a.crashed || b.crashed);
    EXPECT_LT(b.seconds, 8 * std::max(a.seconds, 0.01)) << a.seconds << " s -> " << b.seconds;
    // The DOM: ~40 bytes per input byte at most (json_bounded.h states it).
    EXPECT_LT(b.peak_mib, 40.0 * 4 + 8) << b.peak_mib << " MiB for 4 MiB";
  }
}

}  // namespace
}  // namespace ceiling
