// Python methods reachable from templates: str (strip, split, startswith, replace, format, ...),
// dict (items, keys, values, get) and list (index, count). Methods that would mutate are
// refused, as transformers' ImmutableSandboxedEnvironment does.
#include <algorithm>
#include <set>

#include "tokenizer/template/args.h"
#include "tokenizer/template/builtins.h"
#include "tokenizer/template/operators.h"
#include "tokenizer/template/render.h"
#include "tokenizer/template/strops.h"
#include "tokenizer/template/unicode.h"

namespace ceiling::jinja {
namespace {

using Method = Value (*)(Renderer&, const Value& self, const CallArgs& a);

const std::string& str_arg(const Value& v, std::string_view fn) {
  if (!v.is_string()) fail("{}() argument must be str, not {}", fn, type_name(v));
  return v.as_string();
}

Value strings(std::vector<std::string> parts) {
  std::vector<Value> out;
  out.reserve(parts.size());
  for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  return Value::list(std::move(out));
}

Value strip_impl(const Value& self, const CallArgs& a, const char* fn, bool l, bool r) {
  ArgReader args(a, fn, {"chars"});
  const Value* chars = args.get(0);
  if (chars && !chars->is_none()) {
    const std::string set = str_arg(*chars, fn);
    return Value::string(py_strip(self.as_string(), &set, l, r));
  }
  return Value::string(py_strip(self.as_string(), nullptr, l, r));
}

Value split_impl(const Value& self, const CallArgs& a, const char* fn, bool from_right) {
  ArgReader args(a, fn, {"sep", "maxsplit"});
  const Value* sep = args.get(0);
  const int64_t maxsplit = args.get_int(1, -1);
  if (sep && !sep->is_none()) {
    const std::string s = str_arg(*sep, fn);
    return strings(py_split(self.as_string(), &s, maxsplit, from_right));
  }
  return strings(py_split(self.as_string(), nullptr, maxsplit, from_right));
}

// Code-point slice [start:end] used by startswith/endswith/find-style optional bounds.
std::string bounded(Renderer& r, const Value& self, const ArgReader& args, size_t first) {
  if (!args.get(first) && !args.get(first + 1)) return self.as_string();
  return slice(self, args.get(first), args.get(first + 1), nullptr, r.budget()).as_string();
}

Value affix_impl(Renderer& r, const Value& self, const CallArgs& a, bool start) {
  ArgReader args(a, start ? "startswith" : "endswith", {"prefix", "start", "end"});
  const std::string s = bounded(r, self, args, 1);
  const Value& p = args.require(0);
  std::vector<Value> options =
      p.is_list() && p.as_list().tuple ? p.as_list().items : std::vector<Value>{p};
  for (const auto& o : options) {
    const std::string& x = str_arg(o, start ? "startswith" : "endswith");
    if (s.size() >= x.size() &&
        (start ? s.compare(0, x.size(), x) : s.compare(s.size() - x.size(), x.size(), x)) == 0)
      return Value::boolean(true);
  }
  return Value::boolean(false);
}

template <bool (*kPred)(char32_t)>
Value all_of(const Value& self) {
  const auto cps = utf8_decode(self.as_string());
  return Value::boolean(!cps.empty() && std::all_of(cps.begin(), cps.end(), kPred));
}
bool is_digit(char32_t c) {
  return (c >= '0' && c <= '9') || (c >= 0xFF10 && c <= 0xFF19);
}
bool is_alpha(char32_t c) {
  return py_iscased_upper(c) || py_iscased_lower(c) || (c >= 0x4E00 && c <= 0x9FFF) ||
         (c >= 0x3040 && c <= 0x30FF) || (c >= 0xAC00 && c <= 0xD7AF);
}
bool is_alnum(char32_t c) {
  return is_digit(c) || is_alpha(c);
}

// str.format with "{}", "{0}", "{name}" fields and "!r"/"!s" conversions (no format specs).
Value str_format(Renderer& r, const Value& self, const CallArgs& a) {
  const std::string& f = self.as_string();
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] == '}') {
      if (i + 1 < f.size() && f[i + 1] == '}')
        ++i;
      else
        fail("Single '}}' encountered in format string");
      out += '}';
      continue;
    }
    if (f[i] != '{') {
      out += f[i];
      continue;
    }
    if (i + 1 < f.size() && f[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = f.find('}', i);
    if (close == std::string::npos) fail("Single '{{' encountered in format string");
    std::string field = f.substr(i + 1, close - i - 1);
    char conv = 's';
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      conv = bang + 1 < field.size() ? field[bang + 1] : '?';
      field.resize(bang);
    }
    if (field.find(':') != std::string::npos) fail("format specs in str.format are not supported");
    const Value* arg = nullptr;
    if (field.empty() ||
        std::all_of(field.begin(), field.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      const size_t idx = field.empty() ? auto_index++ : std::stoul(field.substr(0, 9));
      if (idx >= a.pos.size())
        fail("Replacement index {} out of range for positional args tuple", idx);
      arg = &a.pos[idx];
    } else {
      for (const auto& [k, v] : a.kw)
        if (k == field) arg = &v;
      if (!arg) fail("KeyError: '{}'", field);
    }
    if (conv == 'r') {
      append_repr(*arg, out, r.budget());
    } else if (conv == 's') {
      out += r.str(*arg);
    } else {
      fail("Unknown conversion specifier {}", conv);
    }
    r.budget().check_size(out.size());
    i = close;
  }
  return Value::string(std::move(out));
}

Value str_method(Renderer& r, const std::string& name, const Value& self, const CallArgs& a) {
  const std::string& s = self.as_string();
  auto none = [&](const char* fn) { ArgReader(a, fn, {}); };
  if (name == "strip") return strip_impl(self, a, "strip", true, true);
  if (name == "lstrip") return strip_impl(self, a, "lstrip", true, false);
  if (name == "rstrip") return strip_impl(self, a, "rstrip", false, true);
  if (name == "split") return split_impl(self, a, "split", false);
  if (name == "rsplit") return split_impl(self, a, "rsplit", true);
  if (name == "splitlines")
    return strings(py_splitlines(s, ArgReader(a, "splitlines", {"keepends"}).get_bool(0, false)));
  if (name == "startswith" || name == "endswith")
    return affix_impl(r, self, a, name == "startswith");
  if (name == "upper") return none("upper"), Value::string(str_upper(s));
  if (name == "lower" || name == "casefold") return none("lower"), Value::string(str_lower(s));
  if (name == "title") return none("title"), Value::string(py_title(s));
  if (name == "capitalize") return none("capitalize"), Value::string(py_capitalize(s));
  if (name == "replace") {
    ArgReader args(a, "replace", {"old", "new", "count"});
    return Value::string(py_replace(s, str_arg(args.require(0), "replace"),
                                    str_arg(args.require(1), "replace"), args.get_int(2, -1),
                                    r.budget()));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    ArgReader args(a, name, {"sub", "start", "end"});
    const std::string hay = bounded(r, self, args, 1);
    const std::string& sub = str_arg(args.require(0), name);
    r.budget().charge(hay.size());
    if (name == "count") return Value::integer(py_count(hay, sub));
    int64_t at = py_find(hay, sub, name[0] == 'r');
    if (const Value* start = args.get(1); at >= 0 && start && !start->is_none())
      at += static_cast<int64_t>(
          utf8_length(slice(self, nullptr, start, nullptr, r.budget()).as_string()));
    if (at < 0 && (name == "index" || name == "rindex")) fail("substring not found");
    return Value::integer(at);
  }
  if (name == "join") {
    ArgReader args(a, "join", {"iterable"});
    std::string out;
    bool first = true;
    for (const auto& item : r.iterate(args.require(0))) {
      if (!first) out += s;
      first = false;
      out += str_arg(item, "join");
      r.budget().check_size(out.size());
    }
    r.budget().alloc_bytes(out.size());
    return Value::string(std::move(out));
  }
  if (name == "isdigit" || name == "isdecimal" || name == "isnumeric")
    return none("isdigit"), all_of<is_digit>(self);
  if (name == "isalpha") return none("isalpha"), all_of<is_alpha>(self);
  if (name == "isalnum") return none("isalnum"), all_of<is_alnum>(self);
  if (name == "isspace") return none("isspace"), all_of<py_isspace>(self);
  if (name == "islower" || name == "isupper") {
    none("islower");
    CallArgs empty;
    return Value::boolean(find_test(name.substr(2))(r, self, empty));
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    ArgReader args(a, name, {"width", "fillchar"});
    const Value fill = args.get_or(1, Value::string(" "));
    return Value::string(py_pad(s, args.get_int(0, 0), str_arg(fill, name),
                                name == "center"  ? '^'
                                : name == "ljust" ? '<'
                                                  : '>',
                                r.budget()));
  }
  if (name == "zfill") {
    ArgReader args(a, "zfill", {"width"});
    const bool sign = !s.empty() && (s[0] == '-' || s[0] == '+');
    std::string body =
        py_pad(s.substr(sign ? 1 : 0), args.get_int(0, 0) - (sign ? 1 : 0), "0", '>', r.budget());
    return Value::string(sign ? s.substr(0, 1) + body : body);
  }
  if (name == "partition" || name == "rpartition") {
    ArgReader args(a, name, {"sep"});
    const std::string& sep = str_arg(args.require(0), name);
    if (sep.empty()) fail("empty separator");
    const size_t at = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (at == std::string::npos)
      return name == "partition" ? Value::list({self, Value::string(""), Value::string("")}, true)
                                 : Value::list({Value::string(""), Value::string(""), self}, true);
    return Value::list({Value::string(s.substr(0, at)), Value::string(sep),
                        Value::string(s.substr(at + sep.size()))},
                       true);
  }
  if (name == "format") return str_format(r, self, a);
  if (name == "removeprefix" || name == "removesuffix") {
    ArgReader args(a, name, {"affix"});
    const std::string& x = str_arg(args.require(0), name);
    const bool prefix = name == "removeprefix";
    if (s.size() >= x.size() && s.compare(prefix ? 0 : s.size() - x.size(), x.size(), x) == 0)
      return Value::string(prefix ? s.substr(x.size()) : s.substr(0, s.size() - x.size()));
    return self;
  }
  fail("str.{} is not supported", name);
}

Value dict_method(Renderer& r, const std::string& name, const Value& self, const CallArgs& a) {
  const auto& d = self.as_dict();
  std::vector<Value> out;
  if (name == "items" || name == "keys" || name == "values") {
    ArgReader(a, name, {});
    r.budget().charge(d.items.size());
    for (const auto& [k, v] : d.items)
      out.push_back(name == "items" ? Value::list({k, v}, true) : name == "keys" ? k : v);
    return Value::iter(std::move(out),
                       name == "items"  ? "dict_items"
                       : name == "keys" ? "dict_keys"
                                        : "dict_values",
                       true);
  }
  if (name == "get") {
    ArgReader args(a, "get", {"key", "default"});
    const Value& key = args.require(0);
    require_hashable(key);
    if (const Value* v = dict_find(d, key, r.budget())) return *v;
    return args.get_or(1, Value::none());
  }
  if (name == "copy") return ArgReader(a, "copy", {}), self;
  fail("access to attribute '{}' of 'dict' object is unsafe", name);
}

Value list_method(Renderer& r, const std::string& name, const Value& self, const CallArgs& a) {
  const auto& items = self.as_list().items;
  if (name == "index" || name == "count") {
    ArgReader args(a, name, {"value"});
    const Value& x = args.require(0);
    int64_t n = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      r.budget().charge(1);
      if (!equal(items[i], x, r.budget())) continue;
      if (name == "index") return Value::integer(static_cast<int64_t>(i));
      ++n;
    }
    if (name == "index") fail("value is not in list");
    return Value::integer(n);
  }
  if (name == "copy") return ArgReader(a, "copy", {}), self;
  fail("access to attribute '{}' of '{}' object is unsafe", name, type_name(self));
}

