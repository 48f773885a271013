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
