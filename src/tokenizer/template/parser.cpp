#include "tokenizer/template/parser.h"

#include "core/status.h"
#include "tokenizer/template/builtins.h"

namespace ceiling::jinja {

std::shared_ptr<const Program> parse(std::string_view source, int max_depth) {
  auto program = std::make_shared<Program>();
  program->body = Parser(tokenize(source), max_depth).parse_template();
  return program;
}

Parser::Nest::Nest(Parser& p) : p_(p) {
  if (p_.depth_ >= p_.max_depth_) p_.error(p_.cur(), "template nested too deeply");
  ++p_.depth_;
}

std::string Parser::describe(const Token& t) {
  switch (t.type) {
    case Tok::kData:
      return "template data";
    case Tok::kVarBegin:
      return "'{{'";
    case Tok::kVarEnd:
      return "end of print statement";
    case Tok::kBlockBegin:
      return "'{%'";
    case Tok::kBlockEnd:
      return "end of statement block";
    case Tok::kName:
      return "'" + t.text + "'";
    case Tok::kString:
      return "string";
    case Tok::kInt:
      return "integer";
    case Tok::kFloat:
      return "float";
    case Tok::kOp:
      return "'" + t.text + "'";
    case Tok::kEof:
      return "end of template";
  }
  return "token";
}

void Parser::error(const Token& at, const std::string& msg) const {
  fail("line {} col {}: {}", at.line, at.col, msg);
}

bool Parser::skip_op(std::string_view op) {
  if (!is_op(op)) return false;
  next();
  return true;
}
bool Parser::skip_name(std::string_view n) {
  if (!is_name(n)) return false;
  next();
  return true;
}
const Token& Parser::expect_op(std::string_view op) {
  if (!is_op(op)) error(cur(), fmt::format("expected '{}', got {}", op, describe(cur())));
  return next();
}
const Token& Parser::expect(Tok type, std::string_view what) {
  if (cur().type != type) error(cur(), fmt::format("expected {}, got {}", what, describe(cur())));
  return next();
}

ExprPtr Parser::node(ExprKind kind, const Token& at) const {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = at.line;
  e->col = at.col;
  return e;
}

void Parser::link(int& links) const {
  if (depth_ + ++links > max_depth_) error(cur(), "expression nested too deeply");
}

Body Parser::parse_template() {
  Body body = subparse({});
  if (cur().type != Tok::kEof) error(cur(), "unexpected " + describe(cur()));
  return body;
}

// Statements until a `{% tag %}` whose name is in end_tags (left as the current token), or EOF.
Body Parser::subparse(const std::vector<std::string_view>& end_tags) {
  Nest nest(*this);
  Body body;
  for (;;) {
    const Token& t = cur();
    if (t.type == Tok::kEof) {
      if (end_tags.empty()) return body;
      std::string want;
      for (auto tag : end_tags) want += (want.empty() ? "'" : " or '") + std::string(tag) + "'";
      error(t, "unexpected end of template, expected " + want);
    }
    if (t.type == Tok::kData) {
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::kText;
      s->line = t.line, s->col = t.col;
      s->text = t.text;
      body.push_back(std::move(s));
      next();
    } else if (t.type == Tok::kVarBegin) {
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::kOutput;
      s->line = t.line, s->col = t.col;
      next();
      s->expr = parse_tuple();
      expect(Tok::kVarEnd, "end of print statement");
      body.push_back(std::move(s));
    } else if (t.type == Tok::kBlockBegin) {
      next();
      if (cur().type == Tok::kName)
        for (auto tag : end_tags)
          if (cur().text == tag) return body;
      body.push_back(parse_statement());
      expect(Tok::kBlockEnd, "end of statement block");
    } else {
      error(t, "unexpected " + describe(t));
    }
  }
}

Body Parser::parse_statements(const std::vector<std::string_view>& end_tags, bool drop_needle) {
  skip_op(":");
  expect(Tok::kBlockEnd, "end of statement block");
  Body body = subparse(end_tags);
  if (drop_needle) next();
  return body;
}

std::unique_ptr<Stmt> Parser::parse_statement() {
  Nest nest(*this);
  const Token& tag = cur();
  if (tag.type != Tok::kName) error(tag, "tag name expected");
  const std::string name = tag.text;
  next();
  if (name == "for") return parse_for(tag);
  if (name == "if") return parse_if(tag);
  if (name == "set") return parse_set(tag);
  if (name == "macro") return parse_macro(tag);
  if (name == "call") return parse_call_block(tag);
  if (name == "filter") return parse_filter_block(tag);
  if (name == "with") return parse_with(tag);
  if (name == "break" || name == "continue") {
    if (loop_depth_ == 0) error(tag, fmt::format("'{}' outside of a loop", name));
    auto s = std::make_unique<Stmt>();
    s->kind = name == "break" ? StmtKind::kBreak : StmtKind::kContinue;
    s->line = tag.line, s->col = tag.col;
    return s;
  }
  if (name == "generation") {  // transformers' assistant-mask marker: renders its body
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::kWith;
    s->line = tag.line, s->col = tag.col;
    s->body = parse_statements({"endgeneration"}, true);
    return s;
  }
  if (name == "include" || name == "import" || name == "from" || name == "extends" ||
      name == "block" || name == "autoescape" || name == "do")
    error(tag, fmt::format("tag '{}' is not supported in chat templates", name));
  if (name.rfind("end", 0) == 0 || name == "else" || name == "elif")
    error(tag, fmt::format("unexpected tag '{}'", name));
  error(tag, fmt::format("unknown tag '{}'", name));
}

std::unique_ptr<Stmt> Parser::parse_for(const Token& tag) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::kFor;
  s->line = tag.line, s->col = tag.col;
  s->target = parse_assign_target(false, "in");
  if (!skip_name("in")) error(cur(), "expected 'in', got " + describe(cur()));
  s->expr = parse_tuple(false, "recursive");
  if (skip_name("if")) s->cond = parse_expression();
  if (is_name("recursive")) error(cur(), "recursive loops are not supported");
  ++loop_depth_;
  s->body = parse_statements({"endfor", "else"}, false);
  --loop_depth_;
  if (next().text == "else") s->else_body = parse_statements({"endfor"}, true);
  return s;
}

