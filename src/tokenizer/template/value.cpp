#include "tokenizer/template/value.h"

#include <algorithm>
#include <cmath>

#include "tokenizer/template/pyformat.h"
#include "tokenizer/template/unicode.h"

namespace ceiling::jinja {

Value* NamespaceData::find(std::string_view name) {
  for (auto& [k, v] : attrs)
    if (k == name) return &v;
  return nullptr;
}

Value Value::undefined(std::string hint) {
  Value v;
  v.p_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}
Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.p_ = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.p_ = i;
  return v;
}
Value Value::number(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.p_ = d;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.p_ = std::make_shared<const std::string>(std::move(s));
  return v;
}
namespace {
int checked_depth(int depth) {
  if (depth > kMaxValueNesting) fail("value nested deeper than {} levels", kMaxValueNesting);
  return depth;
}
}  // namespace

int nesting(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kList:
    case Value::Kind::kIter:
      return v.as_list().depth;
    case Value::Kind::kDict:
      return v.as_dict().depth;
    case Value::Kind::kFunction:
      return v.as_fn().depth;
    case Value::Kind::kLoop:
      return v.as_loop().depth;
    default:
      return 0;
  }
}

int max_nesting(const std::vector<Value>& items) {
  int d = 0;
  for (const auto& i : items) d = std::max(d, nesting(i));
  return d;
}

Value Value::list(std::vector<Value> items, bool tuple) {
  Value v;
  v.kind_ = Kind::kList;
  const int depth = checked_depth(max_nesting(items) + 1);
  v.p_ = std::make_shared<const ListData>(
      ListData{std::move(items), tuple, nullptr, false, {}, depth});
  return v;
}
Value Value::dict(std::vector<std::pair<Value, Value>> items) {
  Value v;
  v.kind_ = Kind::kDict;
  int depth = 0;
  for (const auto& [k, val] : items) depth = std::max({depth, nesting(k), nesting(val)});
  depth = checked_depth(depth + 1);
  v.p_ = std::make_shared<const DictData>(DictData{std::move(items), depth});
  return v;
}
Value Value::ns(std::shared_ptr<NamespaceData> data) {
  Value v;
  v.kind_ = Kind::kNamespace;
  v.p_ = std::move(data);
  return v;
}
Value Value::function(std::string name, NativeFn fn, int depth) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.p_ = std::make_shared<const Function>(
      Function{std::move(name), std::move(fn), checked_depth(depth)});
  return v;
}

Value Value::loop(std::shared_ptr<const LoopData> data) {
  checked_depth(data->depth);
  Value v;
  v.kind_ = Kind::kLoop;
  v.p_ = std::move(data);
  return v;
}

Value Value::iter(std::vector<Value> items, const char* type, bool view) {
  Value v;
  v.kind_ = Kind::kIter;
  const int depth = checked_depth(max_nesting(items) + 1);
  v.p_ = std::make_shared<const ListData>(ListData{std::move(items), false, type, view, {}, depth});
  return v;
}

Value Value::failed_generator(std::string error) {
  Value v;
  v.kind_ = Kind::kIter;
  v.p_ = std::make_shared<const ListData>(
      ListData{{}, false, "generator", false, std::move(error), 1});
  return v;
}

