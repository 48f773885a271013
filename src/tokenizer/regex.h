// PCRE2 (UTF + UCP, JIT when available) behind a small, thread-safe interface: the compiled
// pattern is shared read-only; every search allocates its own match data.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ceiling::tok {

struct Span {
  std::size_t begin = 0, end = 0;
};

class Regex {
 public:
  // Compiles an Oniguruma-style pattern as HF tokenizers writes them (\p{L}, (?i:...), \s with
  // Unicode White_Space). Throws ceiling::Error naming `what` and PCRE2's reason.
  Regex(std::string_view pattern, const std::string& what);
  // Non-overlapping leftmost matches in `s` (valid UTF-8), like Rust's find_iter: after an empty
  // match the search resumes one character later. Time is linear in `s`: throws when one match
  // backtracks more than 10M steps, or all of them together pass the work limit of 4096 + 128
  // window bytes per byte of `s` (regex.cpp explains the windows).
  std::vector<Span> find_all(std::string_view s) const;
  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  std::string pattern_;
  std::shared_ptr<const Code> code_;
};

// HF's `Pattern`: a literal string, a regex, or a single character.
class SplitPattern {
 public:
  static SplitPattern literal(std::string s) { return SplitPattern(std::move(s), nullptr); }
  static SplitPattern regex(std::shared_ptr<const Regex> re) {
    return SplitPattern({}, std::move(re));
  }
  // Every part of `s` as (span, is_match), covering `s` in order; empty `s` gives one empty part.
  std::vector<std::pair<Span, bool>> find_matches(std::string_view s) const;
  bool is_literal() const { return regex_ == nullptr; }
  const std::string& literal_text() const { return literal_; }

 private:
  SplitPattern(std::string lit, std::shared_ptr<const Regex> re)
      : literal_(std::move(lit)), regex_(std::move(re)) {}
  std::string literal_;
  std::shared_ptr<const Regex> regex_;
};

// Replaces every match of `pattern` in `s` by `content` (HF Replace normalizer / decoder).
std::string replace_all(std::string_view s, const SplitPattern& pattern, std::string_view content);

}  // namespace ceiling::tok
