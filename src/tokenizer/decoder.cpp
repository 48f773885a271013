#include "tokenizer/decoder.h"

#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace ceiling::tok {

int byte_fallback_value(std::string_view t) {
  if (t.size() != 6 || !t.starts_with("<0x") || t.back() != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  const int lo = hex(t[4]);
  if (lo < 0) return -1;
  if (t[3] == '+') return lo;  // from_str_radix accepts a leading '+'
  const int hi = hex(t[3]);
  return hi < 0 ? -1 : hi * 16 + lo;
}

namespace {

constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

std::vector<char32_t> chars_of(std::string_view s) {
  std::vector<char32_t> out;
  for (std::size_t i = 0; i < s.size();) {
    char32_t c = 0;
    const int n = utf8_decode(s, i, &c);
    out.push_back(c);
    i += n;
  }
  return out;
}

std::string join(const std::vector<std::string>& tokens, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0) out += sep;
    out += tokens[i];
  }
  return out;
}

class ByteLevel final : public DecoderStage {
 public:
  void apply(std::vector<std::string>& tokens, DecodeState& st) const override {
    const ByteAlphabet& alphabet = byte_alphabet();
    std::string bytes;
    for (const std::string& t : tokens) {
      const std::size_t mark = bytes.size();
      bool mapped = true;
      for (std::size_t i = 0; i < t.size() && mapped;) {
        char32_t c = 0;
        const int n = utf8_decode(t, i, &c);
        const int b = alphabet.byte_of(c);
        if (b < 0)
          mapped = false;
        else
          bytes += static_cast<char>(b);
        i += n;
      }
      if (!mapped) bytes.replace(mark, std::string::npos, t);  // not byte symbols: raw UTF-8
    }
    st.cut_ok = st.cut_ok && !utf8_ends_incomplete(bytes);
    tokens.assign(1, utf8_lossy(bytes));
    st.joined = true;
  }
};

class ByteFallback final : public DecoderStage {
 public:
  void apply(std::vector<std::string>& tokens, DecodeState& st) const override {
    std::vector<std::string> out;
    std::string run;
    auto flush = [&] {
      if (run.empty()) return;
      if (utf8_find_invalid(run) == std::string::npos) {
        out.push_back(run);
      } else {
        for (std::size_t k = 0; k < run.size(); ++k) out.emplace_back(kReplacementChar);
      }
      run.clear();
    };
    bool last_is_byte = false;
    for (std::string& t : tokens) {
      const int b = byte_fallback_value(t);
      last_is_byte = b >= 0;
      if (last_is_byte) {
        run += static_cast<char>(b);
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    st.cut_ok = st.cut_ok && !last_is_byte;
    tokens = std::move(out);
  }
};

class Fuse final : public DecoderStage {
 public:
  void apply(std::vector<std::string>& tokens, DecodeState& st) const override {
    tokens.assign(1, join(tokens, ""));
    st.joined = true;
  }
};

class Strip final : public DecoderStage {
 public:
  Strip(char32_t content, std::size_t start, std::size_t stop)
      : content_(content), start_(start), stop_(stop) {}
  void apply(std::vector<std::string>& tokens, DecodeState& st) const override {
    for (std::string& t : tokens) {
      const std::vector<char32_t> chars = chars_of(t);
      std::size_t begin = 0, end = chars.size();
      if (!st.joined || st.at_start) {
        std::size_t k = 0;
        while (k < start_ && k < chars.size() && chars[k] == content_) ++k;
        begin = k;
        // Joined text at the stream start: the strip is settled only once a non-content char or
        // `start` chars have been seen.
        if (st.joined && k < start_ && k == chars.size()) st.cut_ok = false;
      }
      if (!st.joined || st.at_end) {
        std::size_t k = 0;
        while (k < stop_ && end > begin && chars[end - 1] == content_) {
          --end;
          ++k;
        }
      } else if (stop_ > 0 && !chars.empty() && chars.back() == content_) {
        st.cut_ok = false;  // might be stripped if the stream ends here
      }
      std::string out;
      for (std::size_t k = begin; k < end; ++k) utf8_append(out, chars[k]);
      t = std::move(out);
    }
  }

 private:
  char32_t content_;
  std::size_t start_, stop_;
};

class Replace final : public DecoderStage {
 public:
  Replace(SplitPattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void apply(std::vector<std::string>& tokens, DecodeState& st) const override {
    if (st.joined && !pattern_.is_literal()) {
      st.cut_ok = false;  // a regex match could straddle any cut: decode the stream whole
    } else if (st.joined && !tokens.empty()) {
      // A literal of several characters could straddle the cut: wait while the text ends with a
      // proper prefix of it.
      const std::string& lit = pattern_.literal_text();
      for (std::size_t k = 1; k < lit.size(); ++k) {
        if (tokens.back().ends_with(std::string_view(lit).substr(0, k))) st.cut_ok = false;
      }
    }
    for (std::string& t : tokens) t = replace_all(t, pattern_, content_);
  }

 private:
  SplitPattern pattern_;
  std::string content_;
};

class Metaspace final : public DecoderStage {
 public:
  Metaspace(char32_t replacement, bool drop_first)
      : replacement_(replacement), drop_first_(drop_first) {}
  void apply(std::vector<std::string>& tokens, DecodeState& st) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      // HF drops every replacement char of the stream's first token.
      const bool first = st.joined || (i == 0 && st.at_start);
      std::string out;
      for (char32_t c : chars_of(tokens[i])) {
        if (c != replacement_)
          utf8_append(out, c);
        else if (!(first && drop_first_))
          out += ' ';
      }
      tokens[i] = std::move(out);
    }
  }

 private:
  char32_t replacement_;
  bool drop_first_;
};

class WordPiece final : public DecoderStage {
 public:
  WordPiece(std::string prefix, bool cleanup) : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void apply(std::vector<std::string>& tokens, DecodeState& st) const override {
    if (cleanup_ && st.joined && !tokens.empty()) {
      // A cleanup pattern could straddle the cut: wait while the text ends with a prefix of one.
      for (const auto& rule : kRules) {
        for (std::size_t k = 1; k < rule.first.size(); ++k) {
          if (tokens.back().ends_with(rule.first.substr(0, k))) st.cut_ok = false;
        }
      }
    }
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      const bool first = st.joined || (i == 0 && st.at_start);
      if (!first) {
        if (t.starts_with(prefix_))
          t.erase(0, prefix_.size());
        else
          t.insert(0, 1, ' ');
      }
      if (cleanup_) t = cleanup(t);
    }
  }

