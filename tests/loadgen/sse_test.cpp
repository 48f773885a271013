// SseParser: events from bytes split anywhere, CRLF / CR / LF, comments, multi-line data.
#include "loadgen/sse.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/status.h"

namespace ceiling::loadgen {
namespace {

// Feeds `body` in pieces of `step` bytes (0: all at once), then finishes.
std::vector<std::string> parse(const std::string& body, size_t step = 0) {
  SseParser p;
  std::vector<std::string> events;
  const auto on = [&](std::string_view d) { events.emplace_back(d); };
  if (step == 0) step = body.size() + 1;
  for (size_t i = 0; i < body.size(); i += step) p.feed(std::string_view(body).substr(i, step), on);
  p.finish(on);
  return events;
}

const std::string kStream =
    "data: {\"a\":1}\n\n"
    ": keep-alive\n\n"
    "event: message\r\ndata: {\"b\":2}\r\n\r\n"
    "data:{\"c\":3}\r\rdata: [DONE]\n\n";
const std::vector<std::string> kEvents = {"{\"a\":1}", "{\"b\":2}", "{\"c\":3}", "[DONE]"};

TEST(SseParser, WholeBody) {
  EXPECT_EQ(parse(kStream), kEvents);
}

TEST(SseParser, EverySplitPointGivesTheSameEvents) {
  for (size_t step = 1; step <= kStream.size(); ++step) {
    EXPECT_EQ(parse(kStream, step), kEvents) << "pieces of " << step << " bytes";
  }
  // Two cuts at every pair of positions (CR and LF in different pieces included).
  for (size_t a = 0; a <= kStream.size(); ++a) {
    for (size_t b = a; b <= kStream.size(); b += 7) {
      SseParser p;
      std::vector<std::string> ev;
      const auto on = [&](std::string_view d) { ev.emplace_back(d); };
      p.feed(std::string_view(kStream).substr(0, a), on);
      p.feed(std::string_view(kStream).substr(a, b - a), on);
      p.feed(std::string_view(kStream).substr(b), on);
      p.finish(on);
      ASSERT_EQ(ev, kEvents) << "cuts at " << a << ", " << b;
    }
  }
}

TEST(SseParser, MultiLineDataJoinsWithNewline) {
  EXPECT_EQ(parse("data: one\ndata: two\n\n"), (std::vector<std::string>{"one\ntwo"}));
}

TEST(SseParser, CommentsAndOtherFieldsAreNotEvents) {
  EXPECT_TRUE(parse(": ping\n\nid: 3\nretry: 10\n\n:\n\n").empty());
}

TEST(SseParser, LastEventWithoutBlankLineIsDeliveredAtFinish) {
  EXPECT_EQ(parse("data: [DONE]"), (std::vector<std::string>{"[DONE]"}));
  EXPECT_EQ(parse("data: x\n"), (std::vector<std::string>{"x"}));
}

TEST(SseParser, EmptyDataIsAnEvent) {
  EXPECT_EQ(parse("data\n\ndata:\n\n"), (std::vector<std::string>{"", ""}));
}

TEST(SseParser, OverlongLineThrows) {
  SseParser p(16);
  EXPECT_THROW(p.feed(std::string(100, 'x'), [](std::string_view) {}), Error);
}

}  // namespace
}  // namespace ceiling::loadgen