const std::set<std::string_view> kStrMethods = {
    "strip",        "lstrip",      "rstrip",  "split",    "rsplit",    "splitlines", "startswith",
    "endswith",     "upper",       "lower",   "casefold", "title",     "capitalize", "replace",
    "find",         "rfind",       "index",   "rindex",   "count",     "join",       "isdigit",
    "isdecimal",    "isnumeric",   "isalpha", "isalnum",  "isspace",   "islower",    "isupper",
    "center",       "ljust",       "rjust",   "zfill",    "partition", "rpartition", "format",
    "removeprefix", "removesuffix"};
const std::set<std::string_view> kDictMethods = {
    "items", "keys", "values", "get", "copy", "pop", "popitem", "setdefault", "update", "clear"};
const std::set<std::string_view> kListMethods = {"index",   "count",  "copy", "append",
                                                 "extend",  "insert", "pop",  "remove",
                                                 "reverse", "sort",   "clear"};

}  // namespace

std::optional<Value> bind_method(const Value& self, std::string_view name) {
  using Impl = Value (*)(Renderer&, const std::string&, const Value&, const CallArgs&);
  Impl impl = nullptr;
  if (self.is_string() && kStrMethods.count(name)) impl = str_method;
  if (self.is_dict() && kDictMethods.count(name)) impl = dict_method;
  if (self.is_list() && kListMethods.count(name)) {
    if (self.as_list().tuple && name != "index" && name != "count") return std::nullopt;
    impl = list_method;
  }
  if (!impl) return std::nullopt;
  std::string n(name);
  return Value::function(
      n, [impl, n, self](Renderer& r, CallArgs& a) { return impl(r, n, self, a); },
      nesting(self) + 1);
}

}  // namespace ceiling::jinja
