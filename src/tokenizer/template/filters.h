// The filter functions (Jinja2 semantics; names with a trailing _ avoid C++ keywords).
#pragma once

#include "tokenizer/template/value.h"

namespace ceiling::jinja::filters {

#define CEILING_JINJA_FILTER(name) Value name(Renderer& r, const Value& v, CallArgs& a)
// filters.cpp: scalars and strings.
CEILING_JINJA_FILTER(abs_);
CEILING_JINJA_FILTER(attribute);
CEILING_JINJA_FILTER(capitalize);
CEILING_JINJA_FILTER(center);
CEILING_JINJA_FILTER(default_);
CEILING_JINJA_FILTER(escape);
CEILING_JINJA_FILTER(float_);
CEILING_JINJA_FILTER(format);
CEILING_JINJA_FILTER(indent);
CEILING_JINJA_FILTER(int_);
CEILING_JINJA_FILTER(lower);
CEILING_JINJA_FILTER(upper);
CEILING_JINJA_FILTER(replace);
CEILING_JINJA_FILTER(round_);
CEILING_JINJA_FILTER(safe);
CEILING_JINJA_FILTER(string);
CEILING_JINJA_FILTER(title);
CEILING_JINJA_FILTER(tojson);
CEILING_JINJA_FILTER(trim);
CEILING_JINJA_FILTER(wordcount);
// filters_seq.cpp: sequences and mappings.
CEILING_JINJA_FILTER(dictsort);
CEILING_JINJA_FILTER(first);
CEILING_JINJA_FILTER(items);
CEILING_JINJA_FILTER(join);
CEILING_JINJA_FILTER(last);
CEILING_JINJA_FILTER(length);
CEILING_JINJA_FILTER(list);
CEILING_JINJA_FILTER(map);
CEILING_JINJA_FILTER(max);
CEILING_JINJA_FILTER(min);
CEILING_JINJA_FILTER(reject);
CEILING_JINJA_FILTER(rejectattr);
CEILING_JINJA_FILTER(reverse);
CEILING_JINJA_FILTER(select);
CEILING_JINJA_FILTER(selectattr);
CEILING_JINJA_FILTER(sort);
CEILING_JINJA_FILTER(sum);
CEILING_JINJA_FILTER(unique);
#undef CEILING_JINJA_FILTER

}  // namespace ceiling::jinja::filters
