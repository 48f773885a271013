// Jinja2's sequence and mapping filters, and the filter registry.
#include <algorithm>
#include <map>

#include "tokenizer/template/args.h"
#include "tokenizer/template/builtins.h"
#include "tokenizer/template/filters.h"
#include "tokenizer/template/operators.h"
#include "tokenizer/template/render.h"
#include "tokenizer/template/unicode.h"

namespace ceiling::jinja::filters {
namespace {

// Jinja's make_attrgetter: "a.b.0" looks up each part with getitem (digits as ints).
Value get_attribute(Renderer& r, const Value& item, const Value& attr) {
  if (!attr.is_string()) return r.getitem(item, attr);
  Value cur = item;
  std::string_view path = attr.as_string();
  for (;;) {
    const size_t dot = path.find('.');
    const std::string_view part = path.substr(0, dot);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(),
                                                     [](char c) { return c >= '0' && c <= '9'; });
    cur = digits && part.size() < 18 ? r.getitem(cur, Value::integer(std::stoll(std::string(part))))
                                     : r.getitem(cur, Value::string(std::string(part)));
    if (dot == std::string_view::npos) return cur;
    path.remove_prefix(dot + 1);
  }
}

Value ignore_case(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value::string(str_lower(v.as_string())) : v;
}

// Sort key for sort/unique/min/max: optional attribute, then case folding.
Value key_of(Renderer& r, const Value& item, const Value* attr, bool case_sensitive) {
  return ignore_case(attr && !attr->is_none() ? get_attribute(r, item, *attr) : item,
                     case_sensitive);
}

bool run_test(Renderer& r, const Value& item, const CallArgs& a, size_t name_at) {
  if (a.pos.size() <= name_at) return truthy(item);
  const Value& name = a.pos[name_at];
  TestFn test = name.is_string() ? find_test(name.as_string()) : nullptr;
  if (!test) fail("no test named '{}'", r.str(name));
  CallArgs rest;
  rest.pos.assign(a.pos.begin() + static_cast<std::ptrdiff_t>(name_at) + 1, a.pos.end());
  rest.kw = a.kw;
  return test(r, item, rest);
}

Value select_impl(Renderer& r, const Value& v, CallArgs& a, bool by_attr, bool keep) {
  std::vector<Value> out;
  if (!truthy(v)) return Value::iter(std::move(out), "generator");  // Jinja: `if value:`
  if (by_attr && a.pos.empty()) fail("missing parameter for attribute name");
  for (const auto& item : r.iterate(v)) {
    r.budget().charge(1);
    const Value subject = by_attr ? get_attribute(r, item, a.pos[0]) : item;
    if (run_test(r, subject, a, by_attr ? 1 : 0) == keep) out.push_back(item);
  }
  return Value::iter(std::move(out), "generator");
}

Value min_max(Renderer& r, const Value& v, CallArgs& a, bool want_max) {
  ArgReader args(a, want_max ? "max" : "min", {"case_sensitive", "attribute"});
  const bool cs = args.get_bool(0, false);
  const Value* attr = args.get(1);
  std::optional<Value> best, best_key;
  for (const auto& item : r.iterate(v)) {
    Value k = key_of(r, item, attr, cs);
    if (!best || (want_max ? compare(k, *best_key, r.budget()) > 0
                           : compare(k, *best_key, r.budget()) < 0)) {
      best = item;
      best_key = std::move(k);
    }
  }
  if (!best)
    return Value::undefined(want_max ? "No largest item, sequence was empty."
                                     : "No smallest item, sequence was empty.");
  return *best;
}

}  // namespace

