#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <vector>

#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace ceiling::tok {

std::string unicode_normalize(std::string_view s, std::string_view form) {
  bool ascii = true;
  for (unsigned char c : s) ascii = ascii && c < 0x80;
  if (ascii) return std::string(s);  // every normal form leaves ASCII alone
  int options = UTF8PROC_STABLE;
  if (form == "NFC" || form == "NFKC") options |= UTF8PROC_COMPOSE;
  if (form == "NFD" || form == "NFKD") options |= UTF8PROC_DECOMPOSE;
  if (form == "NFKC" || form == "NFKD") options |= UTF8PROC_COMPAT;
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                          static_cast<utf8proc_ssize_t>(s.size()), &out,
                                          static_cast<utf8proc_option_t>(options));
  if (n < 0) fail("{} normalization failed: {}", form, utf8proc_errmsg(n));
  std::string result(reinterpret_cast<char*>(out), static_cast<std::size_t>(n));
  std::free(out);
  return result;
}

namespace {

template <typename F>
std::string map_chars(const std::string& s, F&& f) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    char32_t c = 0;
    const int n = utf8_decode(s, i, &c);
    f(c, out);
    i += n;
  }
  return out;
}

class UnicodeForm final : public Normalizer {
 public:
  explicit UnicodeForm(std::string form) : form_(std::move(form)) {}
  std::string normalize(std::string s) const override { return unicode_normalize(s, form_); }

 private:
  std::string form_;
};

// Rust's char::to_lowercase per character (no final-sigma context, as HF applies it per char).
class Lowercase final : public Normalizer {
 public:
  std::string normalize(std::string s) const override {
    return map_chars(s, [](char32_t c, std::string& out) {
      if (c == 0x130) {  // İ lowercases to i + combining dot above
        out += "i\xCC\x87";
        return;
      }
      utf8_append(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
    });
  }
};

// Drops every combining mark (Mn, Mc, Me), as HF's StripAccents does.
class StripAccents final : public Normalizer {
 public:
  std::string normalize(std::string s) const override {
    return map_chars(s, [](char32_t c, std::string& out) {
      const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
      if (cat != UTF8PROC_CATEGORY_MN && cat != UTF8PROC_CATEGORY_MC &&
          cat != UTF8PROC_CATEGORY_ME) {
        utf8_append(out, c);
      }
    });
  }
};

class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize(std::string s) const override {
    std::size_t b = 0, e = s.size();
    char32_t c = 0;
    while (left_ && b < e) {
      const int n = utf8_decode(s, b, &c);
      if (!is_white_space(c)) break;
      b += n;
    }
    while (right_ && e > b) {
      std::size_t k = e - 1;
      while (k > b && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
      utf8_decode(s, k, &c);
      if (!is_white_space(c)) break;
      e = k;
    }
    return s.substr(b, e - b);
  }

 private:
  bool left_, right_;
};

class Affix final : public Normalizer {
 public:
  Affix(std::string text, bool prepend) : text_(std::move(text)), prepend_(prepend) {}
  std::string normalize(std::string s) const override {
    if (s.empty()) return s;
    return prepend_ ? text_ + s : s + text_;
  }

 private:
  std::string text_;
  bool prepend_;
};

class Replace final : public Normalizer {
 public:
  Replace(SplitPattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::string normalize(std::string s) const override { return replace_all(s, pattern_, content_); }

 private:
  SplitPattern pattern_;
  std::string content_;
};

class Sequence final : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> items) : items_(std::move(items)) {}
  std::string normalize(std::string s) const override {
    const std::size_t in = s.size();
    for (const auto& n : items_) {
      s = n->normalize(std::move(s));
      check_growth(in, s.size(), "normalizer");
    }
    return s;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> items_;
};

}  // namespace

std::unique_ptr<Normalizer> parse_normalizer(const Json& j, const JsonPath& p) {
  const std::string type = json_string(json_require(j, "type", p), p / "type");
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    return std::make_unique<UnicodeForm>(type);
  }
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "StripAccents") return std::make_unique<StripAccents>();
  if (type == "Strip") {
    return std::make_unique<Strip>(json_opt_bool(j, "strip_left", p, true),
                                   json_opt_bool(j, "strip_right", p, true));
  }
  if (type == "Prepend" || type == "Append") {
    const char* key = type == "Prepend" ? "prepend" : "append";
    return std::make_unique<Affix>(json_string(json_require(j, key, p), p / key),
                                   type == "Prepend");
  }
  if (type == "Replace") {
    return std::make_unique<Replace>(parse_pattern(json_require(j, "pattern", p), p / "pattern"),
                                     json_string(json_require(j, "content", p), p / "content"));
  }
  if (type == "Sequence") {
    const Json& list = json_require(j, "normalizers", p);
    if (!list.is_array()) json_fail(p / "normalizers", "expected an array");
    std::vector<std::unique_ptr<Normalizer>> items;
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (list[i].is_null()) continue;
      items.push_back(parse_normalizer(list[i], (p / "normalizers").at(i)));
    }
    return std::make_unique<Sequence>(std::move(items));
  }
  json_fail(p / "type", fmt::format("unsupported normalizer \"{}\"", type));
}

}  // namespace ceiling::tok
