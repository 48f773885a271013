// Parser for the Jinja2 subset chat templates use (see chat_template.h for the list). Follows
// jinja2/parser.py's grammar and precedence. Unknown tags, filters and tests are syntax errors,
// reported as ceiling::Error "line L col C: problem"; nesting is bounded by max_depth.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/template/ast.h"
#include "tokenizer/template/lexer.h"

namespace ceiling::jinja {

std::shared_ptr<const Program> parse(std::string_view source, int max_depth);

// Implementation detail shared by parser.cpp (statements) and parser_expr.cpp (expressions).
class Parser {
 public:
  Parser(std::vector<Token> tokens, int max_depth)
      : toks_(std::move(tokens)), max_depth_(max_depth) {}
  Body parse_template();

 private:
  // Statements (parser.cpp).
  Body subparse(const std::vector<std::string_view>& end_tags);
  Body parse_statements(const std::vector<std::string_view>& end_tags, bool drop_needle);
  std::unique_ptr<Stmt> parse_statement();
  std::unique_ptr<Stmt> parse_for(const Token& tag);
  std::unique_ptr<Stmt> parse_if(const Token& tag);
  std::unique_ptr<Stmt> parse_set(const Token& tag);
  std::unique_ptr<Stmt> parse_macro(const Token& tag);
  std::unique_ptr<Stmt> parse_call_block(const Token& tag);
  std::unique_ptr<Stmt> parse_filter_block(const Token& tag);
  std::unique_ptr<Stmt> parse_with(const Token& tag);
  std::vector<MacroParam> parse_signature();
  Target parse_assign_target(bool with_namespace, std::string_view extra_end);

  // Expressions (parser_expr.cpp).
  ExprPtr parse_tuple(bool with_condexpr = true, std::string_view extra_end = {},
                      bool explicit_parens = false);
  ExprPtr parse_expression(bool with_condexpr = true);
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter = true);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  ExprPtr parse_subscribed();
  ExprPtr parse_call(ExprPtr node);
  ExprPtr parse_filter(ExprPtr node, bool start_inline);
  ExprPtr parse_test(ExprPtr node);
  ArgExprs parse_call_args();
  bool is_tuple_end(std::string_view extra_end) const;

  // Token stream.
  const Token& cur() const { return toks_[pos_]; }
  const Token& look() const { return toks_[pos_ + 1 < toks_.size() ? pos_ + 1 : pos_]; }
  const Token& next() { return toks_[pos_ < toks_.size() - 1 ? pos_++ : pos_]; }
  bool is_op(std::string_view op) const { return cur().type == Tok::kOp && cur().text == op; }
  bool is_name(std::string_view n) const { return cur().type == Tok::kName && cur().text == n; }
  bool skip_op(std::string_view op);
  bool skip_name(std::string_view n);
  const Token& expect_op(std::string_view op);
  const Token& expect(Tok type, std::string_view what);
  [[noreturn]] void error(const Token& at, const std::string& msg) const;
  static std::string describe(const Token& t);
  ExprPtr node(ExprKind kind, const Token& at) const;
  // Left-deep chains (a + b + c, x.y.z, x|f|g) deepen the tree without recursing in the parser;
  // each link counts against max_depth so evaluating and destroying the tree stays bounded.
  void link(int& links) const;

  // Nesting guard for recursive descent.
  class Nest {
   public:
    explicit Nest(Parser& p);
    ~Nest() { --p_.depth_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;

   private:
    Parser& p_;
  };

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int max_depth_;
  int depth_ = 0;
  int loop_depth_ = 0;  // break/continue are only valid inside a for body
};

}  // namespace ceiling::jinja
