#include "loadgen/sse.h"

#include "core/status.h"

namespace ceiling::loadgen {

void SseParser::feed(std::string_view bytes, const OnEvent& on_event) {
  for (const char c : bytes) {
    if (after_cr_) {
      after_cr_ = false;
      if (c == '\n') continue;  // CRLF: the line already ended at the CR
    }
    if (c == '\r' || c == '\n') {
      after_cr_ = c == '\r';
      end_line(on_event);
      continue;
    }
    CEILING_ENSURE(line_.size() < max_line_, "SSE line longer than {} bytes", max_line_);
    line_.push_back(c);
  }
}

void SseParser::finish(const OnEvent& on_event) {
  if (!line_.empty()) end_line(on_event);
  if (has_data_) on_event(data_);
  data_.clear();
  has_data_ = false;
}

void SseParser::end_line(const OnEvent& on_event) {
  if (line_.empty()) {  // blank line: dispatch the event
    if (has_data_) on_event(data_);
    data_.clear();
    has_data_ = false;
    return;
  }
  if (line_[0] != ':') {  // a comment otherwise
    const size_t colon = line_.find(':');
    const std::string_view field = std::string_view(line_).substr(0, colon);
    if (field == "data") {
      std::string_view value;
      if (colon != std::string::npos) {
        value = std::string_view(line_).substr(colon + 1);
        if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
      }
      if (has_data_) data_.push_back('\n');
      data_.append(value);
      has_data_ = true;
    }
  }
  line_.clear();
}

}  // namespace ceiling::loadgen
