// Issue 18: hostile tokenizer.json / tokenizer_config.json. Each case failed before the fix
// (quadratic load or encode, NUL-truncated parse, files read through symlinks out of the model).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "../core/measure.h"
#include "core/status.h"
#include "test_util.h"

namespace ceiling {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Finding 4: a merge "a a a … a" tried every space as the split point: 400 KB took 11 s.
// Hugging Face tokenizers refuses merges with more than one space; so does ceiling, at once.
TEST(TokenizerHardening, MergesWithMoreThanOneSpaceAreRefused) {
  json doc = test::tiny_sentencepiece();
  doc["model"]["merges"] = json::array({"a b c"});
  try {
    Tokenizer::from_json(doc.dump(), {}, "t.json");
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("t.json: model.merges[0]: merge 'a b c' has more than "
                                         "one space"),
              std::string::npos)
        << e.what();
  }
  auto long_merge = [](size_t bytes) {
    json d = test::tiny_sentencepiece();
    std::string m = "a";
    while (m.size() < bytes) m += " a";
    d["model"]["merges"] = json::array({m});
    return d.dump();
  };
  const std::string small = long_merge(1 << 20), large = long_merge(4 << 20);
  const test::Cost a = test::measure([&] { Tokenizer::from_json(small, {}, "t.json"); }, 2);
  const test::Cost b = test::measure([&] { Tokenizer::from_json(large, {}, "t.json"); }, 2);
  ASSERT_FALSE(a.crashed || b.crashed);
  EXPECT_TRUE(b.threw);
  EXPECT_LT(b.error.size(), 300u) << "the merge is quoted short";
  EXPECT_LT(b.seconds, 8 * std::max(a.seconds, 0.02)) << a.seconds << " s -> " << b.seconds;
  EXPECT_LT(b.seconds, 5.0);
}

Tokenizer split_tokenizer(const std::string& regex) {
  json doc = test::tiny_bytelevel();
  doc["pre_tokenizer"] = {{"type", "Split"},
                          {"pattern", {{"Regex", regex}}},
                          {"behavior", "Isolated"},
                          {"invert", false}};
  return Tokenizer::from_json(doc.dump(), {}, "t.json");
}

// Finding 5: PCRE2's match limit is per match (and per start position), so `a*b|.` or
// `(a+)+b|.` on "aaaa…a!" did quadratic (or worse) total work. Now the total per encode is
// linear in the input, and an over-budget encode says so.
TEST(TokenizerHardening, RegexWorkPerEncodeIsLinear) {
  for (const char* pattern : {"a*b|.", "(a+)+b|.", "(a|aa)*c|."}) {
    const Tokenizer tok = split_tokenizer(pattern);
    const std::string small = std::string(64 << 10, 'a') + "!";
    const std::string large = std::string(256 << 10, 'a') + "!";
    const test::Cost a = test::measure([&] { tok.encode(small, false); }, 2);
    const test::Cost b = test::measure([&] { tok.encode(large, false); }, 2);
    ASSERT_FALSE(a.crashed || b.crashed) << pattern;
    EXPECT_LT(b.seconds, 8 * std::max(a.seconds, 0.02))
        << pattern << ": " << a.seconds << " s -> " << b.seconds;
    EXPECT_LT(b.seconds, 5.0) << pattern;
    if (b.threw) {
      EXPECT_NE(b.error.find("regex"), std::string::npos) << pattern << ": " << b.error;
    }
  }
}

// Long matches of ordinary patterns stay within the budget and match as before.
TEST(TokenizerHardening, LongMatchesOfOrdinaryPatternsStillWork) {
  const Tokenizer tok = split_tokenizer(R"(\s+(?!\S)|\s+|\p{L}+|.)");
  const std::string text = "a" + std::string(100000, ' ') + "b" + std::string(70000, 'x') + "\n";
  EXPECT_FALSE(tok.encode(text, false).empty());
  json doc = test::tiny_bytelevel();
  const Tokenizer plain = Tokenizer::from_json(doc.dump(), {}, "t.json");
  EXPECT_EQ(plain.encode("hello hello", false), plain.encode("hello hello", false));
}

// Finding 7: NUL ended tokenizer.json; the rest was ignored.
TEST(TokenizerHardening, NulIsRefused) {
  const std::string doc = test::tiny_sentencepiece().dump() + std::string(1, '\0') + "junk";
  try {
    Tokenizer::from_json(doc, {}, "t.json");
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("NUL byte"), std::string::npos) << e.what();
  }
  EXPECT_THROW(
      Tokenizer::from_json(test::tiny_sentencepiece().dump(), std::string("{}\0x", 4), "t.json"),
      Error);
}

// Finding 8: tokenizer.json / tokenizer_config.json symlinked out of the model directory were
// read, and a parse error echoed what they held.
TEST(TokenizerHardening, FilesMustResolveInsideTheDirectory) {
  const fs::path root =
      fs::temp_directory_path() / ("ceiling-tok-hard-" + std::to_string(getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "model");
  std::ofstream(root / "secret") << "root:$6$SECRET-HASH:19000";
  std::ofstream(root / "model/tokenizer.json") << test::tiny_sentencepiece().dump();
  fs::create_symlink(root / "secret", root / "model/tokenizer_config.json");
  try {
    Tokenizer::from_dir(root / "model");
    ADD_FAILURE() << "followed a link out of the model directory";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("outside the model directory"), std::string::npos) << m;
    EXPECT_EQ(m.find("SECRET"), std::string::npos) << m;
  }
  // Inside the directory, a malformed file's error still shows none of its bytes.
  fs::remove(root / "model/tokenizer_config.json");
  std::ofstream(root / "model/tokenizer_config.json") << "root:$6$SECRET-HASH:19000";
  try {
    Tokenizer::from_dir(root / "model");
    ADD_FAILURE() << "parsed";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("SECRET"), std::string::npos) << e.what();
  }
  fs::remove_all(root);
}

}  // namespace
}  // namespace ceiling