 private:
  static constexpr std::pair<std::string_view, std::string_view> kRules[] = {
      {" .", "."},   {" ?", "?"},     {" !", "!"},    {" ,", ","},
      {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},  {" do not", " don't"},
      {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  static std::string cleanup(std::string s) {
    for (const auto& [from, to] : kRules) {
      s = replace_all(s, SplitPattern::literal(std::string(from)), to);
    }
    return s;
  }
  std::string prefix_;
  bool cleanup_;
};

class BpeSuffix final : public DecoderStage {
 public:
  explicit BpeSuffix(std::string suffix) : suffix_(std::move(suffix)) {}
  void apply(std::vector<std::string>& tokens, DecodeState& st) const override {
    const SplitPattern pat = SplitPattern::literal(suffix_);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      const bool last = st.joined || (i + 1 == tokens.size() && st.at_end);
      if (i + 1 == tokens.size() && !last && tokens[i].find(suffix_) != std::string::npos) {
        st.cut_ok = false;
      }
      tokens[i] = replace_all(tokens[i], pat, last ? "" : " ");
    }
  }

 private:
  std::string suffix_;
};

void parse_into(const Json& j, const JsonPath& p,
                std::vector<std::shared_ptr<const DecoderStage>>& out) {
  const std::string type = json_string(json_require(j, "type", p), p / "type");
  if (type == "Sequence") {
    const Json& list = json_require(j, "decoders", p);
    if (!list.is_array()) json_fail(p / "decoders", "expected an array");
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (!list[i].is_null()) parse_into(list[i], (p / "decoders").at(i), out);
    }
  } else if (type == "ByteLevel") {
    out.push_back(std::make_shared<ByteLevel>());
  } else if (type == "ByteFallback") {
    out.push_back(std::make_shared<ByteFallback>());
  } else if (type == "Fuse") {
    out.push_back(std::make_shared<Fuse>());
  } else if (type == "Strip") {
    const Json* content = json_find(j, "content", p);
    out.push_back(std::make_shared<Strip>(
        content ? json_char(*content, p / "content") : U' ',
        static_cast<std::size_t>(json_int(json_require(j, "start", p), p / "start", 0, 1 << 20)),
        static_cast<std::size_t>(json_int(json_require(j, "stop", p), p / "stop", 0, 1 << 20))));
  } else if (type == "Replace") {
    out.push_back(
        std::make_shared<Replace>(parse_pattern(json_require(j, "pattern", p), p / "pattern"),
                                  json_string(json_require(j, "content", p), p / "content")));
  } else if (type == "Metaspace") {
    const Json* rep = json_find(j, "replacement", p);
    bool drop_first = json_opt_bool(j, "add_prefix_space", p, true);
    if (const auto scheme = json_opt_string(j, "prepend_scheme", p)) {
      if (*scheme != "always" && *scheme != "first" && *scheme != "never") {
        json_fail(p / "prepend_scheme", fmt::format("unknown prepend_scheme \"{}\"", *scheme));
      }
      drop_first = *scheme != "never";
    }
    out.push_back(std::make_shared<Metaspace>(rep ? json_char(*rep, p / "replacement") : U'\u2581',
                                              drop_first));
  } else if (type == "WordPiece") {
    out.push_back(std::make_shared<WordPiece>(json_opt_string(j, "prefix", p).value_or("##"),
                                              json_opt_bool(j, "cleanup", p, true)));
  } else if (type == "BPEDecoder") {
    out.push_back(std::make_shared<BpeSuffix>(json_opt_string(j, "suffix", p).value_or("</w>")));
  } else {
    json_fail(p / "type", fmt::format("unsupported decoder \"{}\"", type));
  }
}

}  // namespace

DecoderChain DecoderChain::parse(const Json* j, const JsonPath& p) {
  DecoderChain chain;
  if (j == nullptr) return chain;
  chain.none_ = false;
  parse_into(*j, p, chain.stages_);
  return chain;
}

DecodeResult DecoderChain::decode(std::vector<std::string> tokens, bool at_start,
                                  bool at_end) const {
  if (none_) {
    // HF joins with spaces when there is no decoder; a later window continues after a space.
    std::string text = join(tokens, " ");
    if (!at_start && !tokens.empty()) text.insert(0, 1, ' ');
    return {std::move(text), true};
  }
  DecodeState st{at_start, at_end, false, true};
  auto total = [&] {
    std::size_t n = 0;
    for (const std::string& t : tokens) n += t.size();
    return n;
  };
  const std::size_t in = total();
  for (const auto& stage : stages_) {
    stage->apply(tokens, st);
    if (stages_.size() > 1) check_growth(in, total(), "decoder");
  }
  return {join(tokens, ""), st.cut_ok};
}

}  // namespace ceiling::tok