int64_t Value::as_int() const {
  return kind_ == Kind::kBool ? int64_t{std::get<bool>(p_)} : std::get<int64_t>(p_);
}
double Value::as_float() const {
  if (kind_ == Kind::kFloat) return std::get<double>(p_);
  return static_cast<double>(as_int());
}
const std::string& Value::undefined_hint() const {
  static const std::string kGeneric = "value is undefined";
  if (auto* s = std::get_if<StrPtr>(&p_)) return **s;
  return kGeneric;
}
const void* Value::identity() const {
  switch (kind_) {
    case Kind::kList:
    case Kind::kIter:
      return std::get<ListPtr>(p_).get();
    case Kind::kDict:
      return std::get<DictPtr>(p_).get();
    case Kind::kNamespace:
      return std::get<NsPtr>(p_).get();
    case Kind::kFunction:
      return std::get<FnPtr>(p_).get();
    case Kind::kLoop:
      return std::get<LoopPtr>(p_).get();
    default:
      return nullptr;
  }
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kBool:
      return v.as_bool();
    case Value::Kind::kInt:
      return v.as_int() != 0;
    case Value::Kind::kFloat:
      return v.as_float() != 0.0;
    case Value::Kind::kString:
      return !v.as_string().empty();
    case Value::Kind::kList:
      return !v.as_list().items.empty();
    case Value::Kind::kDict:
      return !v.as_dict().items.empty();
    case Value::Kind::kIter:
      return !v.as_list().view || !v.as_list().items.empty();
    default:
      return true;
  }
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kNone:
      return "NoneType";
    case Value::Kind::kBool:
      return "bool";
    case Value::Kind::kInt:
      return "int";
    case Value::Kind::kFloat:
      return "float";
    case Value::Kind::kString:
      return "str";
    case Value::Kind::kList:
      return v.as_list().tuple ? "tuple" : "list";
    case Value::Kind::kDict:
      return "dict";
    case Value::Kind::kNamespace:
      return "Namespace";
    case Value::Kind::kFunction:
      return "function";
    case Value::Kind::kLoop:
      return "LoopContext";
    case Value::Kind::kIter:
      return v.as_list().iter_type;
  }
  return "object";
}

std::string object_repr(const Value& v) {
  if (v.is_none()) return "None";
  return type_name(v) + " object";
}

std::string to_str(const Value& v, Budget& b) {
  if (v.is_string()) return v.as_string();
  if (v.is_undefined()) return {};
  std::string out;
  append_repr(v, out, b);
  return out;
}

void append_repr(const Value& v, std::string& out, Budget& b) {
  Budget::Nest nest(b);
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      out += "Undefined";
      break;
    case Value::Kind::kNone:
      out += "None";
      break;
    case Value::Kind::kBool:
      out += v.as_bool() ? "True" : "False";
      break;
    case Value::Kind::kInt:
      out += std::to_string(v.as_int());
      break;
    case Value::Kind::kFloat:
      out += py_float_repr(v.as_float());
      break;
    case Value::Kind::kString:
      py_string_repr(v.as_string(), out);
      break;
    case Value::Kind::kList: {
      const auto& l = v.as_list();
      out += l.tuple ? '(' : '[';
      for (size_t i = 0; i < l.items.size(); ++i) {
        if (i) out += ", ";
        append_repr(l.items[i], out, b);
        b.check_size(out.size());
        b.charge(1);
      }
      if (l.tuple && l.items.size() == 1) out += ',';
      out += l.tuple ? ')' : ']';
      break;
    }
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: {
      const bool ns = v.kind() == Value::Kind::kNamespace;
      out += ns ? "<Namespace {" : "{";
      auto item = [&](size_t i, auto&& write_key, const Value& val) {
        if (i) out += ", ";
        write_key();
        out += ": ";
        append_repr(val, out, b);
        b.check_size(out.size());
        b.charge(1);
      };
      if (ns) {
        const auto& attrs = v.as_ns().attrs;
        for (size_t i = 0; i < attrs.size(); ++i)
          item(
              i, [&] { py_string_repr(attrs[i].first, out); }, attrs[i].second);
      } else {
        const auto& items = v.as_dict().items;
        for (size_t i = 0; i < items.size(); ++i)
          item(
              i, [&] { append_repr(items[i].first, out, b); }, items[i].second);
      }
      out += ns ? "}>" : "}";
      break;
    }
    case Value::Kind::kFunction:
      out += "<function " + v.as_fn().name + ">";
      break;
    case Value::Kind::kIter:
      if (v.as_list().view) {
        out += v.as_list().iter_type;
        out += '(';
        append_repr(Value::list(v.as_list().items), out, b);
        out += ')';
      } else {
        out += fmt::format("<{} object>", v.as_list().iter_type);
      }
      break;
    case Value::Kind::kLoop:
      out += fmt::format("<LoopContext {}/{}>", v.as_loop().index0 + 1, v.as_loop().items->size());
      break;
  }
}

