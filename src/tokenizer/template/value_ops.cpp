// Python's protocols on Values: str()/repr(), ==, <, hashing rules and dict lookup.
#include <fmt/format.h>

#include "tokenizer/template/pyformat.h"
#include "tokenizer/template/value.h"

namespace ceiling::jinja {

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

}  // namespace ceiling::jinja
