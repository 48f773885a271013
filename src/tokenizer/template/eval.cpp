// Expression evaluation: names, literals, attribute/item access with Jinja's fallbacks,
// operators, filters, tests and calls. Errors get the innermost failing node's position.
#include "tokenizer/template/builtins.h"
#include "tokenizer/template/operators.h"
#include "tokenizer/template/render.h"
#include "tokenizer/template/unicode.h"

namespace ceiling::jinja {

Value Renderer::eval(const Expr& e, const ScopePtr& scope) {
  try {
    Budget::Nest nest(budget_);
    return eval_inner(e, scope);
  } catch (const LocatedError&) {
    throw;
  } catch (const ChatTemplateRaised&) {
    throw;
  } catch (const Error& err) {
    throw LocatedError(fmt::format("line {} col {}: {}", e.line, e.col, err.what()));
  }
}

CallArgs Renderer::eval_args(const ArgExprs& args, const ScopePtr& scope) {
  CallArgs out;
  out.pos.reserve(args.pos.size());
  for (const auto& a : args.pos) out.pos.push_back(eval(*a, scope));
  for (const auto& [k, a] : args.kw) out.kw.emplace_back(k, eval(*a, scope));
  return out;
}

Value Renderer::eval_inner(const Expr& e, const ScopePtr& scope) {
  switch (e.kind) {
    case ExprKind::kConst:
      return e.value;
    case ExprKind::kName: {
      if (const Value* v = scope->lookup(e.name)) return *v;
      return Value::undefined(fmt::format("'{}' is undefined", e.name));
    }
    case ExprKind::kList:
    case ExprKind::kTuple: {
      std::vector<Value> items;
      items.reserve(e.items.size());
      for (const auto& i : e.items) items.push_back(eval(*i, scope));
      return Value::list(std::move(items), e.kind == ExprKind::kTuple);
    }
    case ExprKind::kDict: {
      std::vector<std::pair<Value, Value>> items;
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
        Value k = eval(*e.items[i], scope);
        require_hashable(k);
        Value v = eval(*e.items[i + 1], scope);
        bool replaced = false;
        for (auto& [ok, ov] : items)
          if (!replaced && equal(ok, k, budget_)) ov = v, replaced = true;
        if (!replaced) items.emplace_back(std::move(k), std::move(v));
      }
      return Value::dict(std::move(items));
    }
    case ExprKind::kGetAttr:
      return getattr(eval(*e.a, scope), e.name);
    case ExprKind::kGetItem:
      return getitem(eval(*e.a, scope), eval(*e.b, scope));
    case ExprKind::kSlice:
      return eval_slice(e, scope);
    case ExprKind::kCall: {
      Value fn = eval(*e.a, scope);
      CallArgs args = eval_args(e.args, scope);
      return call(fn, args);
    }
    case ExprKind::kFilter:
      return eval_filter(e, scope, nullptr);
    case ExprKind::kTest: {
      Value v = eval(*e.a, scope);
      CallArgs args = eval_args(e.args, scope);
      return Value::boolean(e.test(*this, v, args));
    }
    case ExprKind::kNeg:
      return negate(eval(*e.a, scope));
    case ExprKind::kPos: {
      Value v = eval(*e.a, scope);
      if (v.is_undefined()) undefined_error(v);
      if (!v.is_number()) fail("bad operand type for unary +: '{}'", type_name(v));
      return v.kind() == Value::Kind::kBool ? Value::integer(v.as_int()) : v;
    }
    case ExprKind::kNot:
      return Value::boolean(!truthy(eval(*e.a, scope)));
    case ExprKind::kAnd: {
      Value l = eval(*e.a, scope);
      return truthy(l) ? eval(*e.b, scope) : l;
    }
    case ExprKind::kOr: {
      Value l = eval(*e.a, scope);
      return truthy(l) ? l : eval(*e.b, scope);
    }
    case ExprKind::kBinary:
      return binary_op(e.name, eval(*e.a, scope), eval(*e.b, scope), budget_);
    case ExprKind::kConcat: {
      std::string s;
      for (const auto& i : e.items) {
        s += str(eval(*i, scope));
        budget_.check_size(s.size());
      }
      budget_.charge(s.size());
      budget_.alloc_bytes(s.size());
      return Value::string(std::move(s));
    }
    case ExprKind::kCompare:
      return eval_compare(e, scope);
    case ExprKind::kCond:
      if (truthy(eval(*e.b, scope))) return eval(*e.a, scope);
      if (e.c) return eval(*e.c, scope);
      return Value::undefined(
          "the inline if-expression evaluated to false and no else section was defined");
  }
  fail("unknown expression kind");
}

Value Renderer::eval_compare(const Expr& e, const ScopePtr& scope) {
  Value left = eval(*e.items[0], scope);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.items[i + 1], scope);
    const std::string& op = e.ops[i];
    bool ok = false;
    if (op == "==" || op == "!=") {
      ok = equal(left, right, budget_) == (op == "==");
    } else if (op == "in" || op == "notin") {
      ok = contains(right, left, budget_) == (op == "in");
    } else {
      if (left.is_undefined()) undefined_error(left);
      if (right.is_undefined()) undefined_error(right);
      const int c = compare(left, right, budget_);
      ok = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
    }
    if (!ok) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Renderer::eval_slice(const Expr& e, const ScopePtr& scope) {
  if (!e.a) fail("slices are only supported as the sole subscript");
  Value obj = eval(*e.a, scope);
  Value lo, hi, st;
  if (e.b) lo = eval(*e.b, scope);
  if (e.c) hi = eval(*e.c, scope);
  if (e.d) st = eval(*e.d, scope);
  return slice(obj, e.b ? &lo : nullptr, e.c ? &hi : nullptr, e.d ? &st : nullptr, budget_);
}

