// Expression grammar of jinja2/parser.py, lowest precedence first:
// tuple > condexpr (a if b else c) > or > and > not > compare (chained, in, not in)
// > + - > ~ > * / // % > ** > unary - + > primary with postfix (.x [i] (args)) and filters/tests.
#include "core/status.h"
#include "tokenizer/template/builtins.h"
#include "tokenizer/template/parser.h"

namespace ceiling::jinja {

bool Parser::is_tuple_end(std::string_view extra_end) const {
  const Token& t = cur();
  if (t.type == Tok::kVarEnd || t.type == Tok::kBlockEnd || t.type == Tok::kEof) return true;
  if (t.type == Tok::kOp && t.text == ")") return true;
  return !extra_end.empty() && t.type == Tok::kName && t.text == extra_end;
}

ExprPtr Parser::parse_tuple(bool with_condexpr, std::string_view extra_end, bool explicit_parens) {
  Nest nest(*this);
  const Token& start = cur();
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  for (;;) {
    if (!items.empty()) expect_op(",");
    if (is_tuple_end(extra_end)) break;
    items.push_back(parse_expression(with_condexpr));
    if (is_op(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) error(start, "expected an expression, got " + describe(start));
  }
  auto t = node(ExprKind::kTuple, start);
  t->items = std::move(items);
  return t;
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr Parser::parse_condexpr() {
  Nest nest(*this);
  ExprPtr e = parse_or();
  while (is_name("if")) {
    auto c = node(ExprKind::kCond, next());
    c->b = parse_or();
    if (skip_name("else")) c->c = parse_condexpr();
    c->a = std::move(e);
    e = std::move(c);
  }
  return e;
}

ExprPtr Parser::parse_or() {
  ExprPtr e = parse_and();
  while (is_name("or")) {
    auto n = node(ExprKind::kOr, next());
    n->a = std::move(e);
    n->b = parse_and();
    e = std::move(n);
  }
  return e;
}

ExprPtr Parser::parse_and() {
  ExprPtr e = parse_not();
  while (is_name("and")) {
    auto n = node(ExprKind::kAnd, next());
    n->a = std::move(e);
    n->b = parse_not();
    e = std::move(n);
  }
  return e;
}

ExprPtr Parser::parse_not() {
  Nest nest(*this);
  if (is_name("not")) {
    auto n = node(ExprKind::kNot, next());
    n->a = parse_not();
    return n;
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const Token& start = cur();
  ExprPtr first = parse_math1();
  std::vector<std::string> ops;
  std::vector<ExprPtr> items;
  for (;;) {
    const Token& t = cur();
    if (t.type == Tok::kOp && (t.text == "==" || t.text == "!=" || t.text == "<" ||
                               t.text == "<=" || t.text == ">" || t.text == ">=")) {
      ops.push_back(next().text);
    } else if (is_name("in")) {
      next();
      ops.emplace_back("in");
    } else if (is_name("not") && look().type == Tok::kName && look().text == "in") {
      next(), next();
      ops.emplace_back("notin");
    } else {
      break;
    }
    items.push_back(parse_math1());
  }
  if (ops.empty()) return first;
  auto c = node(ExprKind::kCompare, start);
  c->items.push_back(std::move(first));
  for (auto& i : items) c->items.push_back(std::move(i));
  c->ops = std::move(ops);
  return c;
}

namespace {
bool is_one_of(const Token& t, std::initializer_list<std::string_view> ops) {
  if (t.type != Tok::kOp) return false;
  for (auto op : ops)
    if (t.text == op) return true;
  return false;
}
}  // namespace

ExprPtr Parser::parse_math1() {
  ExprPtr e = parse_concat();
  while (is_one_of(cur(), {"+", "-"})) {
    auto n = node(ExprKind::kBinary, cur());
    n->name = next().text;
    n->a = std::move(e);
    n->b = parse_concat();
    e = std::move(n);
  }
  return e;
}

ExprPtr Parser::parse_concat() {
  const Token& start = cur();
  ExprPtr e = parse_math2();
  if (!is_op("~")) return e;
  auto n = node(ExprKind::kConcat, start);
  n->items.push_back(std::move(e));
  while (skip_op("~")) n->items.push_back(parse_math2());
  return n;
}

ExprPtr Parser::parse_math2() {
  ExprPtr e = parse_pow();
  while (is_one_of(cur(), {"*", "/", "//", "%"})) {
    auto n = node(ExprKind::kBinary, cur());
    n->name = next().text;
    n->a = std::move(e);
    n->b = parse_pow();
    e = std::move(n);
  }
  return e;
}

ExprPtr Parser::parse_pow() {
  ExprPtr e = parse_unary();
  while (is_op("**")) {
    auto n = node(ExprKind::kBinary, cur());
    n->name = next().text;
    n->a = std::move(e);
    n->b = parse_unary();
    e = std::move(n);
  }
  return e;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  Nest nest(*this);
  ExprPtr e;
  if (is_op("-") || is_op("+")) {
    e = node(is_op("-") ? ExprKind::kNeg : ExprKind::kPos, cur());
    next();
    e->a = parse_unary(false);
  } else {
    e = parse_primary();
  }
  e = parse_postfix(std::move(e));
  if (with_filter) e = parse_filter_expr(std::move(e));
  return e;
}

ExprPtr Parser::parse_primary() {
  Nest nest(*this);
  const Token& t = cur();
  switch (t.type) {
    case Tok::kName: {
      next();
      auto e = node(ExprKind::kConst, t);
      if (t.text == "true" || t.text == "True") {
        e->value = Value::boolean(true);
      } else if (t.text == "false" || t.text == "False") {
        e->value = Value::boolean(false);
      } else if (t.text == "none" || t.text == "None") {
        e->value = Value::none();
      } else {
        e->kind = ExprKind::kName;
        e->name = t.text;
      }
      return e;
    }
    case Tok::kString: {
      std::string s;
      while (cur().type == Tok::kString) s += next().text;
      auto e = node(ExprKind::kConst, t);
      e->value = Value::string(std::move(s));
      return e;
    }
    case Tok::kInt:
    case Tok::kFloat: {
      next();
      auto e = node(ExprKind::kConst, t);
      e->value = t.type == Tok::kInt ? Value::integer(t.ival) : Value::number(t.fval);
      return e;
    }
    case Tok::kOp:
      if (t.text == "(") {
        next();
        ExprPtr e = parse_tuple(true, {}, true);
        expect_op(")");
        return e;
      }
      if (t.text == "[" || t.text == "{") {
        const bool is_dict = t.text == "{";
        auto e = node(is_dict ? ExprKind::kDict : ExprKind::kList, t);
        next();
        const char* close = is_dict ? "}" : "]";
        while (!is_op(close)) {
          if (!e->items.empty()) {
            expect_op(",");
            if (is_op(close)) break;
          }
          e->items.push_back(parse_expression());
          if (is_dict) {
            expect_op(":");
            e->items.push_back(parse_expression());
          }
        }
        expect_op(close);
        return e;
      }
      break;
    default:
      break;
  }
  error(t, "unexpected " + describe(t));
}

ExprPtr Parser::parse_postfix(ExprPtr e) {
  for (;;) {
    if (is_op(".") || is_op("[")) {
      e = parse_subscript(std::move(e));
    } else if (is_op("(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr e) {
  for (;;) {
    if (is_op("|")) {
      e = parse_filter(std::move(e), false);
    } else if (is_name("is")) {
      e = parse_test(std::move(e));
    } else if (is_op("(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr obj) {
  Nest nest(*this);
  const Token& t = next();
  if (t.text == ".") {
    const Token& attr = cur();
    if (attr.type == Tok::kName) {
      next();
      auto e = node(ExprKind::kGetAttr, attr);
      e->a = std::move(obj);
      e->name = attr.text;
      return e;
    }
    if (attr.type != Tok::kInt) error(attr, "expected name or number");
    next();
    auto e = node(ExprKind::kGetItem, attr);
    e->a = std::move(obj);
    e->b = node(ExprKind::kConst, attr);
    e->b->value = Value::integer(attr.ival);
    return e;
  }
  std::vector<ExprPtr> args;
  while (!is_op("]")) {
    if (!args.empty()) expect_op(",");
    args.push_back(parse_subscribed());
  }
  expect_op("]");
  if (args.empty()) error(t, "expected a subscript");
  ExprPtr key;
  if (args.size() == 1) {
    key = std::move(args[0]);
  } else {
    key = node(ExprKind::kTuple, t);
    key->items = std::move(args);
  }
  if (key->kind == ExprKind::kSlice) {  // a[b:c] is a slice node over `a`
    key->a = std::move(obj);
    return key;
  }
  auto e = node(ExprKind::kGetItem, t);
  e->a = std::move(obj);
  e->b = std::move(key);
  return e;
}

ExprPtr Parser::parse_subscribed() {
  const Token& t = cur();
  ExprPtr first;
  if (!is_op(":")) {
    first = parse_expression();
    if (!is_op(":")) return first;
  }
  auto s = node(ExprKind::kSlice, t);
  s->b = std::move(first);
  next();  // ':'
  if (!is_op("]") && !is_op(",") && !is_op(":")) s->c = parse_expression();
  if (skip_op(":") && !is_op("]") && !is_op(",")) s->d = parse_expression();
  return s;
}

ArgExprs Parser::parse_call_args() {
  ArgExprs args;
  expect_op("(");
  while (!is_op(")")) {
    if (!args.pos.empty() || !args.kw.empty()) {
      expect_op(",");
      if (is_op(")")) break;
    }
    if (is_op("*") || is_op("**")) error(cur(), "*args and **kwargs in calls are not supported");
    if (cur().type == Tok::kName && look().type == Tok::kOp && look().text == "=") {
      std::string key = next().text;
      next();
      args.kw.emplace_back(std::move(key), parse_expression());
    } else {
      if (!args.kw.empty()) error(cur(), "positional argument follows keyword argument");
      args.pos.push_back(parse_expression());
    }
  }
  expect_op(")");
  return args;
}

ExprPtr Parser::parse_call(ExprPtr fn) {
  Nest nest(*this);
  auto e = node(ExprKind::kCall, cur());
  e->args = parse_call_args();
  e->a = std::move(fn);
  return e;
}

ExprPtr Parser::parse_filter(ExprPtr operand, bool start_inline) {
  Nest nest(*this);
  while (is_op("|") || start_inline) {
    if (!start_inline) next();
    start_inline = false;
    const Token& t = expect(Tok::kName, "filter name");
    std::string name = t.text;
    while (is_op(".")) {
      next();
      name += "." + expect(Tok::kName, "filter name").text;
    }
    auto e = node(ExprKind::kFilter, t);
    e->name = name;
    e->filter = find_filter(name);
    if (!e->filter) error(t, fmt::format("unknown filter '{}'", name));
    if (is_op("(")) e->args = parse_call_args();
    e->a = std::move(operand);
    operand = std::move(e);
  }
  return operand;
}

ExprPtr Parser::parse_test(ExprPtr operand) {
  Nest nest(*this);
  const Token& is_tok = next();
  const bool negated = skip_name("not");
  const Token& t = expect(Tok::kName, "test name");
  std::string name = t.text;
  while (is_op(".")) {
    next();
    name += "." + expect(Tok::kName, "test name").text;
  }
  auto e = node(ExprKind::kTest, t);
  e->name = name;
  e->test = find_test(name);
  if (!e->test) error(t, fmt::format("unknown test '{}'", name));
  const Token& c = cur();
  if (is_op("(")) {
    e->args = parse_call_args();
  } else if ((c.type == Tok::kName || c.type == Tok::kString || c.type == Tok::kInt ||
              c.type == Tok::kFloat || is_op("(") || is_op("[") || is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) error(c, "you cannot chain multiple tests with is");
    e->args.pos.push_back(parse_postfix(parse_primary()));
  }
  e->a = std::move(operand);
  if (!negated) return e;
  auto n = node(ExprKind::kNot, is_tok);
  n->a = std::move(e);
  return n;
}

}  // namespace ceiling::jinja
