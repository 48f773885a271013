// Python's operators on Values: arithmetic (+ - * / // % **) with int overflow reported instead
// of wrapping, `in`, subscripting and slicing with negative indices and steps, and
// %-formatting (`"%s" % x`, the `format` filter).
#pragma once

#include <optional>
#include <string_view>

#include "tokenizer/template/value.h"

namespace ceiling::jinja {

[[noreturn]] void undefined_error(const Value& u);

Value binary_op(std::string_view op, const Value& a, const Value& b, Budget& budget);
Value negate(const Value& a);
bool contains(const Value& container, const Value& item, Budget& budget);

// obj[key] for an int/bool key on a str/list/tuple; nullopt when out of range or not indexable.
std::optional<Value> index_item(const Value& obj, const Value& key);
// obj[start:stop:step]; null pointers are omitted bounds.
Value slice(const Value& obj, const Value* start, const Value* stop, const Value* step,
            Budget& budget);

// Python's printf-style formatting: %s %r %d %i %f %e %g %x %o %c %% with flags/width/precision.
Value percent_format(const std::string& fmt, const Value& args, Budget& budget);

}  // namespace ceiling::jinja
