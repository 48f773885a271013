// JSON parsing for text from outside (model files, CLI flags, request bodies): one linear SAX
// pass that builds the DOM, with the nesting depth capped at parse time, any NUL byte refused
// (nlohmann's lexer would take it as the end of the input and drop what follows) and nothing
// but whitespace allowed after the value. Errors give the byte offset and the rule, never the
// text. Time is linear in the input; memory is the DOM (at most ~40 bytes per input byte, the
// worst case being `[0,0,…]`; tests/core/json_bounded_test.cpp measures it).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ceiling {

struct JsonLimits {
  int max_depth = 64;  // open arrays + objects at once
};

struct BoundedJson {
  nlohmann::json value;
  std::optional<std::string> error;  // set when the text is refused: where and why, no excerpt
  // Keys from the top-level object down to the first key that appears twice in one object
  // (empty when none), e.g. {"weight_map", "x"} for a tensor listed twice in an index.
  std::vector<std::string> duplicate_path;
};

BoundedJson parse_json_bounded(std::string_view text, const JsonLimits& limits = {});

// parse_json_bounded that throws "<origin>: not valid JSON (<why>)". Duplicate keys keep the
// last value, as Python's json does.
nlohmann::json parse_json_or_fail(std::string_view text, const std::string& origin,
                                  const JsonLimits& limits = {});

// nlohmann's exception text without its "[json.exception…]" tag and "last read: '…'" excerpt.
std::string json_error_rule(const std::exception& e);

}  // namespace ceiling
