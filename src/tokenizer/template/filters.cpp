// Jinja2's built-in filters on scalars and strings, plus transformers' tojson. Sequence filters
// live in filters_seq.cpp; the registry (find_filter) is at the bottom of that file.
#include "tokenizer/template/filters.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "tokenizer/template/args.h"
#include "tokenizer/template/operators.h"
#include "tokenizer/template/pyformat.h"
#include "tokenizer/template/render.h"
#include "tokenizer/template/strops.h"
#include "tokenizer/template/unicode.h"

namespace ceiling::jinja::filters {
namespace {

std::string text(Renderer& r, const Value& v) {
  return r.str(v);
}

// Python int(str, base): optional sign, underscores between digits, surrounding whitespace.
std::optional<int64_t> parse_int(std::string s, int base) {
  s = py_strip(s, nullptr, true, true);
  std::string digits;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_' && i > 0 && i + 1 < s.size() && s[i - 1] != '_' && s[i - 1] != '-' &&
        s[i - 1] != '+')
      continue;
    digits += s[i];
  }
  if (digits.empty()) return std::nullopt;
  size_t start = digits[0] == '-' || digits[0] == '+' ? 1 : 0;
  if (start == digits.size()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(digits.c_str(), &end, base);
  if (errno != 0 || end != digits.c_str() + digits.size()) return std::nullopt;
  return v;
}

std::optional<double> parse_float(std::string s) {
  s = py_strip(s, nullptr, true, true);
  if (s.empty()) return std::nullopt;
  std::string lower = str_lower(s);
  std::string body = lower[0] == '-' || lower[0] == '+' ? lower.substr(1) : lower;
  const double sign = !lower.empty() && lower[0] == '-' ? -1.0 : 1.0;
  if (body == "inf" || body == "infinity") return sign * INFINITY;
  if (body == "nan") return NAN;
  if (s.empty() || s.find_first_of("xXpP") != std::string::npos) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

Value abs_(Renderer&, const Value& v, CallArgs& a) {
  ArgReader(a, "abs", {});
  if (v.kind() == Value::Kind::kFloat) return Value::number(std::fabs(v.as_float()));
  if (v.kind() == Value::Kind::kInt || v.kind() == Value::Kind::kBool) {
    if (v.as_int() == INT64_MIN) fail("integer overflow");
    return Value::integer(std::llabs(v.as_int()));
  }
  if (v.is_undefined()) undefined_error(v);
  fail("bad operand type for abs(): '{}'", type_name(v));
}

Value attribute(Renderer& r, const Value& v, CallArgs& a) {
  ArgReader args(a, "attribute", {"name"});
  const Value& name = args.require(0);
  return name.is_string() ? r.getattr(v, name.as_string()) : r.getitem(v, name);
}

Value capitalize(Renderer& r, const Value& v, CallArgs& a) {
  ArgReader(a, "capitalize", {});
  return Value::string(py_capitalize(text(r, v)));
}

Value center(Renderer& r, const Value& v, CallArgs& a) {
  ArgReader args(a, "center", {"width"});
  return Value::string(py_pad(text(r, v), args.get_int(0, 80), " ", '^', r.budget()));
}

Value default_(Renderer&, const Value& v, CallArgs& a) {
  ArgReader args(a, "default", {"default_value", "boolean"});
  if (v.is_undefined() || (args.get_bool(1, false) && !truthy(v)))
    return args.get_or(0, Value::string(""));
  return v;
}

Value escape(Renderer& r, const Value& v, CallArgs& a) {
  ArgReader(a, "escape", {});
  return Value::string(html_escape(text(r, v)));
}

Value float_(Renderer& r, const Value& v, CallArgs& a) {
  ArgReader args(a, "float", {"default"});
  if (v.is_undefined()) undefined_error(v);
  if (v.is_number()) return Value::number(v.as_float());
  if (v.is_string())
    if (auto f = parse_float(v.as_string())) return Value::number(*f);
  (void)r;
  return args.get_or(0, Value::number(0.0));
}

Value format(Renderer& r, const Value& v, CallArgs& a) {
  if (!a.pos.empty() && !a.kw.empty())
    fail("can't handle positional and keyword arguments at the same time");
  if (!a.kw.empty()) {
    std::vector<std::pair<Value, Value>> kw;
    for (auto& [k, val] : a.kw) kw.emplace_back(Value::string(k), val);
    return percent_format(text(r, v), Value::dict(std::move(kw)), r.budget());
  }
  return percent_format(text(r, v), Value::list(a.pos, true), r.budget());
}

Value indent(Renderer& r, const Value& v, CallArgs& a) {
  ArgReader args(a, "indent", {"width", "first", "blank"});
  if (v.is_undefined()) undefined_error(v);
  if (!v.is_string()) fail("unsupported operand type(s) for +=: '{}' and 'str'", type_name(v));
  const Value width = args.get_or(0, Value::integer(4));
  std::string ind;
  if (width.is_string()) {
    ind = width.as_string();
  } else {
    const int64_t w = args.get_int(0, 4);
    r.budget().check_size(static_cast<uint64_t>(std::max<int64_t>(w, 0)));
    ind.assign(static_cast<size_t>(std::max<int64_t>(w, 0)), ' ');
  }
  const auto lines = py_splitlines(text(r, v) + "\n", false);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += '\n';
      if (args.get_bool(2, false) || !lines[i].empty()) out += ind;
    }
    out += lines[i];
    r.budget().check_size(out.size());
  }
  if (args.get_bool(1, false)) out = ind + out;
  r.budget().charge(out.size());
  r.budget().alloc_bytes(out.size());
  return Value::string(std::move(out));
}

