// Postfix expressions: attribute and item access, slices, calls, filters and tests.
#include "core/status.h"
#include "tokenizer/template/builtins.h"
#include "tokenizer/template/parser.h"

namespace ceiling::jinja {

ExprPtr Parser::parse_postfix(ExprPtr e) {
  for (int links = 0;; link(links)) {
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
  for (int links = 0;; link(links)) {
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
  for (int links = 0; is_op("|") || start_inline; link(links)) {
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
