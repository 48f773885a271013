#include "tokenizer/template/operators.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tokenizer/template/pyformat.h"
#include "tokenizer/template/unicode.h"

namespace ceiling::jinja {
namespace {

bool is_intlike(const Value& v) {
  return v.kind() == Value::Kind::kInt || v.kind() == Value::Kind::kBool;
}

[[noreturn]] void unsupported(std::string_view op, const Value& a, const Value& b) {
  fail("unsupported operand type(s) for {}: '{}' and '{}'", op, type_name(a), type_name(b));
}

[[noreturn]] void overflow() {
  fail("integer overflow (Python ints are unbounded; this renderer uses 64 bits)");
}

template <typename Op>
Value checked_int(Op op, int64_t a, int64_t b) {
  int64_t r = 0;
  if (op(a, b, &r)) overflow();
  return Value::integer(r);
}
constexpr auto kAdd = [](int64_t a, int64_t b, int64_t* r) {
  return __builtin_add_overflow(a, b, r);
};
constexpr auto kSub = [](int64_t a, int64_t b, int64_t* r) {
  return __builtin_sub_overflow(a, b, r);
};
constexpr auto kMul = [](int64_t a, int64_t b, int64_t* r) {
  return __builtin_mul_overflow(a, b, r);
};

// CPython's float divmod: floor division and a modulo with the divisor's sign.
std::pair<double, double> float_divmod(double x, double y) {
  if (y == 0) fail("float division by zero");
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0) {
    if ((y < 0) != (mod < 0)) {
      mod += y;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, y);
  }
  double floordiv = 0;
  if (div != 0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, x / y);
  }
  return {floordiv, mod};
}

Value repeat(const Value& seq, int64_t n, Budget& budget) {
  if (n <= 0) return seq.is_string() ? Value::string("") : Value::list({}, seq.as_list().tuple);
  const size_t unit = seq.is_string() ? seq.as_string().size() : seq.as_list().items.size();
  if (unit != 0 && static_cast<uint64_t>(n) > budget.limits().max_output_bytes / unit + 1)
    budget.check_size(budget.limits().max_output_bytes + 1);
  budget.check_size(unit * static_cast<uint64_t>(n));
  budget.charge(unit * static_cast<uint64_t>(n));
  if (seq.is_string())
    budget.alloc_bytes(unit * static_cast<uint64_t>(n));
  else
    budget.alloc_items(unit * static_cast<uint64_t>(n));
  if (seq.is_string()) {
    std::string s;
    s.reserve(unit * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) s += seq.as_string();
    return Value::string(std::move(s));
  }
  std::vector<Value> items;
  items.reserve(unit * static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    items.insert(items.end(), seq.as_list().items.begin(), seq.as_list().items.end());
  return Value::list(std::move(items), seq.as_list().tuple);
}

}  // namespace

void undefined_error(const Value& u) {
  fail("{}", u.undefined_hint());
}

Value negate(const Value& a) {
  if (a.is_undefined()) undefined_error(a);
  if (is_intlike(a)) {
    if (a.as_int() == INT64_MIN) overflow();
    return Value::integer(-a.as_int());
  }
  if (a.kind() == Value::Kind::kFloat) return Value::number(-a.as_float());
  fail("bad operand type for unary -: '{}'", type_name(a));
}

