// Jinja2's built-in tests (`x is defined`, `x is divisibleby 3`, ...) and their registry.
#include <map>

#include "tokenizer/template/args.h"
#include "tokenizer/template/builtins.h"
#include "tokenizer/template/operators.h"
#include "tokenizer/template/render.h"
#include "tokenizer/template/unicode.h"

namespace ceiling::jinja {
namespace {

using K = Value::Kind;

bool no_args(const CallArgs& a, std::string_view name) {
  ArgReader(a, name, {});
  return true;
}

#define CEILING_JINJA_TEST(fn, expr)                  \
  bool fn(Renderer& r, const Value& v, CallArgs& a) { \
    (void)r, (void)v;                                 \
    return no_args(a, #fn) && (expr);                 \
  }
CEILING_JINJA_TEST(defined, !v.is_undefined())
CEILING_JINJA_TEST(undefined, v.is_undefined())
CEILING_JINJA_TEST(none, v.is_none())
CEILING_JINJA_TEST(boolean, v.kind() == K::kBool)
CEILING_JINJA_TEST(false_, v.kind() == K::kBool && !v.as_bool())
CEILING_JINJA_TEST(true_, v.kind() == K::kBool && v.as_bool())
CEILING_JINJA_TEST(integer, v.kind() == K::kInt)
CEILING_JINJA_TEST(float_, v.kind() == K::kFloat)
CEILING_JINJA_TEST(number, v.is_number())
CEILING_JINJA_TEST(string, v.is_string())
CEILING_JINJA_TEST(mapping, v.is_dict())
CEILING_JINJA_TEST(iterable, v.is_undefined() || v.is_string() || v.is_list() || v.is_dict() ||
                                 v.kind() == K::kIter)
CEILING_JINJA_TEST(sequence, v.is_undefined() || v.is_string() || v.is_list() || v.is_dict())
CEILING_JINJA_TEST(callable, v.is_undefined() || v.kind() == K::kFunction)
CEILING_JINJA_TEST(escaped, false)
#undef CEILING_JINJA_TEST

bool lower(Renderer& r, const Value& v, CallArgs& a) {
  no_args(a, "lower");
  const std::string s = r.str(v);
  bool cased = false;
  for (char32_t c : utf8_decode(s)) {
    if (py_iscased_upper(c)) return false;
    cased = cased || py_iscased_lower(c);
  }
  return cased;
}

bool upper(Renderer& r, const Value& v, CallArgs& a) {
  no_args(a, "upper");
  const std::string s = r.str(v);
  bool cased = false;
  for (char32_t c : utf8_decode(s)) {
    if (py_iscased_lower(c)) return false;
    cased = cased || py_iscased_upper(c);
  }
  return cased;
}

bool odd(Renderer& r, const Value& v, CallArgs& a) {
  no_args(a, "odd");
  return equal(binary_op("%", v, Value::integer(2), r.budget()), Value::integer(1), r.budget());
}

bool even(Renderer& r, const Value& v, CallArgs& a) {
  no_args(a, "even");
  return equal(binary_op("%", v, Value::integer(2), r.budget()), Value::integer(0), r.budget());
}

bool divisibleby(Renderer& r, const Value& v, CallArgs& a) {
  ArgReader args(a, "divisibleby", {"num"});
  return equal(binary_op("%", v, args.require(0), r.budget()), Value::integer(0), r.budget());
}

bool sameas(Renderer& r, const Value& v, CallArgs& a) {
  ArgReader args(a, "sameas", {"other"});
  const Value& o = args.require(0);
  if (v.kind() != o.kind()) return false;
  if (v.identity()) return v.identity() == o.identity();
  return equal(v, o, r.budget());
}

template <int kOp>  // 0 ==, 1 !=, 2 <, 3 <=, 4 >, 5 >=
bool cmp(Renderer& r, const Value& v, CallArgs& a) {
  ArgReader args(a, "comparison", {"other"});
  const Value& o = args.require(0);
  if (kOp == 0) return equal(v, o, r.budget());
  if (kOp == 1) return !equal(v, o, r.budget());
  if (v.is_undefined()) undefined_error(v);
  if (o.is_undefined()) undefined_error(o);
  const int c = compare(v, o, r.budget());
  return kOp == 2 ? c < 0 : kOp == 3 ? c <= 0 : kOp == 4 ? c > 0 : c >= 0;
}

bool in(Renderer& r, const Value& v, CallArgs& a) {
  ArgReader args(a, "in", {"seq"});
  return contains(args.require(0), v, r.budget());
}

bool filter(Renderer&, const Value& v, CallArgs& a) {
  no_args(a, "filter");
  return v.is_string() && find_filter(v.as_string()) != nullptr;
}

bool test(Renderer&, const Value& v, CallArgs& a) {
  no_args(a, "test");
  return v.is_string() && find_test(v.as_string()) != nullptr;
}

}  // namespace

TestFn find_test(std::string_view name) {
  static const std::map<std::string_view, TestFn> kTests = {
      {"defined", defined},
      {"undefined", undefined},
      {"none", none},
      {"boolean", boolean},
      {"false", false_},
      {"true", true_},
      {"integer", integer},
      {"float", float_},
      {"number", number},
      {"string", string},
      {"mapping", mapping},
      {"iterable", iterable},
      {"sequence", sequence},
      {"callable", callable},
      {"escaped", escaped},
      {"lower", lower},
      {"upper", upper},
      {"odd", odd},
      {"even", even},
      {"divisibleby", divisibleby},
      {"sameas", sameas},
      {"eq", cmp<0>},
      {"equalto", cmp<0>},
      {"==", cmp<0>},
      {"ne", cmp<1>},
      {"!=", cmp<1>},
      {"lt", cmp<2>},
      {"lessthan", cmp<2>},
      {"<", cmp<2>},
      {"le", cmp<3>},
      {"<=", cmp<3>},
      {"gt", cmp<4>},
      {"greaterthan", cmp<4>},
      {">", cmp<4>},
      {"ge", cmp<5>},
      {">=", cmp<5>},
      {"in", in},
      {"filter", filter},
      {"test", test},
  };
  const auto it = kTests.find(name);
  return it == kTests.end() ? nullptr : it->second;
}

}  // namespace ceiling::jinja
