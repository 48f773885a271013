#include "tokenizer/template/pyformat.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>

#include "tokenizer/template/unicode.h"

namespace ceiling::jinja {

std::string py_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  // Shortest round-trip digits, then Python's layout: fixed for 1e-4 <= |d| < 1e16.
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));
  std::string out;
  if (sci.front() == '-') {
    out += '-';
    sci.remove_prefix(1);
  }
  const size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos))
    if (c != '.') digits += c;
  int exp10 = 0;
  std::from_chars(sci.data() + e_pos + 1 + (sci[e_pos + 1] == '+'), sci.data() + sci.size(), exp10);
  const int decpt = exp10 + 1;
  const int nd = static_cast<int>(digits.size());
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (nd > 1) out += '.' + digits.substr(1);
    out += fmt::format("e{}{:02d}", exp10 < 0 ? '-' : '+', std::abs(exp10));
  } else if (decpt <= 0) {
    out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
  } else if (decpt >= nd) {
    out += digits + std::string(static_cast<size_t>(decpt - nd), '0') + ".0";
  } else {
    out += digits.substr(0, static_cast<size_t>(decpt)) + '.' +
           digits.substr(static_cast<size_t>(decpt));
  }
  return out;
}

void py_string_repr(std::string_view s, std::string& out) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  out += quote;
  for (char32_t c : utf8_decode(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", static_cast<uint32_t>(c));
    } else if (c < 0x7F || py_isprintable(c)) {
      utf8_append(out, c);
    } else if (c <= 0xFF) {
      out += fmt::format("\\x{:02x}", static_cast<uint32_t>(c));
    } else if (c <= 0xFFFF) {
      out += fmt::format("\\u{:04x}", static_cast<uint32_t>(c));
    } else {
      out += fmt::format("\\U{:08x}", static_cast<uint32_t>(c));
    }
  }
  out += quote;
}

namespace {

void json_string(std::string_view s, bool ensure_ascii, std::string& out) {
  out += '"';
  for (char32_t c : utf8_decode(s)) {
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (c < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<uint32_t>(c));
    } else if (ensure_ascii && c > 0x7F) {
      if (c >= 0x10000) {
        const uint32_t v = static_cast<uint32_t>(c) - 0x10000;
        out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      } else {
        out += fmt::format("\\u{:04x}", static_cast<uint32_t>(c));
      }
    } else {
      utf8_append(out, c);
    }
  }
  out += '"';
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return py_float_repr(d);
}

std::string json_key(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::kString:
      return k.as_string();
    case Value::Kind::kNone:
      return "null";
    case Value::Kind::kBool:
      return k.as_bool() ? "true" : "false";
    case Value::Kind::kInt:
      return std::to_string(k.as_int());
    case Value::Kind::kFloat:
      return json_float(k.as_float());
    default:
      fail("keys must be str, int, float, bool or None, not {}", type_name(k));
  }
}

struct Dumper {
  const JsonDumpOptions& opt;
  std::string& out;
  Budget& b;
  std::string item_sep, key_sep;

  void newline(int level) {
    out += '\n';
    for (int i = 0; i < level; ++i) out += *opt.indent;
  }

  void dump(const Value& v, int level) {
    Budget::Nest nest(b);
    b.check_size(out.size());
    switch (v.kind()) {
      case Value::Kind::kNone:
        out += "null";
        return;
      case Value::Kind::kBool:
        out += v.as_bool() ? "true" : "false";
        return;
      case Value::Kind::kInt:
        out += std::to_string(v.as_int());
        return;
      case Value::Kind::kFloat:
        out += json_float(v.as_float());
        return;
      case Value::Kind::kString:
        b.charge(v.as_string().size());
        json_string(v.as_string(), opt.ensure_ascii, out);
        return;
      case Value::Kind::kList:
        return dump_list(v.as_list().items, level);
      case Value::Kind::kDict:
        return dump_dict(v.as_dict().items, level);
      default:
        fail("Object of type {} is not JSON serializable", type_name(v));
    }
  }

  void dump_list(const std::vector<Value>& items, int level) {
    if (items.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    if (opt.indent) newline(level + 1);
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) {
        out += item_sep;
        if (opt.indent) newline(level + 1);
      }
      b.charge(1);
      dump(items[i], level + 1);
    }
    if (opt.indent) newline(level);
    out += ']';
  }

  void dump_dict(const std::vector<std::pair<Value, Value>>& items, int level) {
    if (items.empty()) {
      out += "{}";
      return;
    }
    std::vector<size_t> order(items.size());
    std::iota(order.begin(), order.end(), size_t{0});
    if (opt.sort_keys) {
      b.charge(items.size() * 4);
      std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
        return compare(items[x].first, items[y].first, b) < 0;
      });
    }
    out += '{';
    if (opt.indent) newline(level + 1);
    for (size_t n = 0; n < order.size(); ++n) {
      const auto& [k, val] = items[order[n]];
      if (n) {
        out += item_sep;
        if (opt.indent) newline(level + 1);
      }
      b.charge(1);
      json_string(json_key(k), opt.ensure_ascii, out);
      out += key_sep;
      dump(val, level + 1);
    }
    if (opt.indent) newline(level);
    out += '}';
  }
};

}  // namespace

void json_dumps(const Value& v, const JsonDumpOptions& opt, std::string& out, Budget& b) {
  Dumper d{opt, out, b, opt.indent ? "," : ", ", ": "};
  if (opt.separators) {
    d.item_sep = opt.separators->first;
    d.key_sep = opt.separators->second;
  }
  d.dump(v, 0);
  b.check_size(out.size());
}

}  // namespace ceiling::jinja
