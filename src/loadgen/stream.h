// One streamed completion as the client sees it: the SSE events of the response body, in order,
// with the time each arrived, turned into a RequestResult (TTFT, inter-chunk gaps, usage, text,
// success or the error). No I/O here, so every rule is testable on its own.
//
// A content chunk is a chunk whose choices[0] carries output: completions' `text`, chat's
// `delta.content` or `delta.reasoning_content`. A chunk with empty text still counts (a token
// whose bytes the server holds back, a special token), except chat's opening role-only delta and
// a closing chunk that only carries finish_reason. A chunk with `usage` (the last one, under
// stream_options.include_usage) gives the token counts.
#pragma once

#include <chrono>
#include <string_view>

#include "loadgen/request.h"
#include "loadgen/result.h"

namespace ceiling::loadgen {

using Clock = std::chrono::steady_clock;

class StreamAccumulator {
 public:
  StreamAccumulator(Api api, RequestResult& out, Clock::time_point sent)
      : api_(api), r_(out), sent_(sent), last_(sent) {}

  // One event's data. Returns false once the stream is broken (malformed JSON, an error object):
  // the request has failed and the rest of the body is of no use.
  bool on_event(std::string_view data, Clock::time_point now);
  // Marks the request failed with `why` (one line, truncated); the first failure wins.
  void fail(std::string_view why);
  // The body ended at `now`: success when [DONE] came after at least one content chunk and
  // nothing failed.
  void finish(Clock::time_point now);

  bool done() const { return done_; }
  bool failed() const { return failed_; }

 private:
  double since_sent(Clock::time_point t) const {
    return std::chrono::duration<double>(t - sent_).count();
  }

  Api api_;
  RequestResult& r_;
  Clock::time_point sent_, last_;
  Clock::time_point done_at_{};
  int64_t events_ = 0;
  bool done_ = false, failed_ = false;
};

// `s` on one line, at most `max` bytes (for error messages taken from the network).
std::string one_line(std::string_view s, size_t max = 300);

}  // namespace ceiling::loadgen
