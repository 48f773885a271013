// UTF-8 helpers: strict validation, Rust/Python-compatible lossy decoding (one U+FFFD per maximal
// invalid subsequence), incomplete-tail detection, and the GPT-2 byte alphabet.
#include "tokenizer/utf8.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace ceiling::tok {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8, LossyMatchesPythonReplaceSemantics) {
  // Expected values are bytes.decode("utf-8", "replace") in CPython (same rule as Rust).
  const std::pair<std::string, std::string> cases[] = {
      {"", ""},
      {"abc", "abc"},
      {"\xE2\x82\xAC", "\xE2\x82\xAC"},
      {"\xE2\x82", kFffd},  // truncated 3-byte: one replacement
      {"\xE2\x82"
       "a",
       kFffd + "a"},
      {"\xF0\x9F\x98", kFffd},                  // truncated 4-byte
      {"\xC0\xAF", kFffd + kFffd},              // overlong lead C0 is never valid
      {"\xED\xA0\x80", kFffd + kFffd + kFffd},  // surrogate: ED then 2 stray continuations
      {"\xF4\x90\x80\x80", kFffd + kFffd + kFffd + kFffd},  // > U+10FFFF
      {"\x80\xBF", kFffd + kFffd},                          // stray continuations
      {"\xE0\x80\x80", kFffd + kFffd + kFffd},              // overlong 3-byte
      {"a\xFFz", "a" + kFffd + "z"},
      {"\xF0\x9F\x98\x80\xF0", "\xF0\x9F\x98\x80" + kFffd},
  };
  for (const auto& [in, want] : cases)
    EXPECT_EQ(utf8_lossy(in), want) << testing::PrintToString(in);
}

TEST(Utf8, FindInvalidAndIncompleteTail) {
  EXPECT_EQ(utf8_find_invalid("h\xC3\xA9llo \xF0\x9F\x98\x80"), std::string::npos);
  EXPECT_EQ(utf8_find_invalid("ab\xC3"), 2u);
  EXPECT_EQ(utf8_find_invalid("ab\xED\xA0\x80"), 2u);
  EXPECT_TRUE(utf8_ends_incomplete("x\xF0\x9F\x98"));
  EXPECT_TRUE(utf8_ends_incomplete("\xE2"));
  EXPECT_FALSE(utf8_ends_incomplete("x\xF0\x9F\x98\x80"));
  EXPECT_FALSE(utf8_ends_incomplete("\xE2\x41"));  // terminated: already final as U+FFFD A
  EXPECT_FALSE(utf8_ends_incomplete("\xC0"));      // can never complete
  EXPECT_FALSE(utf8_ends_incomplete(""));
}

TEST(Utf8, DecodeAppendRoundTripOnRandomCodePoints) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<uint32_t> any(0, 0x10FFFF);
  for (int i = 0; i < 20000; ++i) {
    char32_t c = any(rng);
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    std::string s;
    utf8_append(s, c);
    char32_t back = 0;
    ASSERT_EQ(utf8_decode(s, 0, &back), static_cast<int>(s.size()));
    ASSERT_EQ(back, c);
    ASSERT_EQ(utf8_lossy(s), s);
  }
}

TEST(Utf8, ByteAlphabetIsABijection) {
  const ByteAlphabet& a = byte_alphabet();
  std::set<std::string> seen;
  for (int b = 0; b < 256; ++b) {
    const std::string& sym = a.symbol(static_cast<uint8_t>(b));
    char32_t c = 0;
    ASSERT_EQ(utf8_decode(sym, 0, &c), static_cast<int>(sym.size()));
    EXPECT_EQ(a.byte_of(c), b);
    seen.insert(sym);
  }
  EXPECT_EQ(seen.size(), 256u);
  EXPECT_EQ(a.symbol(' '), "\xC4\xA0");   // 'Ġ'
  EXPECT_EQ(a.symbol('\n'), "\xC4\x8A");  // 'Ċ'
  EXPECT_EQ(a.byte_of(U'\u4e2d'), -1);
}

}  // namespace
}  // namespace ceiling::tok
