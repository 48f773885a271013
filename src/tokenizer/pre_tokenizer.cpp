#include "tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <functional>

#include "tokenizer/punctuation_table.h"
#include "tokenizer/utf8.h"

namespace ceiling::tok {

void split_piece(const Piece& piece, std::vector<std::pair<Span, bool>> parts,
                 SplitBehavior behavior, bool invert, std::vector<Piece>& out) {
  if (invert) {
    for (auto& part : parts) part.second = !part.second;
  }
  // (span, remove) after applying the behavior.
  std::vector<std::pair<Span, bool>> splits;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      splits = std::move(parts);
      break;
    case SplitBehavior::kIsolated:
      for (const auto& [span, m] : parts) splits.push_back({span, false});
      break;
    case SplitBehavior::kContiguous:
      for (const auto& [span, m] : parts) {
        if (m == previous_match && !splits.empty()) {
          splits.back().first.end = span.end;
        } else {
          splits.push_back({span, false});
        }
        previous_match = m;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const auto& [span, m] : parts) {
        if (m && !previous_match && !splits.empty()) {
          splits.back().first.end = span.end;
        } else {
          splits.push_back({span, false});
        }
        previous_match = m;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->second && !previous_match && !splits.empty()) {
          splits.back().first.begin = it->first.begin;
        } else {
          splits.push_back({it->first, false});
        }
        previous_match = it->second;
      }
      std::reverse(splits.begin(), splits.end());
      break;
  }
  for (const auto& [span, remove] : splits) {
    if (remove || span.end == span.begin) continue;
    out.push_back(
        {piece.text.substr(span.begin, span.end - span.begin), piece.at_origin && span.begin == 0});
  }
}

namespace {

// Each character for which `pred` holds is one match (HF's `impl Pattern for Fn(char) -> bool`).
std::vector<std::pair<Span, bool>> char_matches(std::string_view s,
                                                const std::function<bool(char32_t)>& pred) {
  std::vector<std::pair<Span, bool>> parts;
  if (s.empty()) return {{{0, 0}, false}};
  std::size_t run = 0;
  for (std::size_t i = 0; i < s.size();) {
    char32_t c = 0;
    const int n = utf8_decode(s, i, &c);
    if (pred(c)) {
      if (run != i) parts.push_back({{run, i}, false});
      parts.push_back({{i, i + n}, true});
      run = i + n;
    }
    i += n;
  }
  if (run != s.size()) parts.push_back({{run, s.size()}, false});
  return parts;
}

template <typename F>
void split_all(std::vector<Piece>& pieces, F&& split_one) {
  std::vector<Piece> out;
  out.reserve(pieces.size());
  for (const Piece& piece : pieces) split_one(piece, out);
  pieces = std::move(out);
}

class Split final : public PreTokenizer {
 public:
  Split(SplitPattern pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void apply(std::vector<Piece>& pieces) const override {
    split_all(pieces, [&](const Piece& piece, std::vector<Piece>& out) {
      split_piece(piece, pattern_.find_matches(piece.text), behavior_, invert_, out);
    });
  }

 private:
  SplitPattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

// GPT-2's word regex, which ByteLevel applies when use_regex is set.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex) : add_prefix_space_(add_prefix_space) {
    if (use_regex) {
      regex_ = SplitPattern::regex(std::make_shared<Regex>(kGpt2Pattern, "ByteLevel"));
    }
  }
  void apply(std::vector<Piece>& pieces) const override {
    split_all(pieces, [&](const Piece& piece, std::vector<Piece>& out) {
      Piece p = piece;
      if (add_prefix_space_ && (p.text.empty() || p.text[0] != ' ')) p.text.insert(0, 1, ' ');
      if (regex_) {
        split_piece(p, regex_->find_matches(p.text), SplitBehavior::kIsolated, false, out);
      } else if (!p.text.empty()) {
        out.push_back(std::move(p));
      }
    });
    const ByteAlphabet& alphabet = byte_alphabet();
    for (Piece& p : pieces) {
      std::string mapped;
      mapped.reserve(p.text.size() * 2);
      for (unsigned char b : p.text) mapped += alphabet.symbol(b);
      p.text = std::move(mapped);
    }
  }

 private:
  bool add_prefix_space_;
  std::optional<SplitPattern> regex_;
};

enum class PrependScheme { kAlways, kFirst, kNever };

class Metaspace final : public PreTokenizer {
 public:
  Metaspace(char32_t replacement, PrependScheme scheme, bool split)
      : scheme_(scheme), split_(split) {
    utf8_append(replacement_, replacement);
  }
  void apply(std::vector<Piece>& pieces) const override {
    const SplitPattern space = SplitPattern::literal(" ");
    const SplitPattern meta = SplitPattern::literal(replacement_);
    split_all(pieces, [&](const Piece& piece, std::vector<Piece>& out) {
      Piece p{replace_all(piece.text, space, replacement_), piece.at_origin};
      const bool starts = p.text.starts_with(replacement_);
      if ((scheme_ == PrependScheme::kAlways && !starts) ||
          (scheme_ == PrependScheme::kFirst && !starts && p.at_origin)) {
        p.text.insert(0, replacement_);
      }
      if (split_) {
        split_piece(p, meta.find_matches(p.text), SplitBehavior::kMergedWithNext, false, out);
      } else if (!p.text.empty()) {
        out.push_back(std::move(p));
      }
    });
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
};

// Whitespace: \w+|[^\w\s]+ are the words, whitespace is dropped. WhitespaceSplit: split on
// whitespace only. Both by the Rust regex crate's Unicode classes.
class Whitespace final : public PreTokenizer {
 public:
  explicit Whitespace(bool words) : words_(words) {}
  void apply(std::vector<Piece>& pieces) const override {
    split_all(pieces, [&](const Piece& piece, std::vector<Piece>& out) {
      const std::string& s = piece.text;
      int prev_kind = 0;  // 0 space, 1 word, 2 other
      std::size_t start = 0;
      for (std::size_t i = 0; i <= s.size();) {
        int kind = 0;
        int n = 1;
        if (i < s.size()) {
          char32_t c = 0;
          n = utf8_decode(s, i, &c);
          kind = is_white_space(c) ? 0 : (!words_ || is_word_char(c)) ? 1 : 2;
        }
        if (i == s.size() || kind != prev_kind) {
          if (prev_kind != 0 && i > start) {
            out.push_back({s.substr(start, i - start), piece.at_origin && start == 0});
          }
          start = i;
          prev_kind = kind;
        }
        if (i == s.size()) break;
        i += n;
      }
    });
  }

