// Decoders of tokenizer.json ("decoder"): ByteLevel, ByteFallback, Fuse, Strip, Replace,
// Metaspace, WordPiece, BPEDecoder and Sequence, as a flat chain of stages over token strings.
//
// The chain can decode a window of a longer id stream (for StreamDecoder): `at_start` says the
// window begins the stream (first-token rules apply), `at_end` that it ends it (trailing rules
// apply), and the result's `cut_ok` says whether the stream may be cut after this window, i.e.
// decode(window ++ rest) == decode(window).text ++ decode(rest, at_start=false) for any rest
// (no half UTF-8 sequence, no open byte-fallback run, no pending Strip, ...). A regex Replace
// after the tokens were joined never allows a cut (exact, but then nothing streams before the end).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/json_util.h"

namespace ceiling::tok {

struct DecodeState {
  bool at_start = true;
  bool at_end = true;
  bool joined = false;  // the tokens were concatenated into one string (ByteLevel, Fuse)
  bool cut_ok = true;
};

class DecoderStage {
 public:
  virtual ~DecoderStage() = default;
  virtual void apply(std::vector<std::string>& tokens, DecodeState& st) const = 0;
};

struct DecodeResult {
  std::string text;
  bool cut_ok = true;
};

class DecoderChain {
 public:
  DecoderChain() = default;
  // `j` may be null: HF then joins the tokens with spaces.
  static DecoderChain parse(const Json* j, const JsonPath& p);
  DecodeResult decode(std::vector<std::string> tokens, bool at_start, bool at_end) const;

 private:
  std::vector<std::shared_ptr<const DecoderStage>> stages_;
  bool none_ = true;
};

// Rust's u8::from_str_radix(token[3..5], 16) for "<0xXX>" tokens; -1 when not a byte token.
int byte_fallback_value(std::string_view token);

}  // namespace ceiling::tok
