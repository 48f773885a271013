// Registries of the callables templates reach by name: filters (`x | name`), tests
// (`x is name`), methods of str/dict/list (`s.strip()`), and the global functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/template/ast.h"

namespace ceiling::jinja {

FilterFn find_filter(std::string_view name);  // nullptr when unknown
TestFn find_test(std::string_view name);      // nullptr when unknown

// `self.name` as a bound method, or nullopt when `self` has no method of that name.
std::optional<Value> bind_method(const Value& self, std::string_view name);

// range, namespace, dict, raise_exception, strftime_now (what transformers' environment adds to
// Jinja's defaults that chat templates use).
std::vector<std::pair<std::string, Value>> make_globals();

}  // namespace ceiling::jinja
