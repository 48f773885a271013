// Python's printf-style string formatting (`"%s" % x`, `"%.2f"|format(x)`).
#include <cmath>
#include <cstdio>

#include "tokenizer/template/operators.h"
#include "tokenizer/template/pyformat.h"
#include "tokenizer/template/unicode.h"

namespace ceiling::jinja {
namespace {

struct Spec {
  std::string flags;
  int64_t width = -1, precision = -1;
  char type = 's';
};

std::string pad(std::string s, const Spec& sp) {
  const auto len = static_cast<int64_t>(utf8_length(s));
  if (sp.width <= len) return s;
  const std::string fill(static_cast<size_t>(sp.width - len), ' ');
  return sp.flags.find('-') != std::string::npos ? s + fill : fill + s;
}

// printf for one numeric conversion; flags/width/precision were validated by the caller.
template <typename T>
std::string c_format(const Spec& sp, const char* length, char type, T v) {
  std::string f(1, '%');
  f += sp.flags;
  if (sp.width >= 0) f += std::to_string(sp.width);
  if (sp.precision >= 0) {
    f += '.';
    f += std::to_string(sp.precision);
  }
  f += length;
  f += type;
  const int n = std::snprintf(nullptr, 0, f.c_str(), v);
  if (n < 0) fail("bad format '{}'", f);
  std::string out(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(out.data(), out.size(), f.c_str(), v);
  out.pop_back();
  return out;
}

std::string convert(const Spec& sp, const Value& v, Budget& b) {
  if (v.is_undefined() && sp.type != 's') undefined_error(v);
  switch (sp.type) {
    case 's':
    case 'r':
    case 'a': {
      std::string s;
      if (sp.type == 's') {
        s = to_str(v, b);
      } else {
        append_repr(v, s, b);
      }
      if (sp.precision >= 0) {
        const auto cps = utf8_decode(s);
        if (static_cast<size_t>(sp.precision) < cps.size())
          s = utf8_encode(cps.substr(0, static_cast<size_t>(sp.precision)));
      }
      return pad(std::move(s), sp);
    }
    case 'c': {
      std::string s;
      if (v.is_string() && utf8_length(v.as_string()) == 1) {
        s = v.as_string();
      } else if (v.kind() == Value::Kind::kInt && v.as_int() >= 0 && v.as_int() <= 0x10FFFF) {
        utf8_append(s, scalar_or_replacement(static_cast<uint32_t>(v.as_int())));
      } else {
        fail("%c requires an int or a unicode character, not {}", type_name(v));
      }
      return pad(std::move(s), sp);
    }
    default:
      break;
  }
  if (!v.is_number()) fail("%{} format: a real number is required, not {}", sp.type, type_name(v));
  switch (sp.type) {
    case 'd':
    case 'i':
    case 'u': {
      const double f = v.as_float();
      if (v.kind() == Value::Kind::kFloat && (std::isnan(f) || std::isinf(f)))
        fail("cannot convert float {} to integer", py_float_repr(f));
      const long long i = v.kind() == Value::Kind::kFloat ? static_cast<long long>(f) : v.as_int();
      return c_format(sp, "ll", 'd', i);
    }
    case 'x':
    case 'X':
    case 'o':
      if (v.kind() == Value::Kind::kFloat)
        fail("%{} format: an integer is required, not float", sp.type);
      if (v.as_int() < 0) {
        std::string neg(1, '-');
        neg += c_format(sp, "ll", sp.type, -static_cast<long long>(v.as_int()));
        return neg;
      }
      return c_format(sp, "ll", sp.type, static_cast<long long>(v.as_int()));
    case 'f':
    case 'F':
    case 'e':
    case 'E':
    case 'g':
    case 'G':
      return c_format(sp, "", sp.type, v.as_float());
    default:
      fail("unsupported format character '{}'", sp.type);
  }
}

}  // namespace

Value percent_format(const std::string& fmt, const Value& args, Budget& b) {
  std::vector<Value> list;
  const bool mapping = args.is_dict();
  if (args.is_list() && args.as_list().tuple) {
    list = args.as_list().items;
  } else {
    list.push_back(args);
  }
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) fail("incomplete format");
    Spec sp;
    const Value* arg = nullptr;
    if (fmt[i] == '(') {
      const size_t close = fmt.find(')', i);
      if (close == std::string::npos) fail("incomplete format key");
      if (!mapping) fail("format requires a mapping");
      arg = dict_find(args.as_dict(), std::string_view(fmt).substr(i + 1, close - i - 1));
      if (!arg) fail("format key '{}' not found", fmt.substr(i + 1, close - i - 1));
      i = close + 1;
    }
    while (i < fmt.size() && std::string_view("-+ #0").find(fmt[i]) != std::string_view::npos)
      sp.flags += fmt[i++];
    auto number = [&](int64_t& into) {
      if (i < fmt.size() && fmt[i] == '*') fail("'*' width/precision is not supported");
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') {
        into = (into < 0 ? 0 : into) * 10 + (fmt[i++] - '0');
        if (into > 100000) fail("format width/precision too large");
      }
    };
    number(sp.width);
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      sp.precision = 0;
      number(sp.precision);
    }
    if (i < fmt.size() && (fmt[i] == 'l' || fmt[i] == 'h' || fmt[i] == 'L')) ++i;
    if (i >= fmt.size()) fail("incomplete format");
    sp.type = fmt[i];
    if (sp.type == '%') {
      out += '%';
      continue;
    }
    if (!arg) {
      if (mapping) {
        arg = &args;
      } else {
        if (next >= list.size()) fail("not enough arguments for format string");
        arg = &list[next++];
      }
    }
    out += convert(sp, *arg, b);
    b.check_size(out.size());
    b.charge(out.size() / 16 + 1);
  }
  // Python skips this check for any argument with __getitem__ (dicts and lists).
  if (!mapping && !args.is_list() && !args.is_undefined() && next < list.size())
    fail("not all arguments converted during string formatting");
  return Value::string(std::move(out));
}

}  // namespace ceiling::jinja
