// UTF-8 and the few Unicode properties Python's str methods need (isspace, isprintable, case).
// Strings stay UTF-8 everywhere; code-point views are built only where Python semantics count
// code points (len, slicing, indexing, case mapping). Invalid bytes decode to U+DC80+byte (as
// Python's "surrogateescape") and encode back to the same byte, so nothing is ever lost.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ceiling::jinja {

std::u32string utf8_decode(std::string_view s);
void utf8_append(std::string& out, char32_t cp);
// A code point computed from a number (escape, %c): surrogates become U+FFFD so the output
// stays valid UTF-8 (Python would carry a lone surrogate that cannot be encoded later).
inline char32_t scalar_or_replacement(uint32_t cp) {
  return (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF ? char32_t{0xFFFD} : char32_t{cp};
}
std::string utf8_encode(std::u32string_view cps);
bool utf8_valid(std::string_view s);
// Number of code points (Python len()).
size_t utf8_length(std::string_view s);

bool py_isspace(char32_t cp);      // str.isspace() / str.split() / str.strip()
bool py_isprintable(char32_t cp);  // repr() escapes what is not printable
bool py_islinebreak(char32_t cp);  // str.splitlines()

// Full case mapping for the scripts chat content realistically uses (Latin, Greek, Cyrillic,
// fullwidth); other code points map to themselves. Appends to `out`.
void py_upper(char32_t cp, std::u32string& out);
void py_lower(char32_t cp, std::u32string& out);
bool py_iscased_upper(char32_t cp);
bool py_iscased_lower(char32_t cp);

std::string str_upper(std::string_view s);
std::string str_lower(std::string_view s);

}  // namespace ceiling::jinja
