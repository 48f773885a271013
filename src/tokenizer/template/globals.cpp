// The global functions a template can call: Jinja's range/dict/namespace (with the sandbox's
// limits) and transformers' raise_exception and strftime_now.
#include <ctime>

#include "tokenizer/template/args.h"
#include "tokenizer/template/builtins.h"
#include "tokenizer/template/render.h"
#include "tokenizer/template/unicode.h"

namespace ceiling::jinja {
namespace {

constexpr int64_t kMaxRange = 100000;  // jinja2.sandbox.MAX_RANGE

Value range(Renderer& r, CallArgs& a) {
  if (!a.kw.empty()) fail("range() takes no keyword arguments");
  if (a.pos.empty() || a.pos.size() > 3)
    fail("range expected at most 3 arguments, got {}", a.pos.size());
  int64_t v[3] = {0, 0, 1};
  for (size_t i = 0; i < a.pos.size(); ++i) {
    const Value& x = a.pos[i];
    if (x.is_undefined()) fail("{}", x.undefined_hint());
    if (x.kind() != Value::Kind::kInt && x.kind() != Value::Kind::kBool)
      fail("'{}' object cannot be interpreted as an integer", type_name(x));
  }
  if (a.pos.size() == 1) {
    v[1] = a.pos[0].as_int();
  } else {
    v[0] = a.pos[0].as_int();
    v[1] = a.pos[1].as_int();
    if (a.pos.size() == 3) v[2] = a.pos[2].as_int();
  }
  if (v[2] == 0) fail("range() arg 3 must not be zero");
  int64_t span = 0;
  const bool overflow = v[2] > 0 ? __builtin_sub_overflow(v[1], v[0], &span)
                                 : __builtin_sub_overflow(v[0], v[1], &span);
  const uint64_t step = v[2] > 0 ? static_cast<uint64_t>(v[2]) : 0 - static_cast<uint64_t>(v[2]);
  const uint64_t n = span <= 0 ? 0 : (static_cast<uint64_t>(span) + step - 1) / step;
  if (overflow || n > kMaxRange)
    fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE ({}).", kMaxRange);
  r.budget().charge(static_cast<uint64_t>(n));
  r.budget().alloc_items(static_cast<uint64_t>(n));
  std::vector<Value> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < static_cast<int64_t>(n); ++i)
    out.push_back(Value::integer(v[0] + i * v[2]));
  return Value::list(std::move(out));
}

// dict(**kw) / dict(mapping_or_pairs, **kw); also namespace()'s argument convention.
std::vector<std::pair<Value, Value>> dict_items(Renderer& r, CallArgs& a, const char* fn) {
  if (a.pos.size() > 1) fail("{} expected at most 1 argument, got {}", fn, a.pos.size());
  std::vector<std::pair<Value, Value>> items;
  auto put = [&](Value k, Value v) {
    require_hashable(k);
    for (auto& [ok, ov] : items)
      if (equal(ok, k, r.budget())) {
        ov = std::move(v);
        return;
      }
    items.emplace_back(std::move(k), std::move(v));
  };
  if (!a.pos.empty()) {
    const Value& src = a.pos[0];
    if (src.is_dict()) {
      for (const auto& [k, v] : src.as_dict().items) put(k, v);
    } else {
      for (const auto& pair : r.iterate(src)) {
        auto kv = r.iterate(pair);
        if (kv.size() != 2)
          fail("dictionary update sequence element has length {}; 2 is required", kv.size());
        put(kv[0], kv[1]);
      }
    }
  }
  for (auto& [k, v] : a.kw) put(Value::string(k), v);
  return items;
}

Value namespace_(Renderer& r, CallArgs& a) {
  std::vector<std::pair<std::string, Value>> attrs;
  for (auto& [k, v] : dict_items(r, a, "namespace")) {
    if (!k.is_string()) fail("namespace attribute names must be strings");
    if (!k.as_string().empty() && k.as_string()[0] == '_')
      fail(
          "chat templates cannot store underscore-prefixed attributes on a namespace, but got '{}'",
          k.as_string());
    attrs.emplace_back(k.as_string(), v);
  }
  return r.make_namespace(std::move(attrs));
}

Value dict(Renderer& r, CallArgs& a) {
  return Value::dict(dict_items(r, a, "dict"));
}

Value raise_exception(Renderer& r, CallArgs& a) {
  ArgReader args(a, "raise_exception", {"message"});
  std::string msg = r.str(args.require(0));
  std::string one_line;
  for (char c : msg) one_line += c == '\n' || c == '\r' ? ' ' : c;
  throw ChatTemplateRaised(one_line);
}

// "26 Jul 2024", "2024-07-26" or "2024-07-26T10:30:00" -> broken-down time.
std::tm parse_date(const std::string& s) {
  std::tm tm{};
  for (const char* f : {"%d %b %Y", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d"}) {
    tm = std::tm{};
    const char* end = strptime(s.c_str(), f, &tm);
    if (end && *end == '\0') {
      tm.tm_isdst = -1;
      std::tm copy = tm;
      if (timegm(&copy) != -1) tm.tm_wday = copy.tm_wday, tm.tm_yday = copy.tm_yday;
      return tm;
    }
  }
  fail("date_override '{}' is not 'DD Mon YYYY', 'YYYY-MM-DD' or 'YYYY-MM-DDTHH:MM:SS'", s);
}

Value strftime_now(Renderer& r, CallArgs& a) {
  ArgReader args(a, "strftime_now", {"format"});
  const Value& f = args.require(0);
  if (!f.is_string()) fail("strftime() argument 1 must be str, not {}", type_name(f));
  if (f.as_string().size() > 256) fail("strftime format longer than 256 bytes");
  if (f.as_string().find('\0') != std::string::npos) fail("embedded null character");
  std::tm tm{};
  if (r.date_override()) {
    tm = parse_date(*r.date_override());
  } else {
    const std::time_t now = std::time(nullptr);
    localtime_r(&now, &tm);
  }
  if (f.as_string().empty()) return Value::string("");
  char buf[4096];
  const size_t n = std::strftime(buf, sizeof buf, f.as_string().c_str(), &tm);
  if (n == 0) fail("strftime format '{}' produced no output or too much", f.as_string());
  return Value::string(std::string(buf, n));
}

}  // namespace

std::vector<std::pair<std::string, Value>> make_globals() {
  return {
      {"range", Value::function("range", range)},
      {"namespace", Value::function("namespace", namespace_)},
      {"dict", Value::function("dict", dict)},
      {"raise_exception", Value::function("raise_exception", raise_exception)},
      {"strftime_now", Value::function("strftime_now", strftime_now)},
  };
}

}  // namespace ceiling::jinja