Value int_(Renderer&, const Value& v, CallArgs& a) {
  ArgReader args(a, "int", {"default", "base"});
  if (v.is_undefined()) undefined_error(v);
  const Value dflt = args.get_or(0, Value::integer(0));
  if (v.kind() == Value::Kind::kInt || v.kind() == Value::Kind::kBool)
    return Value::integer(v.as_int());
  if (v.kind() == Value::Kind::kFloat) {
    const double f = v.as_float();
    if (std::isnan(f) || std::isinf(f) || std::fabs(f) >= 9.2e18) return dflt;
    return Value::integer(static_cast<int64_t>(f));
  }
  if (v.is_string()) {
    const int64_t base = args.get_int(1, 10);
    if (base < 2 || base > 36) return dflt;
    if (auto i = parse_int(v.as_string(), static_cast<int>(base))) return Value::integer(*i);
    if (auto f = parse_float(v.as_string()))
      if (!std::isnan(*f) && !std::isinf(*f) && std::fabs(*f) < 9.2e18)
        return Value::integer(static_cast<int64_t>(*f));
  }
  return dflt;
}

Value lower(Renderer& r, const Value& v, CallArgs& a) {
  ArgReader(a, "lower", {});
  return Value::string(str_lower(text(r, v)));
}

Value upper(Renderer& r, const Value& v, CallArgs& a) {
  ArgReader(a, "upper", {});
  return Value::string(str_upper(text(r, v)));
}

Value replace(Renderer& r, const Value& v, CallArgs& a) {
  ArgReader args(a, "replace", {"old", "new", "count"});
  return Value::string(py_replace(text(r, v), text(r, args.require(0)), text(r, args.require(1)),
                                  args.get_int(2, -1), r.budget()));
}

Value round_(Renderer&, const Value& v, CallArgs& a) {
  ArgReader args(a, "round", {"precision", "method"});
  const int64_t prec = args.get_int(0, 0);
  const Value method = args.get_or(1, Value::string("common"));
  if (!method.is_string() || (method.as_string() != "common" && method.as_string() != "ceil" &&
                              method.as_string() != "floor"))
    fail("method must be common, ceil or floor");
  if (v.is_undefined()) undefined_error(v);
  if (!v.is_number()) fail("type {} doesn't define __round__ method", type_name(v));
  if (method.as_string() == "common") {
    if (v.kind() != Value::Kind::kFloat && prec >= 0) return Value::integer(v.as_int());
    if (prec < -300 || prec > 300) return Value::number(v.as_float());
    // Correctly rounded decimal (printf), ties to even on the exact binary value, as Python.
    if (prec >= 0)
      return Value::number(
          std::strtod(fmt::format("{:.{}f}", v.as_float(), prec).c_str(), nullptr));
    const double scale = std::pow(10.0, static_cast<double>(-prec));
    return Value::number(std::nearbyint(v.as_float() / scale) * scale);
  }
  const double scale = std::pow(10.0, static_cast<double>(prec));
  const double x = v.as_float() * scale;
  return Value::number((method.as_string() == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

// Markup(value): the result is a string.
Value safe(Renderer& r, const Value& v, CallArgs& a) {
  ArgReader(a, "safe", {});
  return v.is_string() ? v : Value::string(text(r, v));
}

Value string(Renderer& r, const Value& v, CallArgs& a) {
  ArgReader(a, "string", {});
  return Value::string(text(r, v));
}

Value title(Renderer& r, const Value& v, CallArgs& a) {
  ArgReader(a, "title", {});
  return Value::string(jinja_title(text(r, v)));
}

// transformers' override: json.dumps(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False), arguments in that order.
Value tojson(Renderer& r, const Value& v, CallArgs& a) {
  ArgReader args(a, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions opt;
  opt.ensure_ascii = args.get_bool(0, false);
  if (const Value* ind = args.get(1); ind && !ind->is_none()) {
    if (ind->is_string()) {
      opt.indent = ind->as_string();
    } else {
      const int64_t n = args.get_int(1, 0);
      r.budget().check_size(static_cast<uint64_t>(std::max<int64_t>(n, 0)));
      opt.indent = std::string(static_cast<size_t>(std::max<int64_t>(n, 0)), ' ');
    }
  }
  if (const Value* sep = args.get(2); sep && !sep->is_none()) {
    if (!sep->is_list() || sep->as_list().items.size() != 2 ||
        !sep->as_list().items[0].is_string() || !sep->as_list().items[1].is_string())
      fail("tojson separators must be a pair of strings");
    opt.separators = {sep->as_list().items[0].as_string(), sep->as_list().items[1].as_string()};
  }
  opt.sort_keys = args.get_bool(3, false);
  std::string out;
  json_dumps(v, opt, out, r.budget());
  return Value::string(std::move(out));
}

Value trim(Renderer& r, const Value& v, CallArgs& a) {
  ArgReader args(a, "trim", {"chars"});
  const Value* chars = args.get(0);
  std::string set;
  if (chars && !chars->is_none()) set = text(r, *chars);
  return Value::string(
      py_strip(text(r, v), chars && !chars->is_none() ? &set : nullptr, true, true));
}

Value wordcount(Renderer& r, const Value& v, CallArgs& a) {
  ArgReader(a, "wordcount", {});
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : utf8_decode(text(r, v))) {
    const bool w = c == '_' || (c >= '0' && c <= '9') || py_iscased_upper(c) ||
                   py_iscased_lower(c) || (c >= 0x80 && !py_isspace(c) && py_isprintable(c));
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

}  // namespace ceiling::jinja::filters
