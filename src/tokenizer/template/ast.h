// The parsed template: statements and expressions, each with the line/column it came from so
// runtime errors can name it. Built once by the parser, then read-only (renders share it).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/template/value.h"

namespace ceiling::jinja {

using FilterFn = Value (*)(Renderer&, const Value& operand, CallArgs& args);
using TestFn = bool (*)(Renderer&, const Value& operand, CallArgs& args);

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct ArgExprs {
  std::vector<ExprPtr> pos;
  std::vector<std::pair<std::string, ExprPtr>> kw;
};

enum class ExprKind {
  kConst,    // value
  kName,     // name
  kList,     // items
  kTuple,    // items
  kDict,     // items: key, value, key, value, ...
  kGetAttr,  // a.name
  kGetItem,  // a[b]
  kSlice,    // a[b:c:d], any of b, c, d may be null
  kCall,     // a(args)
  kFilter,   // a | name(args); `a` is null inside {% filter %} / {% set x | f %}
  kTest,     // a is name(args)
  kNeg,      // -a
  kPos,      // +a
  kNot,      // not a
  kAnd,      // a and b
  kOr,       // a or b
  kBinary,   // a <name> b, name in + - * / // % **
  kConcat,   // items joined with ~
  kCompare,  // items[0] ops[0] items[1] ops[1] items[2] ...
  kCond,     // a if b else c; c may be null
};

struct Expr {
  ExprKind kind = ExprKind::kConst;
  int line = 0, col = 0;
  Value value;
  std::string name;
  ExprPtr a, b, c, d;
  std::vector<ExprPtr> items;
  std::vector<std::string> ops;
  ArgExprs args;
  FilterFn filter = nullptr;  // resolved at parse time: unknown names are syntax errors
  TestFn test = nullptr;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

// An assignment target: `x`, `a, b` (unpacking) or `ns.attr` (namespace attribute).
struct Target {
  std::vector<std::string> names;
  std::string attr;  // non-empty: names[0].attr
  bool unpack = false;
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // may be null
};

enum class StmtKind {
  kText,         // text
  kOutput,       // {{ expr }}
  kIf,           // branches (cond, body)..., else_body
  kFor,          // for target in expr [if cond] body [else else_body]
  kSet,          // set target = expr
  kSetBlock,     // set target [| filter] body endset
  kMacro,        // macro name(params) body
  kCallBlock,    // call(params) expr body
  kFilterBlock,  // filter expr(with null innermost operand) body
  kWith,         // with assigns body
  kBreak,
  kContinue,
};

struct Stmt {
  StmtKind kind = StmtKind::kText;
  int line = 0, col = 0;
  std::string text;  // kText; macro name
  ExprPtr
      expr;  // kOutput, kFor iterable, kSet value, kCallBlock call, kFilterBlock/kSetBlock filter
  ExprPtr cond;  // kFor filter
  Target target;
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::vector<std::pair<Target, ExprPtr>> assigns;  // kWith
  std::vector<MacroParam> params;                   // kMacro, kCallBlock
  Body body, else_body;
};

struct Program {
  Body body;
};

}  // namespace ceiling::jinja
