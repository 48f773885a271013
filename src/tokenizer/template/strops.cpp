#include "tokenizer/template/strops.h"

#include <algorithm>

#include "tokenizer/template/unicode.h"

namespace ceiling::jinja {

std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right) {
  const auto cps = utf8_decode(s);
  std::u32string set;
  if (chars) set = utf8_decode(*chars);
  auto strip_it = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : py_isspace(c);
  };
  size_t lo = 0, hi = cps.size();
  if (left)
    while (lo < hi && strip_it(cps[lo])) ++lo;
  if (right)
    while (hi > lo && strip_it(cps[hi - 1])) --hi;
  return utf8_encode(std::u32string_view(cps).substr(lo, hi - lo));
}

std::vector<std::string> py_split(std::string_view s, const std::string* sep, int64_t maxsplit,
                                  bool from_right) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) fail("empty separator");
    std::vector<std::string_view> parts;
    if (!from_right) {
      size_t start = 0;
      for (;;) {
        const size_t at = maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit
                              ? s.find(*sep, start)
                              : std::string_view::npos;
        if (at == std::string_view::npos) break;
        parts.push_back(s.substr(start, at - start));
        start = at + sep->size();
      }
      parts.push_back(s.substr(start));
    } else {
      size_t end = s.size();
      for (;;) {
        if (!(maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) || end < sep->size())
          break;
        const size_t at = s.rfind(*sep, end - sep->size());
        if (at == std::string_view::npos) break;
        parts.push_back(s.substr(at + sep->size(), end - at - sep->size()));
        end = at;
      }
      parts.push_back(s.substr(0, end));
      std::reverse(parts.begin(), parts.end());
    }
    for (auto p : parts) out.emplace_back(p);
    return out;
  }
  const auto cps = utf8_decode(s);
  std::vector<std::pair<size_t, size_t>> words;  // [begin, end) in code points
  const size_t n = cps.size();
  if (!from_right) {
    size_t i = 0;
    while (i < n) {
      while (i < n && py_isspace(cps[i])) ++i;
      if (i == n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(words.size()) == maxsplit) {
        size_t end = n;
        while (end > i && py_isspace(cps[end - 1])) --end;
        words.emplace_back(i, end);
        break;
      }
      size_t j = i;
      while (j < n && !py_isspace(cps[j])) ++j;
      words.emplace_back(i, j);
      i = j;
    }
  } else {
    size_t i = n;
    while (i > 0) {
      while (i > 0 && py_isspace(cps[i - 1])) --i;
      if (i == 0) break;
      if (maxsplit >= 0 && static_cast<int64_t>(words.size()) == maxsplit) {
        size_t b = 0;
        while (b < i && py_isspace(cps[b])) ++b;
        words.emplace_back(b, i);
        break;
      }
      size_t j = i;
      while (j > 0 && !py_isspace(cps[j - 1])) --j;
      words.emplace_back(j, i);
      i = j;
    }
    std::reverse(words.begin(), words.end());
  }
  for (auto [b, e] : words) out.push_back(utf8_encode(std::u32string_view(cps).substr(b, e - b)));
  return out;
}

std::vector<std::string> py_splitlines(std::string_view s, bool keepends) {
  const auto cps = utf8_decode(s);
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    if (!py_islinebreak(cps[i])) continue;
    size_t end = i + 1;
    if (cps[i] == '\r' && end < cps.size() && cps[end] == '\n') ++end;
    out.push_back(
        utf8_encode(std::u32string_view(cps).substr(start, (keepends ? end : i) - start)));
    start = end;
    i = end - 1;
  }
  if (start < cps.size()) out.push_back(utf8_encode(std::u32string_view(cps).substr(start)));
  return out;
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view repl,
                       int64_t count, Budget& b) {
  std::string out;
  int64_t done = 0;
  auto room = [&] { return count < 0 || done < count; };
  if (old.empty()) {  // Python inserts `repl` around every code point
    const auto cps = utf8_decode(s);
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (room()) out += repl, ++done;
      if (i < cps.size()) utf8_append(out, cps[i]);
      b.check_size(out.size());
    }
    b.charge(out.size());
    return out;
  }
  size_t start = 0;
  for (size_t at = s.find(old); at != std::string_view::npos && room(); at = s.find(old, start)) {
    out.append(s.substr(start, at - start));
    out.append(repl);
    b.check_size(out.size());
    start = at + old.size();
    ++done;
  }
  out.append(s.substr(start));
  b.check_size(out.size());
  b.charge(out.size() + s.size());
  b.alloc_bytes(out.size());
  return out;
}

namespace {
// Title case differs from upper case for a few letters (ß -> Ss).
void py_titlecase(char32_t c, std::u32string& out) {
  if (c == 0xDF) return void(out.append(U"Ss"));
  py_upper(c, out);
}
}  // namespace

std::string py_capitalize(std::string_view s) {
  const auto cps = utf8_decode(s);
  std::u32string out;
  for (size_t i = 0; i < cps.size(); ++i) (i == 0 ? py_titlecase : py_lower)(cps[i], out);
  return utf8_encode(out);
}

std::string py_title(std::string_view s) {
  std::u32string out;
  bool prev_cased = false;
  for (char32_t c : utf8_decode(s)) {
    (prev_cased ? py_lower : py_titlecase)(c, out);
    prev_cased = py_iscased_upper(c) || py_iscased_lower(c);
  }
  return utf8_encode(out);
}

std::string jinja_title(std::string_view s) {
  // Words start after runs of [-\s({\[<]; each word is w[0].upper() + w[1:].lower().
  std::u32string out;
  bool word_start = true;
  for (char32_t c : utf8_decode(s)) {
    const bool sep = py_isspace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (sep) {
      out.push_back(c);
      word_start = true;
      continue;
    }
    (word_start ? py_upper : py_lower)(c, out);
    word_start = false;
  }
  return utf8_encode(out);
}

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

int64_t py_find(std::string_view s, std::string_view sub, bool last) {
  const size_t at = last ? s.rfind(sub) : s.find(sub);
  if (at == std::string_view::npos) return -1;
  return static_cast<int64_t>(utf8_length(s.substr(0, at)));
}

int64_t py_count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(utf8_length(s)) + 1;
  int64_t n = 0;
  for (size_t at = s.find(sub); at != std::string_view::npos; at = s.find(sub, at + sub.size()))
    ++n;
  return n;
}

std::string py_pad(std::string_view s, int64_t width, std::string_view fill, char align,
                   Budget& b) {
  const auto len = static_cast<int64_t>(utf8_length(s));
  if (width <= len) return std::string(s);
  if (utf8_length(fill) != 1) fail("The fill character must be exactly one character long");
  const auto total = static_cast<uint64_t>(width - len);
  b.check_size(total);
  b.check_size(s.size() + total * fill.size());
  b.charge(total);
  b.alloc_bytes(s.size() + total * fill.size());
  uint64_t left = 0;
  if (align == '>') left = total;
  if (align == '^') left = total / 2 + (total & static_cast<uint64_t>(width) & 1);
  std::string out;
  for (uint64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (uint64_t i = left; i < total; ++i) out += fill;
  return out;
}

}  // namespace ceiling::jinja