 private:
  bool words_;
};

class CharSplit final : public PreTokenizer {
 public:
  CharSplit(std::function<bool(char32_t)> pred, SplitBehavior behavior)
      : pred_(std::move(pred)), behavior_(behavior) {}
  void apply(std::vector<Piece>& pieces) const override {
    split_all(pieces, [&](const Piece& piece, std::vector<Piece>& out) {
      split_piece(piece, char_matches(piece.text, pred_), behavior_, false, out);
    });
  }

 private:
  std::function<bool(char32_t)> pred_;
  SplitBehavior behavior_;
};

// What tokenizers calls punctuation: ASCII !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~, and its own
// (pre-Unicode 9) table above 0x7F — not utf8proc's current categories (punctuation_table.h).
bool is_punctuation(char32_t c) {
  if (c < 0x80)
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
           (c >= 0x7B && c <= 0x7E);
  const auto it = std::upper_bound(kHfPunctuation.begin(), kHfPunctuation.end(), c,
                                   [](char32_t v, const CodeRange& r) { return v < r.first; });
  return it != kHfPunctuation.begin() && c <= std::prev(it)->last;
}

class Sequence final : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> items) : items_(std::move(items)) {}
  void apply(std::vector<Piece>& pieces) const override {
    auto total = [&] {
      std::size_t n = 0;
      for (const Piece& p : pieces) n += p.text.size();
      return n;
    };
    const std::size_t in = total();
    for (const auto& item : items_) {
      item->apply(pieces);
      check_growth(in, total(), "pre_tokenizer");
    }
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> items_;
};

SplitBehavior parse_behavior(const Json& obj, const JsonPath& p, SplitBehavior dflt) {
  const auto name = json_opt_string(obj, "behavior", p);
  if (!name) return dflt;
  if (*name == "Removed") return SplitBehavior::kRemoved;
  if (*name == "Isolated") return SplitBehavior::kIsolated;
  if (*name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (*name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (*name == "Contiguous") return SplitBehavior::kContiguous;
  json_fail(p / "behavior", fmt::format("unknown split behavior \"{}\"", *name));
}

PrependScheme parse_prepend_scheme(const Json& j, const JsonPath& p) {
  if (const auto scheme = json_opt_string(j, "prepend_scheme", p)) {
    if (*scheme == "always") return PrependScheme::kAlways;
    if (*scheme == "first") return PrependScheme::kFirst;
    if (*scheme == "never") return PrependScheme::kNever;
    json_fail(p / "prepend_scheme", fmt::format("unknown prepend_scheme \"{}\"", *scheme));
  }
  // Files from before prepend_scheme existed say add_prefix_space instead.
  return json_opt_bool(j, "add_prefix_space", p, true) ? PrependScheme::kAlways
                                                       : PrependScheme::kNever;
}

}  // namespace

std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const Json& j, const JsonPath& p) {
  const std::string type = json_string(json_require(j, "type", p), p / "type");
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevel>(json_opt_bool(j, "add_prefix_space", p, true),
                                       json_opt_bool(j, "use_regex", p, true));
  }
  if (type == "Split") {
    return std::make_unique<Split>(parse_pattern(json_require(j, "pattern", p), p / "pattern"),
                                   parse_behavior(j, p, SplitBehavior::kRemoved),
                                   json_opt_bool(j, "invert", p, false));
  }
  if (type == "Metaspace") {
    const Json* rep = json_find(j, "replacement", p);
    const char32_t replacement = rep ? json_char(*rep, p / "replacement") : U'\u2581';
    return std::make_unique<Metaspace>(replacement, parse_prepend_scheme(j, p),
                                       json_opt_bool(j, "split", p, true));
  }
  if (type == "Whitespace") return std::make_unique<Whitespace>(true);
  if (type == "WhitespaceSplit") return std::make_unique<Whitespace>(false);
  if (type == "Digits") {
    const bool individual = json_opt_bool(j, "individual_digits", p, false);
    return std::make_unique<CharSplit>(
        is_numeric_char, individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous);
  }
  if (type == "Punctuation") {
    return std::make_unique<CharSplit>(is_punctuation,
                                       parse_behavior(j, p, SplitBehavior::kIsolated));
  }
  if (type == "Sequence") {
    const Json& list = json_require(j, "pretokenizers", p);
    if (!list.is_array()) json_fail(p / "pretokenizers", "expected an array");
    std::vector<std::unique_ptr<PreTokenizer>> items;
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (list[i].is_null()) continue;
      items.push_back(parse_pre_tokenizer(list[i], (p / "pretokenizers").at(i)));
    }
    return std::make_unique<Sequence>(std::move(items));
  }
  json_fail(p / "type", fmt::format("unsupported pre_tokenizer \"{}\"", type));
}

}  // namespace ceiling::tok
