#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include <algorithm>

#include "core/file_read.h"
#include "core/status.h"
#include "tokenizer/json_util.h"
#include "tokenizer/utf8.h"

namespace ceiling::tok {

namespace {

// Oniguruma's \s is Unicode White_Space; PCRE2's also takes U+180E. Oniguruma's \w is
// Alphabetic + marks + decimal digits + connector punctuation; PCRE2 10.42's lacks the marks.
constexpr std::string_view kSpaceSet =
    "\\t\\n\\x0b\\f\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}"
    "\\x{205f}\\x{3000}";
constexpr std::string_view kWordSet = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}";

// Rewrites \s, \S, \w, \W to the Oniguruma sets (inside a class only the positive forms can be
// inlined; a negated one inside a class is left to PCRE2).
std::string rewrite_classes(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 64);
  bool in_class = false;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      const bool space = e == 's' || e == 'S', word = e == 'w' || e == 'W';
      if (space || word) {
        const std::string_view set = space ? kSpaceSet : kWordSet;
        const bool negated = e == 'S' || e == 'W';
        if (!in_class) {
          out += negated ? "[^" : "[";
          out += set;
          out += ']';
          ++i;
          continue;
        }
        if (!negated) {
          out += set;
          ++i;
          continue;
        }
      }
      out += c;
      out += e;
      ++i;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {
      const auto close = p.find(":]", i + 2);
      if (close != std::string_view::npos) {
        out.append(p.substr(i, close + 2 - i));
        i = close + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

constexpr uint32_t kMatchLimit = 10'000'000;  // bounds catastrophic backtracking in one match

// Total work of one find_all is linear in the subject. PCRE2's match limit counts backtracking
// per start position and not the characters a scan like `a*` passes over, so neither bounds a
// pattern that looks far ahead from every position (`a*b|.` on "aaaa…" is quadratic). Instead
// each attempt is anchored at one position and sees only a window of the subject, first
// kFirstWindow bytes, with a match limit of kStepsPerWindowByte per window byte; when it reaches
// the window's end (a hard partial match) or its step limit, the window doubles and it runs
// again. Every run is charged its window, against kWindowBytesPerByte per subject byte: a short
// match costs kFirstWindow, a long one at most 4 × its length, and the work of a run is linear
// in its window, so the total is linear in the subject.
constexpr size_t kFirstWindow = 32;
constexpr uint64_t kStepsPerWindowByte = 16;
constexpr uint64_t kWindowBytesPerByte = 128;
constexpr uint64_t kWindowBytesBase = 4096;

}  // namespace

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() { pcre2_code_free(code); }
};

Regex::Regex(std::string_view pattern, const std::string& what) : pattern_(pattern) {
  const std::string rewritten = rewrite_classes(pattern);
  int err = 0;
  PCRE2_SIZE off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten.data()), rewritten.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &off, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    fail("{}: bad regex /{}/: {} (at offset {})", what, pattern, reinterpret_cast<char*>(msg), off);
  }
  auto c = std::make_shared<Code>();
  c->code = code;
  c->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE | PCRE2_JIT_PARTIAL_HARD) == 0;
  code_ = std::move(c);
}

