// JSON parsing for untrusted model files: like nlohmann::json::parse, but a key that appears twice
// in one object is reported instead of silently keeping one of the values.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ceiling {

struct StrictJson {
  nlohmann::json value;
  std::optional<std::string> syntax_error;  // set when the text is not JSON: where and why
  // Keys from the top-level object down to the first duplicated key (empty when none), e.g.
  // {"weight_map", "x"} for a tensor listed twice in an index's weight_map.
  std::vector<std::string> duplicate_path;
};

StrictJson parse_json_strict(std::string_view text);

}  // namespace ceiling