bool equal(const Value& a, const Value& b, Budget& budget) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.kind() != K::kFloat && b.kind() != K::kFloat) return a.as_int() == b.as_int();
    return a.as_float() == b.as_float();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::kUndefined:
    case K::kNone:
      return true;
    case K::kString:
      budget.charge(a.as_string().size() / 16);
      return a.as_string() == b.as_string();
    case K::kList: {
      const auto &x = a.as_list(), &y = b.as_list();
      if (x.tuple != y.tuple || x.items.size() != y.items.size()) return false;
      Budget::Nest nest(budget);
      for (size_t i = 0; i < x.items.size(); ++i) {
        budget.charge(1);
        if (!equal(x.items[i], y.items[i], budget)) return false;
      }
      return true;
    }
    case K::kDict: {
      const auto &x = a.as_dict(), &y = b.as_dict();
      if (x.items.size() != y.items.size()) return false;
      Budget::Nest nest(budget);
      for (const auto& [k, val] : x.items) {
        const Value* other = dict_find(y, k, budget);
        if (!other || !equal(val, *other, budget)) return false;
      }
      return true;
    }
    default:
      return a.identity() == b.identity();
  }
}

int compare(const Value& a, const Value& b, Budget& budget) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.kind() != K::kFloat && b.kind() != K::kFloat)
      return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
    const double x = a.as_float(), y = b.as_float();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    budget.charge(a.as_string().size() / 16);
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list() && a.as_list().tuple == b.as_list().tuple) {
    const auto &x = a.as_list().items, &y = b.as_list().items;
    Budget::Nest nest(budget);
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      budget.charge(1);
      if (!equal(x[i], y[i], budget)) return compare(x[i], y[i], budget);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  fail("'<' not supported between instances of '{}' and '{}'", type_name(a), type_name(b));
}

void require_hashable(const Value& key) {
  switch (key.kind()) {
    case Value::Kind::kDict:
    case Value::Kind::kNamespace:
      fail("unhashable type: '{}'", type_name(key));
    case Value::Kind::kList:
      if (!key.as_list().tuple) fail("unhashable type: 'list'");
      for (const auto& item : key.as_list().items) require_hashable(item);
      break;
    default:
      break;
  }
}

const Value* dict_find(const DictData& d, const Value& key, Budget& b) {
  if (key.is_string()) return dict_find(d, key.as_string());
  for (const auto& [k, v] : d.items) {
    b.charge(1);
    if (equal(k, key, b)) return &v;
  }
  return nullptr;
}

const Value* dict_find(const DictData& d, std::string_view key) {
  for (const auto& [k, v] : d.items)
    if (k.is_string() && k.as_string() == key) return &v;
  return nullptr;
}

int64_t length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return static_cast<int64_t>(utf8_length(v.as_string()));
    case Value::Kind::kList:
      return static_cast<int64_t>(v.as_list().items.size());
    case Value::Kind::kDict:
      return static_cast<int64_t>(v.as_dict().items.size());
    case Value::Kind::kIter:
      if (v.as_list().view) return static_cast<int64_t>(v.as_list().items.size());
      break;
    default:
      break;
  }
  fail("object of type '{}' has no len()", type_name(v));
}

Value from_json(const nlohmann::ordered_json& j, int max_depth) {
  using T = nlohmann::ordered_json::value_t;
  if (max_depth <= 0) fail("input JSON nested too deeply");
  switch (j.type()) {
    case T::null:
      return Value::none();
    case T::boolean:
      return Value::boolean(j.get<bool>());
    case T::number_integer:
      return Value::integer(j.get<int64_t>());
    case T::number_unsigned: {
      const auto u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value::integer(static_cast<int64_t>(u));
      return Value::number(static_cast<double>(u));
    }
    case T::number_float:
      return Value::number(j.get<double>());
    case T::string:
      return Value::string(j.get<std::string>());
    case T::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e, max_depth - 1));
      return Value::list(std::move(items));
    }
    case T::object: {
      std::vector<std::pair<Value, Value>> items;
      items.reserve(j.size());
      for (const auto& [k, e] : j.items())
        items.emplace_back(Value::string(k), from_json(e, max_depth - 1));
      return Value::dict(std::move(items));
    }
    default:
      fail("input JSON holds a value of unsupported type '{}'", j.type_name());
  }
}

}  // namespace ceiling::jinja