std::unique_ptr<Stmt> Parser::parse_if(const Token& tag) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::kIf;
  s->line = tag.line, s->col = tag.col;
  for (;;) {
    ExprPtr cond = parse_tuple(false);
    Body body = parse_statements({"elif", "else", "endif"}, false);
    s->branches.emplace_back(std::move(cond), std::move(body));
    const std::string which = next().text;
    if (which == "elif") continue;
    if (which == "else") s->else_body = parse_statements({"endif"}, true);
    return s;
  }
}

std::unique_ptr<Stmt> Parser::parse_set(const Token& tag) {
  auto s = std::make_unique<Stmt>();
  s->line = tag.line, s->col = tag.col;
  s->target = parse_assign_target(true, {});
  if (skip_op("=")) {
    s->kind = StmtKind::kSet;
    s->expr = parse_tuple();
    return s;
  }
  s->kind = StmtKind::kSetBlock;
  if (is_op("|")) s->expr = parse_filter(nullptr, false);
  s->body = parse_statements({"endset"}, true);
  return s;
}

std::vector<MacroParam> Parser::parse_signature() {
  std::vector<MacroParam> params;
  expect_op("(");
  while (!is_op(")")) {
    if (!params.empty()) expect_op(",");
    const Token& n = expect(Tok::kName, "parameter name");
    MacroParam p{n.text, nullptr};
    if (skip_op("=")) {
      p.default_value = parse_expression();
    } else if (!params.empty() && params.back().default_value) {
      error(n, "non-default argument follows default argument");
    }
    params.push_back(std::move(p));
  }
  expect_op(")");
  return params;
}

std::unique_ptr<Stmt> Parser::parse_macro(const Token& tag) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::kMacro;
  s->line = tag.line, s->col = tag.col;
  s->text = expect(Tok::kName, "macro name").text;
  s->params = parse_signature();
  const int saved = loop_depth_;
  loop_depth_ = 0;
  s->body = parse_statements({"endmacro"}, true);
  loop_depth_ = saved;
  return s;
}

std::unique_ptr<Stmt> Parser::parse_call_block(const Token& tag) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::kCallBlock;
  s->line = tag.line, s->col = tag.col;
  if (is_op("(")) s->params = parse_signature();
  s->expr = parse_expression();
  if (s->expr->kind != ExprKind::kCall) error(tag, "expected call");
  const int saved = loop_depth_;
  loop_depth_ = 0;
  s->body = parse_statements({"endcall"}, true);
  loop_depth_ = saved;
  return s;
}

std::unique_ptr<Stmt> Parser::parse_filter_block(const Token& tag) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::kFilterBlock;
  s->line = tag.line, s->col = tag.col;
  s->expr = parse_filter(nullptr, true);
  s->body = parse_statements({"endfilter"}, true);
  return s;
}

std::unique_ptr<Stmt> Parser::parse_with(const Token& tag) {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::kWith;
  s->line = tag.line, s->col = tag.col;
  while (cur().type != Tok::kBlockEnd) {
    if (!s->assigns.empty()) expect_op(",");
    Target t = parse_assign_target(false, {});
    expect_op("=");
    s->assigns.emplace_back(std::move(t), parse_expression());
  }
  s->body = parse_statements({"endwith"}, true);
  return s;
}

// `name`, `a, b`, `(a, b)` or (with_namespace) `ns.attr`.
Target Parser::parse_assign_target(bool with_namespace, std::string_view extra_end) {
  Target t;
  if (with_namespace && cur().type == Tok::kName && look().type == Tok::kOp && look().text == ".") {
    t.names.push_back(next().text);
    next();
    t.attr = expect(Tok::kName, "attribute name").text;
    return t;
  }
  const bool parens = skip_op("(");
  for (;;) {
    if (!t.names.empty()) {
      if (!skip_op(",")) break;
      t.unpack = true;
    }
    if (parens ? is_op(")") : is_tuple_end(extra_end) || is_op("=")) break;
    const Token& n = expect(Tok::kName, "variable name");
    if (n.text == "true" || n.text == "false" || n.text == "none" || n.text == "True" ||
        n.text == "False" || n.text == "None")
      error(n, fmt::format("can't assign to '{}'", n.text));
    t.names.push_back(n.text);
  }
  if (parens) {
    expect_op(")");
    t.unpack = true;
  }
  if (t.names.empty()) error(cur(), "expected an assignment target, got " + describe(cur()));
  return t;
}

}  // namespace ceiling::jinja