Value dictsort(Renderer& r, const Value& v, CallArgs& a) {
  ArgReader args(a, "dictsort", {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) fail("dictsort expects a mapping, got '{}'", type_name(v));
  const Value by = args.get_or(1, Value::string("key"));
  if (!by.is_string() || (by.as_string() != "key" && by.as_string() != "value"))
    fail("You can only sort by either 'key' or 'value'");
  const size_t pos = by.as_string() == "key" ? 0 : 1;
  const bool cs = args.get_bool(0, false);
  auto pairs = v.as_dict().items;
  r.budget().charge(pairs.size() * 8);
  std::stable_sort(pairs.begin(), pairs.end(), [&](const auto& x, const auto& y) {
    const Value& kx = pos == 0 ? x.first : x.second;
    const Value& ky = pos == 0 ? y.first : y.second;
    return compare(ignore_case(kx, cs), ignore_case(ky, cs), r.budget()) < 0;
  });
  if (args.get_bool(2, false)) std::reverse(pairs.begin(), pairs.end());
  std::vector<Value> out;
  for (auto& [k, val] : pairs) out.push_back(Value::list({k, val}, true));
  return Value::list(std::move(out));
}

Value first(Renderer& r, const Value& v, CallArgs& a) {
  ArgReader(a, "first", {});
  if (v.is_list() && !v.as_list().items.empty()) return v.as_list().items.front();
  auto items = r.iterate(v);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value last(Renderer& r, const Value& v, CallArgs& a) {
  ArgReader(a, "last", {});
  if (v.is_list() && !v.as_list().items.empty()) return v.as_list().items.back();
  const bool view = v.kind() == Value::Kind::kIter && v.as_list().view;
  if (!v.is_undefined() && !v.is_string() && !v.is_list() && !v.is_dict() && !view)
    fail("'{}' object is not reversible", type_name(v));
  auto items = r.iterate(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value items(Renderer&, const Value& v, CallArgs& a) {
  ArgReader(a, "items", {});
  if (v.is_undefined()) return Value::iter({}, "generator");
  if (!v.is_dict()) fail("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, val] : v.as_dict().items) out.push_back(Value::list({k, val}, true));
  return Value::iter(std::move(out), "generator");
}

Value join(Renderer& r, const Value& v, CallArgs& a) {
  ArgReader args(a, "join", {"d", "attribute"});
  const std::string sep = r.str(args.get_or(0, Value::string("")));
  const Value* attr = args.get(1);
  std::string out;
  bool any = false;
  for (const auto& item : r.iterate(v)) {
    if (any) out += sep;
    any = true;
    out += r.str(attr && !attr->is_none() ? get_attribute(r, item, *attr) : item);
    r.budget().check_size(out.size());
  }
  r.budget().charge(out.size());
  r.budget().alloc_bytes(out.size());
  return Value::string(std::move(out));
}

Value length(Renderer&, const Value& v, CallArgs& a) {
  ArgReader(a, "length", {});
  return Value::integer(jinja::length(v));
}

Value list(Renderer& r, const Value& v, CallArgs& a) {
  ArgReader(a, "list", {});
  return Value::list(r.iterate(v));
}

Value map(Renderer& r, const Value& v, CallArgs& a) {
  std::vector<Value> out;
  if (!truthy(v)) return Value::iter(std::move(out), "generator");  // Jinja: `if value:`
  const Value* attr = nullptr;
  Value dflt = Value::none();
  for (const auto& [k, val] : a.kw) {
    if (k == "attribute") {
      attr = &val;
    } else if (k == "default") {
      dflt = val;
    }
  }
  if (a.pos.empty() && attr) {
    for (const auto& [k, val] : a.kw)
      if (k != "attribute" && k != "default") fail("Unexpected keyword argument '{}'", k);
    for (const auto& item : r.iterate(v)) {
      Value x = get_attribute(r, item, *attr);
      out.push_back(x.is_undefined() && !dflt.is_none() ? dflt : x);
    }
    return Value::iter(std::move(out), "generator");
  }
  if (a.pos.empty()) fail("map requires a filter argument");
  const Value& name = a.pos[0];
  FilterFn f = name.is_string() ? find_filter(name.as_string()) : nullptr;
  if (!f) fail("no filter named '{}'", r.str(name));
  CallArgs rest;
  rest.pos.assign(a.pos.begin() + 1, a.pos.end());
  rest.kw = a.kw;
  for (const auto& item : r.iterate(v)) {
    CallArgs copy = rest;
    out.push_back(f(r, item, copy));
  }
  return Value::iter(std::move(out), "generator");
}

Value max(Renderer& r, const Value& v, CallArgs& a) {
  return min_max(r, v, a, true);
}
Value min(Renderer& r, const Value& v, CallArgs& a) {
  return min_max(r, v, a, false);
}
Value select(Renderer& r, const Value& v, CallArgs& a) {
  return select_impl(r, v, a, false, true);
}
Value reject(Renderer& r, const Value& v, CallArgs& a) {
  return select_impl(r, v, a, false, false);
}
Value selectattr(Renderer& r, const Value& v, CallArgs& a) {
  return select_impl(r, v, a, true, true);
}
Value rejectattr(Renderer& r, const Value& v, CallArgs& a) {
  return select_impl(r, v, a, true, false);
}

Value reverse(Renderer& r, const Value& v, CallArgs& a) {
  ArgReader(a, "reverse", {});
  if (v.is_string()) {
    auto cps = utf8_decode(v.as_string());
    std::reverse(cps.begin(), cps.end());
    return Value::string(utf8_encode(cps));
  }
  auto out = r.iterate(v);
  std::reverse(out.begin(), out.end());
  // reversed() of a list or dict is an iterator; other iterables become a reversed list.
  if (v.is_list()) return Value::iter(std::move(out), "list_reverseiterator");
  if (v.is_dict()) return Value::iter(std::move(out), "dict_reversekeyiterator");
  return Value::list(std::move(out));
}

Value sort(Renderer& r, const Value& v, CallArgs& a) {
  ArgReader args(a, "sort", {"reverse", "case_sensitive", "attribute"});
  const bool cs = args.get_bool(1, false);
  const Value* attr = args.get(2);
  std::vector<std::pair<Value, Value>> keyed;  // (key, item)
  for (const auto& item : r.iterate(v)) keyed.emplace_back(key_of(r, item, attr, cs), item);
  r.budget().charge(keyed.size() * 8);
  const bool rev = args.get_bool(0, false);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return rev ? compare(y.first, x.first, r.budget()) < 0
               : compare(x.first, y.first, r.budget()) < 0;
  });
  std::vector<Value> out;
  for (auto& [k, item] : keyed) out.push_back(std::move(item));
  return Value::list(std::move(out));
}

Value sum(Renderer& r, const Value& v, CallArgs& a) {
  ArgReader args(a, "sum", {"attribute", "start"});
  const Value* attr = args.get(0);
  Value acc = args.get_or(1, Value::integer(0));
  if (acc.is_string()) fail("sum() can't sum strings [use ''.join(seq) instead]");
  for (const auto& item : r.iterate(v))
    acc = binary_op("+", acc, attr && !attr->is_none() ? get_attribute(r, item, *attr) : item,
                    r.budget());
  return acc;
}

Value unique(Renderer& r, const Value& v, CallArgs& a) {
  ArgReader args(a, "unique", {"case_sensitive", "attribute"});
  const bool cs = args.get_bool(0, false);
  const Value* attr = args.get(1);
  std::vector<Value> out, seen;
  for (const auto& item : r.iterate(v)) {
    Value k = key_of(r, item, attr, cs);
    require_hashable(k);
    bool dup = false;
    for (const auto& s : seen) {
      r.budget().charge(1);
      if (equal(s, k, r.budget())) {
        dup = true;
        break;
      }
    }
    if (!dup) {
      seen.push_back(std::move(k));
      out.push_back(item);
    }
  }
  return Value::iter(std::move(out), "generator");
}

}  // namespace ceiling::jinja::filters

namespace ceiling::jinja {
namespace {

// Jinja's select/reject/map/unique/items are generators: their errors wait for iteration.
template <FilterFn kEager>
Value lazy(Renderer& r, const Value& v, CallArgs& a) {
  try {
    return kEager(r, v, a);
  } catch (const ChatTemplateRaised&) {
    throw;
  } catch (const Error& e) {
    return Value::failed_generator(e.what());
  }
}

}  // namespace

FilterFn find_filter(std::string_view name) {
  using namespace filters;
  static const std::map<std::string_view, FilterFn> kFilters = {
      {"abs", abs_},
      {"attribute", attribute},
      {"capitalize", capitalize},
      {"center", center},
      {"count", length},
      {"d", default_},
      {"default", default_},
      {"dictsort", dictsort},
      {"e", escape},
      {"escape", escape},
      {"first", first},
      {"float", float_},
      {"forceescape", escape},
      {"format", format},
      {"indent", indent},
      {"int", int_},
      {"items", lazy<items>},
      {"join", join},
      {"last", last},
      {"length", length},
      {"list", list},
      {"lower", lower},
      {"map", lazy<map>},
      {"max", max},
      {"min", min},
      {"reject", lazy<reject>},
      {"rejectattr", lazy<rejectattr>},
      {"replace", replace},
      {"reverse", reverse},
      {"round", round_},
      {"safe", safe},
      {"select", lazy<select>},
      {"selectattr", lazy<selectattr>},
      {"sort", sort},
      {"string", string},
      {"sum", sum},
      {"title", title},
      {"tojson", tojson},
      {"trim", trim},
      {"unique", lazy<unique>},
      {"upper", upper},
      {"wordcount", wordcount},
  };
  const auto it = kFilters.find(name);
  return it == kFilters.end() ? nullptr : it->second;
}

}  // namespace ceiling::jinja
