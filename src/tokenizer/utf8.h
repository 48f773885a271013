// UTF-8 helpers for the tokenizer: strict decoding, Rust-compatible lossy decoding (what HF's
// decoders produce for invalid bytes), Unicode character classes used by the pre-tokenizers and
// added-token rules, and the GPT-2 byte <-> symbol alphabet of byte-level BPE.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ceiling::tok {

// Decodes the code point at s[i] (strict UTF-8: no overlongs, surrogates or values > U+10FFFF).
// Returns its length in bytes, or 0 when the bytes at i are not a complete valid sequence.
int utf8_decode(std::string_view s, std::size_t i, char32_t* cp);
void utf8_append(std::string& out, char32_t cp);
// Byte offset of the first invalid sequence, or npos when `s` is valid UTF-8.
std::size_t utf8_find_invalid(std::string_view s);
// Length of the UTF-8 sequence starting with byte `lead` (1 for continuation/invalid bytes).
int utf8_seq_len(unsigned char lead);
// Number of code points (s must be valid).
std::size_t utf8_length(std::string_view s);

// Like Rust's String::from_utf8_lossy: each maximal invalid subsequence becomes one U+FFFD.
std::string utf8_lossy(std::string_view bytes);
// True when `bytes` ends inside a sequence that more bytes could still complete (so a lossy
// decode of it would change once more bytes arrive).
bool utf8_ends_incomplete(std::string_view bytes);

// Unicode classes (as Rust's char methods and regex crate define them, closely enough for
// tokenizers: White_Space, and \w = letters, marks, decimal digits, connector punctuation).
bool is_white_space(char32_t c);
bool is_word_char(char32_t c);
bool is_numeric_char(char32_t c);  // Unicode N* categories (Rust char::is_numeric)

// Guards Sequence stages against runaway growth (e.g. a chain of Replace steps that each double
// the text): throws ceiling::Error when `out` exceeds 64 x `in` + 64 KiB.
void check_growth(std::size_t in, std::size_t out, const char* what);

// GPT-2's reversible byte <-> printable-symbol map used by ByteLevel pre-tokenizer and decoder.
class ByteAlphabet {
 public:
  ByteAlphabet();
  // The UTF-8 of the symbol that stands for byte b.
  const std::string& symbol(uint8_t b) const { return byte_to_symbol_[b]; }
  // The byte a symbol stands for, or -1 when `c` is not one of the 256 symbols.
  int byte_of(char32_t c) const { return c < kTableSize ? symbol_to_byte_[c] : -1; }

 private:
  static constexpr char32_t kTableSize = 324;
  std::array<std::string, 256> byte_to_symbol_;
  std::array<int16_t, kTableSize> symbol_to_byte_;
};
const ByteAlphabet& byte_alphabet();

}  // namespace ceiling::tok
