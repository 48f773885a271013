// What the client measured for one request (times in seconds).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ceiling::loadgen {

struct RequestResult {
  bool success = false;
  std::string error;                 // why it failed, one line; empty on success
  double start_s = 0;                // when the request was sent, from the start of the benchmark
  double ttft_s = 0;                 // send -> first content chunk
  double e2el_s = 0;                 // send -> end of the stream (data: [DONE])
  std::vector<double> itl_s;         // gaps between successive content chunks
  int64_t content_chunks = 0;        // chunks that carried output (the fallback token count)
  int64_t usage_output_tokens = -1;  // usage.completion_tokens; -1 when the server sent none
  int64_t usage_prompt_tokens = -1;  // usage.prompt_tokens; -1 when the server sent none
  std::string text;                  // the generated text

  // Output tokens: the server's usage, else the number of content chunks.
  int64_t output_tokens() const {
    return usage_output_tokens >= 0 ? usage_output_tokens : content_chunks;
  }
};

}  // namespace ceiling::loadgen
