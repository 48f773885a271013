// Incremental parser of a `text/event-stream` body, the subset OpenAI-compatible servers send:
// `data: <payload>` lines, an event ending at a blank line, `:` comments (keep-alives), other
// fields (event:, id:, retry:) ignored. Lines end with LF, CRLF or CR, and the bytes may arrive
// split anywhere (inside a line, between CR and LF). Not thread-safe: one parser per stream.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace ceiling::loadgen {

class SseParser {
 public:
  // Called with the data of each complete event (its data lines joined by '\n').
  using OnEvent = std::function<void(std::string_view data)>;

  explicit SseParser(size_t max_line_bytes = size_t{16} << 20) : max_line_(max_line_bytes) {}

  // Consumes `bytes`, calling `on_event` for every event they complete. Throws ceiling::Error
  // when a line grows past max_line_bytes (a stream that never ends its line).
  void feed(std::string_view bytes, const OnEvent& on_event);

  // End of the stream: an event whose blank line never came is still delivered (as vLLM's
  // client does for a final `data:` line).
  void finish(const OnEvent& on_event);

 private:
  void end_line(const OnEvent& on_event);

  size_t max_line_;
  std::string line_;  // the line under way, without its terminator
  std::string data_;  // the data of the event under way
  bool has_data_ = false;
  bool after_cr_ = false;  // the last byte was CR: an LF next is part of the same terminator
};

}  // namespace ceiling::loadgen
