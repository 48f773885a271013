// Tree-walking evaluator for a parsed template. One Renderer per render() call: it owns the
// per-render budget and every namespace() object created (their contents are cleared at the end
// so reference cycles through namespaces cannot leak). Variable scoping follows Jinja2: each
// for-loop iteration, macro call and with-block gets a child scope; if-blocks and the top level
// assign in place; namespace attributes are the way to carry state out of a loop.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/template/ast.h"
#include "tokenizer/template/budget.h"
#include "tokenizer/template/value.h"

namespace ceiling::jinja {

// An Error that already names its line/column (so outer frames pass it through unchanged).
class LocatedError : public Error {
 public:
  explicit LocatedError(const std::string& msg) : Error(msg) {}
};

struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  Value* lookup(std::string_view name);
  void set(std::string_view name, Value v);
};
using ScopePtr = std::shared_ptr<Scope>;

enum class Flow { kNormal, kBreak, kContinue };

class Renderer {
 public:
  Renderer(const Program& program, const ChatTemplateLimits& limits,
           std::optional<std::string> date_override);
  ~Renderer();
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  // Renders with `vars` as the template's context (over the globals).
  std::string render(std::vector<std::pair<std::string, Value>> vars);

  // Services for filters, tests, methods and globals.
  Budget& budget() { return budget_; }
  const std::optional<std::string>& date_override() const { return date_override_; }
  std::string str(const Value& v) { return to_str(v, budget_); }
  Value call(const Value& fn, CallArgs& args);
  Value getattr(const Value& obj, std::string_view name);  // Jinja's environment.getattr
  Value getitem(const Value& obj, const Value& key);       // Jinja's environment.getitem
  std::vector<Value> iterate(const Value& v);              // for-loop / filter iteration
  Value make_namespace(std::vector<std::pair<std::string, Value>> attrs);

 private:
  Flow exec_body(const Body& body, const ScopePtr& scope, std::string& out);
  Flow exec(const Stmt& s, const ScopePtr& scope, std::string& out);
  Flow exec_inner(const Stmt& s, const ScopePtr& scope, std::string& out);
  Flow exec_for(const Stmt& s, const ScopePtr& scope, std::string& out);
  void exec_set(const Stmt& s, const ScopePtr& scope, Value v);
  Value make_macro(const Stmt& s, const ScopePtr& closure, std::string name);
  Value call_macro(const Stmt& s, const std::weak_ptr<Scope>& closure, CallArgs& args);
  void assign(const Target& t, const Value& v, Scope& scope);
  void append(std::string& out, std::string_view text);

  Value eval(const Expr& e, const ScopePtr& scope);
  Value eval_inner(const Expr& e, const ScopePtr& scope);
  Value eval_filter(const Expr& e, const ScopePtr& scope, const Value* operand);
  Value eval_slice(const Expr& e, const ScopePtr& scope);
  Value eval_compare(const Expr& e, const ScopePtr& scope);
  CallArgs eval_args(const ArgExprs& args, const ScopePtr& scope);

  const Program& program_;
  Budget budget_;
  std::optional<std::string> date_override_;
  std::vector<std::shared_ptr<NamespaceData>> namespaces_;
};

}  // namespace ceiling::jinja