std::vector<Span> Regex::find_all(std::string_view s) const {
  std::vector<Span> out;
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
      pcre2_match_data_create_from_pattern(code_->code, nullptr), &pcre2_match_data_free);
  std::unique_ptr<pcre2_match_context, decltype(&pcre2_match_context_free)> mc(
      pcre2_match_context_create(nullptr), &pcre2_match_context_free);
  std::unique_ptr<pcre2_jit_stack, decltype(&pcre2_jit_stack_free)> stack(nullptr,
                                                                          &pcre2_jit_stack_free);
  if (!md || !mc) fail("regex /{}/: out of memory", pattern_);
  const uint64_t budget = kWindowBytesBase + kWindowBytesPerByte * uint64_t{s.size()};
  uint64_t spent = 0;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  std::size_t pos = 0;
  std::size_t window = kFirstWindow;
  while (pos <= s.size()) {
    // The window ends on a character boundary, or at the end of the subject (then no partial
    // matching: the run is the same as an unwindowed one).
    std::size_t end = s.size() - pos > window ? pos + window : s.size();
    while (end < s.size() && (static_cast<unsigned char>(s[end]) & 0xc0) == 0x80) ++end;
    const bool whole = end == s.size();
    spent += end - pos + 1;
    if (spent > budget)
      fail(
          "regex /{}/: over its work limit for {} bytes of input ({} + {} window bytes per "
          "byte; the pattern looks too far ahead or backtracks too much)",
          quote_text(pattern_, 80), s.size(), kWindowBytesBase, kWindowBytesPerByte);
    const uint64_t steps = std::min<uint64_t>(kMatchLimit, kStepsPerWindowByte * (window + 1));
    pcre2_set_match_limit(mc.get(), static_cast<uint32_t>(steps));
    // The input was validated once; PCRE2 need not re-check it at every start offset.
    const uint32_t opts =
        PCRE2_NO_UTF_CHECK | PCRE2_ANCHORED | (whole ? 0u : uint32_t{PCRE2_PARTIAL_HARD});
    const int rc = pcre2_match(code_->code, subject, end, pos, opts, md.get(), mc.get());
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !stack) {
      stack.reset(pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr));
      if (!stack) fail("regex /{}/: out of memory", quote_text(pattern_, 80));
      pcre2_jit_stack_assign(mc.get(), nullptr, stack.get());
      continue;
    }
    if (rc == PCRE2_ERROR_PARTIAL || (rc == PCRE2_ERROR_MATCHLIMIT && steps < kMatchLimit)) {
      window *= 2;
      continue;
    }
    if (rc == PCRE2_ERROR_MATCHLIMIT)
      fail("regex /{}/: one match took more than {} steps (catastrophic backtracking)",
           quote_text(pattern_, 80), kMatchLimit);
    window = kFirstWindow;
    if (rc == PCRE2_ERROR_NOMATCH) {  // nothing starts here: try the next character
      if (pos >= s.size()) break;
      pos += utf8_seq_len(static_cast<unsigned char>(s[pos]));
      continue;
    }
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof(msg));
      fail("regex /{}/: match failed: {}", quote_text(pattern_, 80), reinterpret_cast<char*>(msg));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    Span m{ov[0], ov[1]};
    if (m.end < m.begin) m.end = m.begin;  // \K tricks; treat as empty
    out.push_back(m);
    if (m.end > m.begin) {
      pos = m.end;
    } else {
      if (m.end >= s.size()) break;
      pos = m.end + utf8_seq_len(static_cast<unsigned char>(s[m.end]));
    }
  }
  return out;
}

std::vector<std::pair<Span, bool>> SplitPattern::find_matches(std::string_view s) const {
  std::vector<std::pair<Span, bool>> parts;
  if (s.empty()) {
    parts.push_back({{0, 0}, false});
    return parts;
  }
  std::vector<Span> matches;
  if (regex_ != nullptr) {
    matches = regex_->find_all(s);
  } else if (literal_.empty()) {
    // An empty pattern matches (emptily) before every character, splitting into characters.
    for (std::size_t i = 0; i < s.size(); i += utf8_seq_len(static_cast<unsigned char>(s[i]))) {
      matches.push_back({i, i});
    }
  } else {
    for (std::size_t at = s.find(literal_); at != std::string_view::npos;
         at = s.find(literal_, at + literal_.size())) {
      matches.push_back({at, at + literal_.size()});
    }
  }
  std::size_t prev = 0;
  for (const Span& m : matches) {
    if (m.begin < prev) continue;  // defensive: never overlap
    if (prev != m.begin) parts.push_back({{prev, m.begin}, false});
    parts.push_back({m, true});
    prev = m.end;
  }
  if (prev != s.size()) parts.push_back({{prev, s.size()}, false});
  return parts;
}

std::string replace_all(std::string_view s, const SplitPattern& pattern, std::string_view content) {
  std::string out;
  out.reserve(s.size());
  for (const auto& [span, is_match] : pattern.find_matches(s)) {
    if (is_match) {
      out += content;
    } else {
      out.append(s.substr(span.begin, span.end - span.begin));
    }
  }
  return out;
}

SplitPattern parse_pattern(const Json& j, const JsonPath& p) {
  if (const Json* lit = json_find(j, "String", p)) {
    return SplitPattern::literal(json_string(*lit, p / "String"));
  }
  if (const Json* re = json_find(j, "Regex", p)) {
    return SplitPattern::regex(std::make_shared<Regex>(json_string(*re, p / "Regex"), p.str()));
  }
  json_fail(p, "expected {\"String\": ...} or {\"Regex\": ...}");
}

}  // namespace ceiling::tok
