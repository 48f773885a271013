#include "tokenizer/utf8.h"

#include <utf8proc.h>

#include "core/status.h"

namespace ceiling::tok {

int utf8_seq_len(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 1;
}

namespace {

// Valid range of the second byte after `lead` (the first continuation byte is the one whose range
// depends on the lead: E0, ED, F0 and F4 exclude overlongs, surrogates and > U+10FFFF).
void second_byte_range(unsigned char lead, unsigned char* lo, unsigned char* hi) {
  *lo = 0x80;
  *hi = 0xBF;
  if (lead == 0xE0) *lo = 0xA0;
  if (lead == 0xED) *hi = 0x9F;
  if (lead == 0xF0) *lo = 0x90;
  if (lead == 0xF4) *hi = 0x8F;
}

// Length of the longest prefix at s[i] that is a valid start of a sequence (1..4); `complete`
// tells whether it is a whole sequence. A byte that cannot start a sequence gives 1, incomplete.
int valid_prefix(std::string_view s, std::size_t i, bool* complete) {
  const auto lead = static_cast<unsigned char>(s[i]);
  *complete = false;
  if (lead < 0x80) {
    *complete = true;
    return 1;
  }
  const int need = utf8_seq_len(lead);
  if (need == 1) return 1;  // continuation byte or C0/C1/F5..FF
  unsigned char lo, hi;
  second_byte_range(lead, &lo, &hi);
  int n = 1;
  for (; n < need && i + n < s.size(); ++n) {
    const auto b = static_cast<unsigned char>(s[i + n]);
    if (n == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) break;
  }
  *complete = n == need;
  return n;
}

}  // namespace

int utf8_decode(std::string_view s, std::size_t i, char32_t* cp) {
  bool complete = false;
  const int n = valid_prefix(s, i, &complete);
  if (!complete) return 0;
  const auto b0 = static_cast<unsigned char>(s[i]);
  char32_t c = n == 1 ? b0 : n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (int k = 1; k < n; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  *cp = c;
  return n;
}

void utf8_append(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

std::size_t utf8_find_invalid(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    bool complete = false;
    const int n = valid_prefix(s, i, &complete);
    if (!complete) return i;
    i += n;
  }
  return std::string_view::npos;
}

std::size_t utf8_length(std::string_view s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    bool complete = false;
    const int n = valid_prefix(s, i, &complete);
    if (complete) {
      out.append(s.substr(i, n));
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD for the maximal invalid subsequence
    }
    i += n;
  }
  return out;
}

bool utf8_ends_incomplete(std::string_view s) {
  // Only the last up-to-3 bytes can hold the start of an unfinished sequence.
  const std::size_t from = s.size() > 3 ? s.size() - 3 : 0;
  for (std::size_t i = from; i < s.size(); ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0xC2 || b > 0xF4) continue;
    bool complete = false;
    const int n = valid_prefix(s, i, &complete);
    if (!complete && i + n == s.size()) return true;
  }
  return false;
}

bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

bool is_word_char(char32_t c) {
  if (c < 0x80) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  }
  if (c == 0x200C || c == 0x200D) return true;  // Join_Control
  if (c >= 0x24B6 && c <= 0x24E9) return true;  // circled letters: So but Alphabetic
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

bool is_numeric_char(char32_t c) {
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

void check_growth(std::size_t in, std::size_t out, const char* what) {
  if (out > 64 * in + 65536)
    fail("{}: output grew from {} to {} bytes (more than 64x)", what, in, out);
}

ByteAlphabet::ByteAlphabet() {
  symbol_to_byte_.fill(-1);
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const char32_t c = printable ? static_cast<char32_t>(b) : next++;
    utf8_append(byte_to_symbol_[b], c);
    symbol_to_byte_[c] = static_cast<int16_t>(b);
  }
}

const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet alphabet;  // immutable table, built once
  return alphabet;
}

}  // namespace ceiling::tok
