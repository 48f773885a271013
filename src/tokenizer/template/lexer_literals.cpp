// Literal scanning for the lexer: Jinja's number and string token rules, and Python's
// "unicode-escape" decoding of string literals.
#include <charconv>
#include <cstring>

#include "core/status.h"
#include "tokenizer/template/lexer.h"
#include "tokenizer/template/unicode.h"

namespace ceiling::jinja {
namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

size_t digits(std::string_view s, size_t i, bool (*ok)(char)) {  // (\d+_)*\d+ style runs
  size_t j = i;
  while (j < s.size() && (ok(s[j]) || (s[j] == '_' && j > i && j + 1 < s.size() && ok(s[j + 1]))))
    ++j;
  return j;
}

// Python "unicode-escape" of the character(s) after a backslash at j-1; returns the last
// consumed index.
size_t escape(std::string_view s, size_t j, std::string& v) {
  const char c = s[j];
  auto hex = [&](size_t n, const char* what) {
    uint32_t cp = 0;
    for (size_t k = 1; k <= n; ++k) {
      const char h = j + k < s.size() ? s[j + k] : 0;
      const int d = is_digit(h)                              ? h - '0'
                    : (h | 0x20) >= 'a' && (h | 0x20) <= 'f' ? (h | 0x20) - 'a' + 10
                                                             : -1;
      if (d < 0) throw LexError{j - 1, fmt::format("truncated {} escape", what)};
      cp = cp * 16 + static_cast<uint32_t>(d);
    }
    if (cp > 0x10FFFF) throw LexError{j - 1, "illegal Unicode character"};
    utf8_append(v, scalar_or_replacement(cp));
    return j + n;
  };
  switch (c) {
    case '\n':
      return j;
    case '\\':
    case '\'':
    case '"':
      v += c;
      return j;
    case 'a':
      v += '\a';
      return j;
    case 'b':
      v += '\b';
      return j;
    case 'f':
      v += '\f';
      return j;
    case 'n':
      v += '\n';
      return j;
    case 'r':
      v += '\r';
      return j;
    case 't':
      v += '\t';
      return j;
    case 'v':
      v += '\v';
      return j;
    case 'x':
      return hex(2, "\\xXX");
    case 'u':
      return hex(4, "\\uXXXX");
    case 'U':
      return hex(8, "\\UXXXXXXXX");
    case 'N':
      throw LexError{j - 1, "\\N{...} escapes are not supported"};
    default:
      break;
  }
  if (c >= '0' && c <= '7') {
    uint32_t cp = 0;
    size_t k = j;
    for (; k < j + 3 && k < s.size() && s[k] >= '0' && s[k] <= '7'; ++k)
      cp = cp * 8 + static_cast<uint32_t>(s[k] - '0');
    utf8_append(v, scalar_or_replacement(cp));
    return k - 1;
  }
  if (static_cast<unsigned char>(c) >= 0x80) {
    // Jinja backslash-replaces non-ASCII text before unescaping: "\é" reads as "\\xe9".
    const auto lead = static_cast<unsigned char>(c);
    const size_t n = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
    const auto cp = static_cast<uint32_t>(utf8_decode(s.substr(j, n))[0]);
    v += cp <= 0xFF     ? fmt::format("\\x{:02x}", cp)
         : cp <= 0xFFFF ? fmt::format("\\u{:04x}", cp)
                        : fmt::format("\\U{:08x}", cp);
    return j + n - 1;
  }
  v += '\\';
  v += c;
  return j;
}

}  // namespace

size_t scan_number(std::string_view s, size_t i, Token& t) {
  auto dec = [](char ch) { return is_digit(ch); };
  size_t j = digits(s, i, dec);
  size_t k = j;
  bool is_float = false;
  if (i == 0 || s[i - 1] != '.') {  // a float never follows a '.'
    if (k + 1 < s.size() && s[k] == '.' && is_digit(s[k + 1]))
      k = digits(s, k + 1, dec), is_float = true;
    if (k < s.size() && (s[k] == 'e' || s[k] == 'E')) {
      size_t e = k + 1;
      if (e < s.size() && (s[e] == '+' || s[e] == '-')) ++e;
      if (e < s.size() && is_digit(s[e])) k = digits(s, e, dec), is_float = true;
    }
  }
  if (is_float) {
    std::string lit;
    for (size_t p = i; p < k; ++p)
      if (s[p] != '_') lit += s[p];
    t.type = Tok::kFloat;
    t.text = lit;
    std::from_chars(lit.data(), lit.data() + lit.size(), t.fval);
    return k;
  }
  int base = 10;
  size_t start = i;
  if (s[i] == '0' && i + 1 < s.size() && std::strchr("bBoOxX", s[i + 1]) && s[i + 1] != 0) {
    const char b = static_cast<char>(s[i + 1] | 0x20);
    base = b == 'b' ? 2 : b == 'o' ? 8 : 16;
    start = i + 2;
    j = start;
    auto ok = [&](char ch) {
      const int v = is_digit(ch)                               ? ch - '0'
                    : (ch | 0x20) >= 'a' && (ch | 0x20) <= 'f' ? (ch | 0x20) - 'a' + 10
                                                               : 99;
      return v < base;
    };
    while (j < s.size() && (ok(s[j]) || (s[j] == '_' && j + 1 < s.size() && ok(s[j + 1])))) ++j;
    if (j == start) throw LexError{i, "invalid integer literal"};
  } else if (s[i] == '0') {
    j = i + 1;  // "0(_?0)*": a leading zero ends the literal unless more zeros follow
    while (j < s.size() && (s[j] == '0' || (s[j] == '_' && j + 1 < s.size() && s[j + 1] == '0')))
      ++j;
  }
  std::string lit;
  for (size_t p = start; p < j; ++p)
    if (s[p] != '_') lit += s[p];
  t.type = Tok::kInt;
  t.text = std::string(s.substr(i, j - i));
  const auto r = std::from_chars(lit.data(), lit.data() + lit.size(), t.ival, base);
  if (r.ec != std::errc()) throw LexError{i, "integer literal out of range"};
  return j;
}

size_t scan_string(std::string_view s, size_t i, std::string& v) {
  const char q = s[i];
  size_t j = i + 1;
  for (; j < s.size() && s[j] != q; ++j) {
    if (s[j] != '\\') {
      v += s[j];
      continue;
    }
    if (++j >= s.size()) break;
    j = escape(s, j, v);
  }
  if (j >= s.size()) throw LexError{i, "unterminated string literal"};
  return j + 1;
}

}  // namespace ceiling::jinja
