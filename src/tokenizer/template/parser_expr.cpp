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
  int links = 0;
  while (is_name("if")) {
    link(links);
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
  int links = 0;
  while (is_name("or")) {
    link(links);
    auto n = node(ExprKind::kOr, next());
    n->a = std::move(e);
    n->b = parse_and();
    e = std::move(n);
  }
  return e;
}

ExprPtr Parser::parse_and() {
  ExprPtr e = parse_not();
  int links = 0;
  while (is_name("and")) {
    link(links);
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
  int links = 0;
  while (is_one_of(cur(), {"+", "-"})) {
    link(links);
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
  int links = 0;
  while (is_one_of(cur(), {"*", "/", "//", "%"})) {
    link(links);
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
  int links = 0;
  while (is_op("**")) {
    link(links);
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

}  // namespace ceiling::jinja
