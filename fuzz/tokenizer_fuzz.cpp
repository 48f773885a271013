// libFuzzer target for src/tokenizer.
//  * Input starting with '{' (or whitespace): a tokenizer.json. Loading must either succeed or
//    throw ceiling::Error; a loaded tokenizer must encode, decode and stream-decode without
//    crashing, and stream-decoding must add up to decode.
//  * Otherwise the first byte picks a real tokenizer and a use of the rest: encode it as text
//    (GPT-2 must round-trip exactly), or decode it as little-endian 16-bit ids (stream == full).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

using ceiling::StreamDecoder;
using ceiling::Tokenizer;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "tokenizer fuzz invariant broken: %s\n", what);
  std::abort();
}

void check_stream(const Tokenizer& t, const std::vector<int32_t>& ids) {
  for (bool skip : {false, true}) {
    const std::string full = t.decode(ids, skip);
    StreamDecoder sd(t, skip);
    std::string streamed;
    for (int32_t id : ids) streamed += sd.push(id);
    streamed += sd.flush();
    if (streamed != full) die("stream decode != decode");
    if (ceiling::tok::utf8_find_invalid(full) != std::string_view::npos)
      die("decode gave bad UTF-8");
  }
}

void exercise(const Tokenizer& t, std::string_view text) {
  std::vector<int32_t> ids;
  try {
    ids = t.encode(text, true);
  } catch (const ceiling::Error&) {
    if (ceiling::tok::utf8_find_invalid(text) == std::string_view::npos) die("valid text refused");
    return;
  }
  for (int32_t id : ids) {
    if (id < 0 || id >= t.vocab_size()) die("encode produced an id outside the vocab");
  }
  check_stream(t, ids);
}

struct Real {
  Tokenizer gpt2, llama;
};

const Real& real() {
  static const Real r{Tokenizer::from_dir(CEILING_DATA_DIR "/tokenizers/gpt2"),
                      Tokenizer::from_dir(CEILING_DATA_DIR "/tokenizers/tinyllama")};
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  real();  // load once, outside the timed iterations
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  if (!in.empty() && (in[0] == '{' || in[0] == ' ' || in[0] == '\n')) {
    std::optional<Tokenizer> t;
    try {
      t = Tokenizer::from_json(in);
    } catch (const ceiling::Error&) {
      return 0;
    }
    for (std::string_view text :
         {"", " ", "Hello world", " a  b\n\tc", "x<|endoftext|>y<s>",
          "\xC3\xA9 caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD 123", "\xF0\x9F\x98\x80!"}) {
      exercise(*t, text);
    }
    std::vector<int32_t> ids;
    for (int32_t id = -1; id <= std::min(t->vocab_size(), 300); ++id) ids.push_back(id);
    check_stream(*t, ids);
    return 0;
  }
  if (in.empty()) return 0;
  const Real& r = real();
  const Tokenizer& t = (in[0] & 1) ? r.llama : r.gpt2;
  const std::string_view rest = in.substr(1);
  if (in[0] & 2) {
    std::vector<int32_t> ids;
    for (std::size_t i = 0; i + 1 < rest.size(); i += 2) {
      const auto v = static_cast<int32_t>(static_cast<uint8_t>(rest[i]) |
                                          (static_cast<uint8_t>(rest[i + 1]) << 8));
      ids.push_back(v % (t.vocab_size() + 16));  // a few ids past the vocab: dropped
    }
    check_stream(t, ids);
    return 0;
  }
  exercise(t, rest);
  if (&t == &r.gpt2 && ceiling::tok::utf8_find_invalid(rest) == std::string_view::npos) {
    if (t.decode(t.encode(rest, false)) != rest) die("GPT-2 byte-level round trip");
  }
  return 0;
}
