#include "engine/stop_strings.h"

#include <gtest/gtest.h>

namespace ceiling::engine {
namespace {

// Feeds pieces and returns everything emitted (pushes + flush).
std::string run(std::vector<std::string> stops, const std::vector<std::string>& pieces,
                bool* stopped = nullptr) {
  StopStringMatcher m(std::move(stops));
  std::string out;
  for (const auto& p : pieces) out += m.push(p);
  out += m.flush();
  if (stopped) *stopped = m.stopped();
  return out;
}

TEST(StopStrings, NoStopsPassesEverythingThrough) {
  StopStringMatcher m({});
  EXPECT_EQ(m.push("abc"), "abc");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopStrings, StopInsideOnePieceCutsBeforeIt) {
  bool stopped = false;
  EXPECT_EQ(run({"END"}, {"hello END world"}, &stopped), "hello ");
  EXPECT_TRUE(stopped);
}

TEST(StopStrings, StopSpanningPiecesIsNeverEmittedPartially) {
  StopStringMatcher m({"</s>"});
  EXPECT_EQ(m.push("a<"), "a");  // "<" might start the stop string: held back
  EXPECT_EQ(m.push("/"), "");
  EXPECT_EQ(m.push("s"), "");
  EXPECT_EQ(m.push(">tail"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched(), "</s>");
  EXPECT_EQ(m.push("more"), "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopStrings, HeldBackPrefixIsReleasedWhenItStopsMatching) {
  StopStringMatcher m({"</s>"});
  EXPECT_EQ(m.push("x </"), "x ");
  EXPECT_EQ(m.push("b>"), "</b>");
  EXPECT_EQ(m.push("<"), "");
  EXPECT_EQ(m.flush(), "<");  // end of generation: held text is emitted
  EXPECT_FALSE(m.stopped());
}

TEST(StopStrings, EarliestMatchAmongSeveral) {
  EXPECT_EQ(run({"world", "lo w"}, {"hel", "lo wor", "ld"}), "hel");
  EXPECT_EQ(run({"ab", "abc"}, {"xab"}), "x");
  // Overlapping self-prefix: "aab" in "aaab".
  EXPECT_EQ(run({"aab"}, {"a", "a", "a", "b", "c"}), "a");
}

TEST(StopStrings, Utf8StopStrings) {
  EXPECT_EQ(run({"。"}, {"你好", "\xe3\x80", "\x82", "再见"}), "你好");
}

}  // namespace
}  // namespace ceiling::engine
