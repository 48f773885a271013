#include "tokenizer/template/lexer.h"

#include <charconv>
#include <cstring>

#include "core/status.h"
#include "tokenizer/template/unicode.h"

namespace ceiling::jinja {
namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_name_char(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}

// Python's `\s`: length of the whitespace code point at s[i], 0 when there is none.
size_t space_at(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return py_isspace(c) ? 1 : 0;
  size_t n = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
  if (i + n > s.size()) return 0;
  const auto cps = utf8_decode(s.substr(i, n));
  return cps.size() == 1 && py_isspace(cps[0]) ? n : 0;
}
size_t skip_space(std::string_view s, size_t i) {
  while (i < s.size()) {
    const size_t n = space_at(s, i);
    if (n == 0) break;
    i += n;
  }
  return i;
}
bool all_space(std::string_view s) {
  return !s.empty() && skip_space(s, 0) == s.size();
}
std::string_view rstrip_space(std::string_view s) {
  const auto cps = utf8_decode(s);
  size_t keep = cps.size();
  while (keep > 0 && py_isspace(cps[keep - 1])) --keep;
  return s.substr(0, utf8_encode(cps.substr(0, keep)).size());
}

// "\r\n", "\r" -> "\n"; then one trailing newline is dropped.
std::string normalize(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      out += '\n';
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      out += src[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : s_(std::move(src)) {}

  std::vector<Token> run() {
    while (pos_ < s_.size()) root();
    push(Tok::kEof, {}, pos_);
    return std::move(out_);
  }

 private:
  [[noreturn]] void error(size_t at, const std::string& msg) const {
    auto [line, col] = where(at);
    fail("line {} col {}: {}", line, col, msg);
  }
  std::pair<int, int> where(size_t at) const {
    int line = 1;
    size_t line_start = 0;
    for (size_t i = 0; i < at && i < s_.size(); ++i)
      if (s_[i] == '\n') ++line, line_start = i + 1;
    return {line, static_cast<int>(at - line_start) + 1};
  }
  Token& push(Tok t, std::string text, size_t at) {
    // Positions are computed incrementally: tokens arrive in source order.
    for (; scan_ < at && scan_ < s_.size(); ++scan_)
      if (s_[scan_] == '\n') ++line_, line_start_ = scan_ + 1;
    Token tok;
    tok.type = t;
    tok.text = std::move(text);
    tok.line = line_;
    tok.col = static_cast<int>(at - line_start_) + 1;
    out_.push_back(std::move(tok));
    return out_.back();
  }
  bool at(size_t i, std::string_view lit) const { return s_.compare(i, lit.size(), lit) == 0; }

  // Data up to the next tag, with lstrip_blocks / `-` applied to it, then the tag.
  void root() {
    size_t tag = s_.find('{', pos_);
    while (tag != std::string::npos && tag + 1 < s_.size() &&
           std::strchr("{%#", s_[tag + 1]) == nullptr)
      tag = s_.find('{', tag + 1);
    if (tag == std::string::npos || tag + 1 >= s_.size()) {
      push(Tok::kData, s_.substr(pos_), pos_);
      pos_ = s_.size();
      return;
    }
    const char kind = s_[tag + 1];
    const char sign =
        tag + 2 < s_.size() && (s_[tag + 2] == '-' || s_[tag + 2] == '+') ? s_[tag + 2] : 0;
    std::string_view text(s_.data() + pos_, tag - pos_);
    size_t raw_end = 0;
    const bool raw = kind == '%' && raw_begin(tag + 2 + (sign ? 1 : 0), raw_end);
    text = strip(text, sign, kind == '{');
    if (!text.empty()) push(Tok::kData, std::string(text), pos_);
    const size_t body = tag + 2 + (sign ? 1 : 0);
    line_starting_ = false;
    if (raw) {
      line_starting_ = s_[raw_end - 1] == '\n';
      raw_block(raw_end);
    } else if (kind == '#') {
      comment(tag, body);
    } else {
      tag_body(kind == '%', tag, body);
    }
  }

  std::string_view strip(std::string_view text, char sign, bool is_variable) const {
    if (sign == '-') return rstrip_space(text);
    if (sign == '+' || is_variable) return text;
    const size_t nl = text.rfind('\n');
    const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
    if ((l_pos > 0 || line_starting_) && all_space(text.substr(l_pos)))
      return text.substr(0, l_pos);
    return text;
  }

  // `{%[-+]\s*raw\s*(-%}\s*|%})` starting after the `{%` (and sign); sets `end` past it.
  bool raw_begin(size_t i, size_t& end) const {
    i = skip_space(s_, i);
    if (!at(i, "raw")) return false;
    i = skip_space(s_, i + 3);
    if (at(i, "-%}")) {
      end = skip_space(s_, i + 3);
      return true;
    }
    if (at(i, "%}")) {
      end = i + 2;
      return true;
    }
    return false;
  }

  void raw_block(size_t from) {
    for (size_t i = s_.find("{%", from); i != std::string::npos; i = s_.find("{%", i + 1)) {
      size_t j = i + 2;
      const char sign = j < s_.size() && (s_[j] == '-' || s_[j] == '+') ? s_[j] : 0;
      if (sign) ++j;
      j = skip_space(s_, j);
      if (!at(j, "endraw")) continue;
      j = skip_space(s_, j + 6);
      size_t end = 0;
      if (at(j, "+%}")) {
        end = j + 3;
      } else if (at(j, "-%}")) {
        end = skip_space(s_, j + 3);
      } else if (at(j, "%}")) {
        end = j + 2 + (j + 2 < s_.size() && s_[j + 2] == '\n');
      } else {
        continue;
      }
      const auto text = strip(std::string_view(s_).substr(from, i - from), sign, false);
      if (!text.empty()) push(Tok::kData, std::string(text), from);
      line_starting_ = s_[end - 1] == '\n';
      pos_ = end;
      return;
    }
    error(from, "missing end of raw directive");
  }

  void comment(size_t tag, size_t body) {
    for (size_t i = s_.find("#}", body); i != std::string::npos; i = s_.find("#}", i + 1)) {
      size_t end = i + 2;
      if (i > body && s_[i - 1] == '-') {
        end = skip_space(s_, end);
      } else if (!(i > body && s_[i - 1] == '+') && end < s_.size() && s_[end] == '\n') {
        ++end;
      }
      line_starting_ = s_[end - 1] == '\n';
      pos_ = end;
      return;
    }
    error(tag, "missing end of comment tag");
  }

  // Tokens of a `{{ }}` or `{% %}` tag up to its (bracket-balanced) end marker.
  void tag_body(bool block, size_t tag, size_t i) {
    push(block ? Tok::kBlockBegin : Tok::kVarBegin, {}, tag);
    std::string brackets;
    for (;;) {
      if (i >= s_.size())
        error(tag, block ? "missing end of block tag '%}'" : "missing end of '}}'");
      if (brackets.empty() && end_marker(block, i)) return;
      if (const size_t n = space_at(s_, i)) {
        i = skip_space(s_, i);
        line_starting_ = s_[i - 1] == '\n';
        continue;
      }
      line_starting_ = false;
      i = token(i, brackets);
    }
  }

  bool end_marker(bool block, size_t i) {
    const char* close = block ? "%}" : "}}";
    size_t end = 0;
    if (block && at(i, "+%}")) {
      end = i + 3;
    } else if (s_[i] == '-' && at(i + 1, close)) {
      end = skip_space(s_, i + 3);
    } else if (at(i, close)) {
      end = i + 2 + (block && i + 2 < s_.size() && s_[i + 2] == '\n');
    } else {
      return false;
    }
    push(block ? Tok::kBlockEnd : Tok::kVarEnd, {}, i);
    line_starting_ = s_[end - 1] == '\n';
    pos_ = end;
    return true;
  }

  size_t token(size_t i, std::string& brackets) {
    const char c = s_[i];
    try {
      if (is_digit(c)) {
        Token t;
        const size_t end = scan_number(s_, i, t);
        Token& pushed = push(t.type, std::move(t.text), i);
        pushed.ival = t.ival;
        pushed.fval = t.fval;
        return end;
      }
      if (c == '\'' || c == '"') {
        std::string value;
        const size_t end = scan_string(s_, i, value);
        push(Tok::kString, std::move(value), i);
        return end;
      }
    } catch (const LexError& e) {
      error(e.at, e.msg);
    }
    if (is_name_char(c)) {
      size_t j = i;
      while (j < s_.size() && is_name_char(s_[j])) ++j;
      auto name = s_.substr(i, j - i);
      for (unsigned char ch : name)
        if (ch >= 0x80) error(i, "invalid character in identifier");
      push(Tok::kName, std::move(name), i);
      return j;
    }
    static constexpr std::string_view kOps2[] = {"//", "**", "==", "!=", ">=", "<="};
    for (auto op : kOps2)
      if (at(i, op)) {
        push(Tok::kOp, std::string(op), i);
        return i + 2;
      }
    if (std::strchr("+-/*%~[](){}><=.:|,;", c) == nullptr || c == 0)
      error(i, fmt::format("unexpected character '{}'",
                           c == 0 ? std::string("\\0") : std::string(1, c)));
    if (c == '(' || c == '[' || c == '{') brackets += c == '(' ? ')' : c == '[' ? ']' : '}';
    if (c == ')' || c == ']' || c == '}') {
      if (brackets.empty()) error(i, fmt::format("unexpected '{}'", c));
      if (brackets.back() != c)
        error(i, fmt::format("unexpected '{}', expected '{}'", c, brackets.back()));
      brackets.pop_back();
    }
    push(Tok::kOp, std::string(1, c), i);
    return i + 1;
  }

  std::string s_;
  size_t pos_ = 0;
  bool line_starting_ = true;
  std::vector<Token> out_;
  size_t scan_ = 0, line_start_ = 0;
  int line_ = 1;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
  if (!utf8_valid(source)) fail("template is not valid UTF-8");
  return Lexer(normalize(source)).run();
}

}  // namespace ceiling::jinja
