#include "tokenizer/template/unicode.h"

namespace ceiling::jinja {
namespace {

constexpr char32_t kEscapeBase = 0xDC80;  // invalid byte b decodes to kEscapeBase + (b - 0x80)

// Length of the valid UTF-8 sequence at s[i], or 0 when the bytes there are not one.
size_t seq_len(std::string_view s, size_t i, char32_t& cp) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  size_t n = 0;
  char32_t min = 0;
  if ((b0 & 0xE0) == 0xC0) {
    n = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

// Latin Extended-A (U+0100..U+017F) pairs: returns true when `cp` is the upper-case member.
bool latin_ext_a_is_upper(char32_t cp) {
  if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E)) return cp % 2 == 1;
  return cp % 2 == 0;
}
bool latin_ext_a_paired(char32_t cp) {
  return cp >= 0x100 && cp <= 0x17E && cp != 0x130 && cp != 0x131 && cp != 0x138 && cp != 0x149 &&
         cp != 0x178;
}

}  // namespace

std::u32string utf8_decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    const size_t n = seq_len(s, i, cp);
    if (n == 0) {
      out.push_back(kEscapeBase + (static_cast<unsigned char>(s[i]) - 0x80));
      ++i;
    } else {
      out.push_back(cp);
      i += n;
    }
  }
  return out;
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp >= kEscapeBase && cp < kEscapeBase + 0x80) {
    out.push_back(static_cast<char>(cp - kEscapeBase + 0x80));
  } else if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string utf8_encode(std::u32string_view cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) utf8_append(out, cp);
  return out;
}

bool utf8_valid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    const size_t n = seq_len(s, i, cp);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    const size_t k = seq_len(s, i, cp);
    i += k == 0 ? 1 : k;
    ++n;
  }
  return n;
}

bool py_isspace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

bool py_islinebreak(char32_t c) {
  return (c >= 0x0A && c <= 0x0D) || (c >= 0x1C && c <= 0x1E) || c == 0x85 || c == 0x2028 ||
         c == 0x2029;
}

bool py_isprintable(char32_t c) {
  if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return false;
  if (c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F)) return false;
  if ((c >= 0x205F && c <= 0x206F) || c == 0x3000 || c == 0xFEFF) return false;
  if ((c >= 0xD800 && c <= 0xF8FF) || (c >= 0xFFF0 && c <= 0xFFFB) || c > 0x10FFFF) return false;
  if (c >= 0xF0000) return false;  // private use planes
  return true;
}

bool py_iscased_upper(char32_t c) {
  if (c >= 'A' && c <= 'Z') return true;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return true;
  if (latin_ext_a_paired(c)) return latin_ext_a_is_upper(c);
  if (c == 0x130 || c == 0x178) return true;
  if (c == 0x386 || (c >= 0x388 && c <= 0x38F && c != 0x38B && c != 0x38D)) return true;
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return true;
  if (c >= 0x400 && c <= 0x42F) return true;
  return c >= 0xFF21 && c <= 0xFF3A;
}

bool py_iscased_lower(char32_t c) {
  if (c >= 'a' && c <= 'z') return true;
  if (c == 0xB5 || (c >= 0xDF && c <= 0xFF && c != 0xF7)) return true;
  if (latin_ext_a_paired(c)) return !latin_ext_a_is_upper(c);
  if (c == 0x131 || c == 0x138 || c == 0x149 || c == 0x17F) return true;
  if (c >= 0x3AC && c <= 0x3CE) return true;
  if (c >= 0x430 && c <= 0x45F) return true;
  return c >= 0xFF41 && c <= 0xFF5A;
}

void py_upper(char32_t c, std::u32string& out) {
  if (c >= 'a' && c <= 'z') return out.push_back(c - 32);
  if (c < 0x80) return out.push_back(c);
  if (c == 0xDF) return void(out.append(U"SS"));
  if (c == 0xB5) return out.push_back(0x39C);
  if (c == 0xFF) return out.push_back(0x178);
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return out.push_back(c - 32);
  if (latin_ext_a_paired(c)) return out.push_back(latin_ext_a_is_upper(c) ? c : c - 1);
  if (c == 0x131) return out.push_back('I');
  if (c == 0x149) return void(out.append(U"\u02BCN"));
  if (c == 0x17F) return out.push_back('S');
  if (c == 0x3C2) return out.push_back(0x3A3);
  if (c >= 0x3B1 && c <= 0x3C9) return out.push_back(c - 32);
  if (c == 0x3AC) return out.push_back(0x386);
  if (c >= 0x3AD && c <= 0x3AF) return out.push_back(c - 37);
  if (c == 0x3CC) return out.push_back(0x38C);
  if (c == 0x3CD || c == 0x3CE) return out.push_back(c - 63);
  if (c >= 0x430 && c <= 0x44F) return out.push_back(c - 32);
  if (c >= 0x450 && c <= 0x45F) return out.push_back(c - 80);
  if (c >= 0xFF41 && c <= 0xFF5A) return out.push_back(c - 32);
  out.push_back(c);
}

void py_lower(char32_t c, std::u32string& out) {
  if (c >= 'A' && c <= 'Z') return out.push_back(c + 32);
  if (c < 0x80) return out.push_back(c);
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return out.push_back(c + 32);
  if (latin_ext_a_paired(c)) return out.push_back(latin_ext_a_is_upper(c) ? c + 1 : c);
  if (c == 0x130) return void(out.append(U"i\u0307"));
  if (c == 0x178) return out.push_back(0xFF);
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return out.push_back(c + 32);
  if (c == 0x386) return out.push_back(0x3AC);
  if (c >= 0x388 && c <= 0x38A) return out.push_back(c + 37);
  if (c == 0x38C) return out.push_back(0x3CC);
  if (c == 0x38E || c == 0x38F) return out.push_back(c + 63);
  if (c >= 0x410 && c <= 0x42F) return out.push_back(c + 32);
  if (c >= 0x400 && c <= 0x40F) return out.push_back(c + 80);
  if (c >= 0xFF21 && c <= 0xFF3A) return out.push_back(c + 32);
  out.push_back(c);
}

std::string str_upper(std::string_view s) {
  std::u32string out;
  for (char32_t c : utf8_decode(s)) py_upper(c, out);
  return utf8_encode(out);
}

std::string str_lower(std::string_view s) {
  std::u32string out;
  for (char32_t c : utf8_decode(s)) py_lower(c, out);
  return utf8_encode(out);
}

}  // namespace ceiling::jinja
