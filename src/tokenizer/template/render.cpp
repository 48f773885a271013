#include "tokenizer/template/render.h"

#include "tokenizer/template/builtins.h"
#include "tokenizer/template/operators.h"

namespace ceiling::jinja {

Value* Scope::lookup(std::string_view name) {
  for (Scope* s = this; s; s = s->parent.get())
    for (auto& [k, v] : s->vars)
      if (k == name) return &v;
  return nullptr;
}

void Scope::set(std::string_view name, Value v) {
  for (auto& [k, old] : vars)
    if (k == name) {
      old = std::move(v);
      return;
    }
  vars.emplace_back(std::string(name), std::move(v));
}

Renderer::Renderer(const Program& program, const ChatTemplateLimits& limits,
                   std::optional<std::string> date_override)
    : program_(program), budget_(limits), date_override_(std::move(date_override)) {}

// Namespaces can hold themselves (ns.a = ns); emptying them breaks every such cycle.
Renderer::~Renderer() {
  for (auto& ns : namespaces_) ns->attrs.clear();
}

Value Renderer::make_namespace(std::vector<std::pair<std::string, Value>> attrs) {
  budget_.step();
  auto ns = std::make_shared<NamespaceData>();
  ns->attrs = std::move(attrs);
  namespaces_.push_back(ns);
  return Value::ns(std::move(ns));
}

std::string Renderer::render(std::vector<std::pair<std::string, Value>> vars) {
  auto globals = std::make_shared<Scope>();
  globals->vars = make_globals();
  auto root = std::make_shared<Scope>();
  root->parent = globals;
  root->vars = std::move(vars);
  std::string out;
  exec_body(program_.body, root, out);
  return out;
}

void Renderer::append(std::string& out, std::string_view text) {
  budget_.check_size(out.size() + text.size());
  budget_.charge(text.size());
  budget_.alloc_bytes(text.size());
  out += text;
}

Flow Renderer::exec_body(const Body& body, const ScopePtr& scope, std::string& out) {
  for (const auto& s : body) {
    const Flow f = exec(*s, scope, out);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

// Errors not already located inside an expression get the statement's position.
Flow Renderer::exec(const Stmt& s, const ScopePtr& scope, std::string& out) {
  try {
    Budget::Nest nest(budget_);
    return exec_inner(s, scope, out);
  } catch (const LocatedError&) {
    throw;
  } catch (const ChatTemplateRaised&) {
    throw;
  } catch (const Error& err) {
    throw LocatedError(fmt::format("line {} col {}: {}", s.line, s.col, err.what()));
  }
}

Flow Renderer::exec_inner(const Stmt& s, const ScopePtr& scope, std::string& out) {
  switch (s.kind) {
    case StmtKind::kText:
      append(out, s.text);
      return Flow::kNormal;
    case StmtKind::kOutput: {
      const Value v = eval(*s.expr, scope);
      if (v.is_string()) {
        append(out, v.as_string());
      } else {
        append(out, str(v));
      }
      return Flow::kNormal;
    }
    case StmtKind::kIf:
      for (const auto& [cond, body] : s.branches)
        if (truthy(eval(*cond, scope))) return exec_body(body, scope, out);
      return exec_body(s.else_body, scope, out);
    case StmtKind::kFor:
      return exec_for(s, scope, out);
    case StmtKind::kSet:
      exec_set(s, scope, eval(*s.expr, scope));
      return Flow::kNormal;
    case StmtKind::kSetBlock:
    case StmtKind::kFilterBlock: {
      std::string captured;
      auto inner = std::make_shared<Scope>();
      inner->parent = scope;
      exec_body(s.body, s.kind == StmtKind::kSetBlock ? scope : inner, captured);
      Value v = Value::string(std::move(captured));
      if (s.expr) v = eval_filter(*s.expr, scope, &v);
      if (s.kind == StmtKind::kSetBlock) {
        exec_set(s, scope, std::move(v));
      } else {
        append(out, str(v));
      }
      return Flow::kNormal;
    }
    case StmtKind::kMacro:
      scope->set(s.text, make_macro(s, scope, s.text));
      return Flow::kNormal;
    case StmtKind::kCallBlock: {
      const Expr& call = *s.expr;
      Value fn = eval(*call.a, scope);
      CallArgs args = eval_args(call.args, scope);
      args.kw.emplace_back("caller", make_macro(s, scope, "caller"));
      append(out, str(this->call(fn, args)));
      return Flow::kNormal;
    }
    case StmtKind::kWith: {
      auto inner = std::make_shared<Scope>();
      inner->parent = scope;
      for (const auto& [target, expr] : s.assigns) assign(target, eval(*expr, scope), *inner);
      return exec_body(s.body, inner, out);
    }
    case StmtKind::kBreak:
      return Flow::kBreak;
    case StmtKind::kContinue:
      return Flow::kContinue;
  }
  return Flow::kNormal;
}

Flow Renderer::exec_for(const Stmt& s, const ScopePtr& scope, std::string& out) {
  std::vector<Value> items = iterate(eval(*s.expr, scope));
  if (s.cond) {  // the `if` filter runs before loop.* is computed
    std::vector<Value> kept;
    for (auto& item : items) {
      budget_.step();
      auto probe = std::make_shared<Scope>();
      probe->parent = scope;
      assign(s.target, item, *probe);
      if (truthy(eval(*s.cond, probe))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  const auto n = static_cast<int64_t>(items.size());
  const int depth = max_nesting(items) + 2;  // loop -> items vector -> item
  const auto shared = std::make_shared<const std::vector<Value>>(std::move(items));
  for (int64_t i = 0; i < n; ++i) {
    budget_.step();
    auto iter = std::make_shared<Scope>();
    iter->parent = scope;
    assign(s.target, (*shared)[static_cast<size_t>(i)], *iter);
    iter->set("loop", Value::loop(std::make_shared<const LoopData>(LoopData{shared, i, depth})));
    const Flow f = exec_body(s.body, iter, out);
    if (f == Flow::kBreak) break;
  }
  if (n == 0) return exec_body(s.else_body, scope, out);
  return Flow::kNormal;
}

void Renderer::exec_set(const Stmt& s, const ScopePtr& scope, Value v) {
  if (s.target.attr.empty()) return assign(s.target, v, *scope);
  Value* ns = scope->lookup(s.target.names[0]);
  if (!ns || ns->kind() != Value::Kind::kNamespace)
    fail("cannot assign attribute on non-namespace object");
  if (s.target.attr[0] == '_')
    fail("chat templates cannot store underscore-prefixed attributes on a namespace, but got '{}'",
         s.target.attr);
  NamespaceData& data = ns->as_ns();
  if (Value* slot = data.find(s.target.attr)) {
    *slot = std::move(v);
  } else {
    data.attrs.emplace_back(s.target.attr, std::move(v));
  }
}

void Renderer::assign(const Target& t, const Value& v, Scope& scope) {
  if (!t.unpack) return scope.set(t.names[0], v);
  std::vector<Value> items = iterate(v);
  if (items.size() > t.names.size())
    fail("too many values to unpack (expected {})", t.names.size());
  if (items.size() < t.names.size())
    fail("not enough values to unpack (expected {}, got {})", t.names.size(), items.size());
  for (size_t i = 0; i < items.size(); ++i) scope.set(t.names[i], std::move(items[i]));
}

// Macros (and call-block callers) hold their defining scope weakly: scopes hold macros, so a
// strong reference would be a cycle.
Value Renderer::make_macro(const Stmt& s, const ScopePtr& closure, std::string name) {
  std::weak_ptr<Scope> weak = closure;
  const Stmt* stmt = &s;
  return Value::function(std::move(name), [stmt, weak](Renderer& r, CallArgs& args) {
    return r.call_macro(*stmt, weak, args);
  });
}

Value Renderer::call_macro(const Stmt& s, const std::weak_ptr<Scope>& closure, CallArgs& args) {
  budget_.step();
  ScopePtr parent = closure.lock();
  if (!parent) fail("macro called after the scope that defined it ended");
  auto scope = std::make_shared<Scope>();
  scope->parent = parent;
  std::vector<Value> varargs;
  for (size_t i = 0; i < args.pos.size(); ++i) {
    if (i < s.params.size()) {
      scope->set(s.params[i].name, args.pos[i]);
    } else {
      varargs.push_back(args.pos[i]);
    }
  }
  std::vector<std::pair<Value, Value>> kwargs;
  for (auto& [k, v] : args.kw) {
    bool is_param = k == "caller";
    for (const auto& p : s.params) is_param = is_param || p.name == k;
    if (is_param) {
      scope->set(k, v);
    } else {
      kwargs.emplace_back(Value::string(k), v);
    }
  }
  for (const auto& p : s.params) {
    bool bound = false;
    for (const auto& [k, v] : scope->vars) bound = bound || k == p.name;
    if (bound) continue;
    scope->set(p.name, p.default_value ? eval(*p.default_value, scope)
                                       : Value::undefined(fmt::format(
                                             "parameter '{}' was not provided", p.name)));
  }
  scope->set("varargs", Value::list(std::move(varargs), true));
  scope->set("kwargs", Value::dict(std::move(kwargs)));
  std::string out;
  exec_body(s.body, scope, out);
  return Value::string(std::move(out));
}

}  // namespace ceiling::jinja