// A filter chain; `operand` stands in for the innermost (null) operand of a filter block.
Value Renderer::eval_filter(const Expr& e, const ScopePtr& scope, const Value* operand) {
  Value v;
  if (e.a) {
    v = e.a->kind == ExprKind::kFilter ? eval_filter(*e.a, scope, operand) : eval(*e.a, scope);
  } else if (operand) {
    v = *operand;
  }
  CallArgs args = eval_args(e.args, scope);
  try {
    return e.filter(*this, v, args);
  } catch (const LocatedError&) {
    throw;
  } catch (const ChatTemplateRaised&) {
    throw;
  } catch (const Error& err) {
    throw LocatedError(fmt::format("line {} col {}: {}", e.line, e.col, err.what()));
  }
}

Value Renderer::call(const Value& fn, CallArgs& args) {
  if (fn.is_undefined()) undefined_error(fn);
  if (fn.kind() != Value::Kind::kFunction) fail("'{}' object is not callable", type_name(fn));
  Budget::Nest nest(budget_);
  return fn.as_fn().fn(*this, args);
}

namespace {

std::optional<Value> loop_attr(const LoopData& l, std::string_view name) {
  const auto n = static_cast<int64_t>(l.items->size());
  const int64_t i = l.index0;
  if (name == "index") return Value::integer(i + 1);
  if (name == "index0") return Value::integer(i);
  if (name == "revindex") return Value::integer(n - i);
  if (name == "revindex0") return Value::integer(n - i - 1);
  if (name == "first") return Value::boolean(i == 0);
  if (name == "last") return Value::boolean(i == n - 1);
  if (name == "length") return Value::integer(n);
  if (name == "depth") return Value::integer(1);
  if (name == "depth0") return Value::integer(0);
  if (name == "previtem" && i > 0) return (*l.items)[static_cast<size_t>(i - 1)];
  if (name == "nextitem" && i + 1 < n) return (*l.items)[static_cast<size_t>(i + 1)];
  if (name == "cycle")
    return Value::function("cycle", [i](Renderer&, CallArgs& a) -> Value {
      if (a.pos.empty()) fail("no items for cycling given");
      return a.pos[static_cast<size_t>(i) % a.pos.size()];
    });
  return std::nullopt;
}

}  // namespace

Value Renderer::getattr(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) undefined_error(obj);
  auto missing = [&] {
    return Value::undefined(fmt::format("'{}' has no attribute '{}'", object_repr(obj), name));
  };
  // The sandbox hides private Python attributes, but dict keys may start with '_'.
  if (!name.empty() && name[0] != '_')
    if (auto m = bind_method(obj, name)) return *m;
  if (obj.is_dict()) {
    if (const Value* v = dict_find(obj.as_dict(), name)) return *v;
  } else if (obj.kind() == Value::Kind::kLoop) {
    if (auto v = loop_attr(obj.as_loop(), name)) return *v;
  } else if (obj.kind() == Value::Kind::kNamespace) {
    if (const Value* v = obj.as_ns().find(name)) return *v;
  }
  return missing();
}

Value Renderer::getitem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) undefined_error(obj);
  if (obj.is_dict()) {
    const bool hashable = key.kind() != Value::Kind::kList || key.as_list().tuple;
    if (hashable && key.kind() != Value::Kind::kDict && key.kind() != Value::Kind::kNamespace)
      if (const Value* v = dict_find(obj.as_dict(), key, budget_)) return *v;
  } else if (auto item = index_item(obj, key)) {
    return *item;
  }
  if (key.is_string()) return getattr(obj, key.as_string());
  std::string desc;
  append_repr(key, desc, budget_);
  return Value::undefined(fmt::format("{} has no element {}", object_repr(obj), desc));
}

std::vector<Value> Renderer::iterate(const Value& v) {
  std::vector<Value> out;
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return out;
    case Value::Kind::kString: {
      const auto cps = utf8_decode(v.as_string());
      budget_.charge(cps.size());
      out.reserve(cps.size());
      for (char32_t c : cps) {
        std::string s;
        utf8_append(s, c);
        out.push_back(Value::string(std::move(s)));
      }
      return out;
    }
    case Value::Kind::kIter:
      if (!v.as_list().deferred_error.empty()) fail("{}", v.as_list().deferred_error);
      [[fallthrough]];
    case Value::Kind::kList:
      budget_.charge(v.as_list().items.size());
      return v.as_list().items;
    case Value::Kind::kDict:
      budget_.charge(v.as_dict().items.size());
      for (const auto& [k, val] : v.as_dict().items) out.push_back(k);
      return out;
    default:
      fail("'{}' object is not iterable", type_name(v));
  }
}

}  // namespace ceiling::jinja