Value binary_op(std::string_view op, const Value& a, const Value& b, Budget& budget) {
  if (op == "%" && a.is_string()) return percent_format(a.as_string(), b, budget);
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  const bool ints = is_intlike(a) && is_intlike(b);
  const bool nums = a.is_number() && b.is_number();
  if (op == "+") {
    if (ints) return checked_int(kAdd, a.as_int(), b.as_int());
    if (nums) return Value::number(a.as_float() + b.as_float());
    if (a.is_string() && b.is_string()) {
      budget.check_size(a.as_string().size() + b.as_string().size());
      budget.charge(a.as_string().size() + b.as_string().size());
      budget.alloc_bytes(a.as_string().size() + b.as_string().size());
      return Value::string(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list() && a.as_list().tuple == b.as_list().tuple) {
      budget.check_size(a.as_list().items.size() + b.as_list().items.size());
      budget.charge(a.as_list().items.size() + b.as_list().items.size());
      budget.alloc_items(a.as_list().items.size() + b.as_list().items.size());
      auto items = a.as_list().items;
      items.insert(items.end(), b.as_list().items.begin(), b.as_list().items.end());
      return Value::list(std::move(items), a.as_list().tuple);
    }
    if (a.is_string() || a.is_list())
      fail("can only concatenate {} (not \"{}\") to {}", type_name(a), type_name(b), type_name(a));
    unsupported("+", a, b);
  }
  if (op == "-") {
    if (ints) return checked_int(kSub, a.as_int(), b.as_int());
    if (nums) return Value::number(a.as_float() - b.as_float());
    unsupported("-", a, b);
  }
  if (op == "*") {
    if (ints) return checked_int(kMul, a.as_int(), b.as_int());
    if (nums) return Value::number(a.as_float() * b.as_float());
    if ((a.is_string() || a.is_list()) && is_intlike(b)) return repeat(a, b.as_int(), budget);
    if ((b.is_string() || b.is_list()) && is_intlike(a)) return repeat(b, a.as_int(), budget);
    if (a.is_string() || a.is_list() || b.is_string() || b.is_list())
      fail("can't multiply sequence by non-int of type '{}'",
           type_name(a.is_string() || a.is_list() ? b : a));
    unsupported("*", a, b);
  }
  if (op == "/") {
    if (!nums) unsupported("/", a, b);
    if (b.as_float() == 0) fail("division by zero");
    return Value::number(a.as_float() / b.as_float());
  }
  if (op == "//" || op == "%") {
    if (!nums) unsupported(op, a, b);
    if (ints) {
      const int64_t x = a.as_int(), y = b.as_int();
      if (y == 0) fail("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) overflow();
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;
      return Value::integer(op == "//" ? q : m);
    }
    const auto [q, m] = float_divmod(a.as_float(), b.as_float());
    return Value::number(op == "//" ? q : m);
  }
  if (op == "**") {
    if (!nums) unsupported("** or pow()", a, b);
    if (ints && b.as_int() >= 0) {
      int64_t base = a.as_int(), e = b.as_int(), acc = 1;
      while (e > 0) {
        if ((e & 1) && __builtin_mul_overflow(acc, base, &acc)) overflow();
        e >>= 1;
        if (e > 0 && __builtin_mul_overflow(base, base, &base)) overflow();
      }
      return Value::integer(acc);
    }
    if (a.as_float() == 0 && b.as_float() < 0) fail("0.0 cannot be raised to a negative power");
    const double x = std::pow(a.as_float(), b.as_float());
    if (std::isnan(x) && a.as_float() < 0)
      fail("negative number cannot be raised to a fractional power");
    return Value::number(x);
  }
  fail("unknown operator '{}'", op);
}

bool contains(const Value& container, const Value& item, Budget& budget) {
  switch (container.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kString:
      if (item.is_undefined()) undefined_error(item);
      if (!item.is_string())
        fail("'in <string>' requires string as left operand, not {}", type_name(item));
      budget.charge(container.as_string().size());
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kIter:
      if (!container.as_list().deferred_error.empty())
        fail("{}", container.as_list().deferred_error);
      [[fallthrough]];
    case Value::Kind::kList:
      for (const auto& v : container.as_list().items) {
        budget.charge(1);
        if (equal(v, item, budget)) return true;
      }
      return false;
    case Value::Kind::kDict:
      require_hashable(item);
      return dict_find(container.as_dict(), item, budget) != nullptr;
    default:
      fail("argument of type '{}' is not iterable", type_name(container));
  }
}

std::optional<Value> index_item(const Value& obj, const Value& key) {
  if (!is_intlike(key) || !(obj.is_string() || obj.is_list())) return std::nullopt;
  int64_t i = key.as_int();
  if (obj.is_list()) {
    const auto n = static_cast<int64_t>(obj.as_list().items.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return std::nullopt;
    return obj.as_list().items[static_cast<size_t>(i)];
  }
  const auto cps = utf8_decode(obj.as_string());
  const auto n = static_cast<int64_t>(cps.size());
  if (i < 0) i += n;
  if (i < 0 || i >= n) return std::nullopt;
  return Value::string(utf8_encode(cps.substr(static_cast<size_t>(i), 1)));
}

Value slice(const Value& obj, const Value* start, const Value* stop, const Value* step,
            Budget& budget) {
  if (obj.is_undefined()) undefined_error(obj);
  if (obj.kind() == Value::Kind::kIter)  // Jinja's getitem turns the TypeError into Undefined
    return Value::undefined(fmt::format("{} object has no element slice", type_name(obj)));
  if (!obj.is_string() && !obj.is_list()) fail("'{}' object is not subscriptable", type_name(obj));
  auto bound = [](const Value* v, const char* what) -> std::optional<int64_t> {
    if (!v || v->is_none()) return std::nullopt;
    if (v->is_undefined()) undefined_error(*v);
    if (!is_intlike(*v)) fail("slice {} must be an integer or None, not '{}'", what, type_name(*v));
    return v->as_int();
  };
  const int64_t st = bound(step, "step").value_or(1);
  if (st == 0) fail("slice step cannot be zero");
  std::u32string cps;
  if (obj.is_string()) cps = utf8_decode(obj.as_string());
  const auto n = static_cast<int64_t>(obj.is_string() ? cps.size() : obj.as_list().items.size());
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t i = *v < 0 ? *v + n : *v;
    if (st > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t lo = clamp(bound(start, "indices"), st > 0 ? 0 : n - 1);
  const int64_t hi = clamp(bound(stop, "indices"), st > 0 ? n : -1);
  // Any step longer than the sequence picks one item; clamping it keeps `i += step` in range.
  const int64_t step_c = st > 0 ? std::min(st, n + 1) : std::max(st, -(n + 1));
  std::vector<int64_t> idx;
  for (int64_t i = lo; step_c > 0 ? i < hi : i > hi; i += step_c) idx.push_back(i);
  budget.charge(idx.size());
  if (obj.is_string()) {
    std::u32string out;
    for (int64_t i : idx) out.push_back(cps[static_cast<size_t>(i)]);
    return Value::string(utf8_encode(out));
  }
  std::vector<Value> out;
  out.reserve(idx.size());
  for (int64_t i : idx) out.push_back(obj.as_list().items[static_cast<size_t>(i)]);
  return Value::list(std::move(out), obj.as_list().tuple);
}

}  // namespace ceiling::jinja
