// Python's text forms of values: float repr, str repr (quote choice and escapes), and
// json.dumps as transformers' tojson override calls it (ensure_ascii=False by default, key order
// kept unless sort_keys, Python's separators and indent rules).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "tokenizer/template/value.h"

namespace ceiling::jinja {

std::string py_float_repr(double d);
void py_string_repr(std::string_view s, std::string& out);

struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;                              // nullopt: one line
  std::optional<std::pair<std::string, std::string>> separators;  // (item, key)
  bool sort_keys = false;
};
void json_dumps(const Value& v, const JsonDumpOptions& opt, std::string& out, Budget& b);

}  // namespace ceiling::jinja
