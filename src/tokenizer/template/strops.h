// Python str methods over UTF-8 (code-point aware), shared by filters and methods.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/template/budget.h"

namespace ceiling::jinja {

// chars == nullptr strips Python whitespace.
std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right);
// sep == nullptr splits on whitespace runs; maxsplit < 0 is unlimited.
std::vector<std::string> py_split(std::string_view s, const std::string* sep, int64_t maxsplit,
                                  bool from_right);
std::vector<std::string> py_splitlines(std::string_view s, bool keepends);
std::string py_replace(std::string_view s, std::string_view old, std::string_view repl,
                       int64_t count, Budget& b);
std::string py_capitalize(std::string_view s);
std::string py_title(std::string_view s);     // str.title()
std::string jinja_title(std::string_view s);  // Jinja's `title` filter
std::string html_escape(std::string_view s);
// Code-point index of the first (or last) occurrence, -1 when absent.
int64_t py_find(std::string_view s, std::string_view sub, bool last);
int64_t py_count(std::string_view s, std::string_view sub);
std::string py_pad(std::string_view s, int64_t width, std::string_view fill, char align,
                   Budget& b);  // align: '<' ljust, '>' rjust, '^' center

}  // namespace ceiling::jinja
