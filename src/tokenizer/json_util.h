// Typed access to tokenizer.json / tokenizer_config.json fields. Every failure is one
// ceiling::Error naming the file and the field path ("tokenizer.json: model.vocab: ...").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace ceiling::tok {

using Json = nlohmann::json;

// A field path inside a named file, for error messages.
struct JsonPath {
  std::string file;
  std::string path;
  JsonPath operator/(std::string_view key) const {
    return {file, path.empty() ? std::string(key) : path + "." + std::string(key)};
  }
  JsonPath at(std::size_t i) const { return {file, path + "[" + std::to_string(i) + "]"}; }
  std::string str() const { return path.empty() ? file : file + ": " + path; }
};

const char* json_type_name(const Json& j);

[[noreturn]] inline void json_fail(const JsonPath& p, std::string_view rule) {
  fail("{}: {}", p.str(), rule);
}

// The member `key` of object `obj` (which must be an object), or nullptr when absent or null.
const Json* json_find(const Json& obj, std::string_view key, const JsonPath& p);
const Json& json_require(const Json& obj, std::string_view key, const JsonPath& p);

std::string json_string(const Json& j, const JsonPath& p);
bool json_bool(const Json& j, const JsonPath& p);
int64_t json_int(const Json& j, const JsonPath& p, int64_t lo, int64_t hi);
// A single Unicode character given as a one-character string.
char32_t json_char(const Json& j, const JsonPath& p);

std::optional<std::string> json_opt_string(const Json& obj, std::string_view key,
                                           const JsonPath& p);
bool json_opt_bool(const Json& obj, std::string_view key, const JsonPath& p, bool dflt);

// HF's pattern object: {"String": "literal"} or {"Regex": "pattern"} (defined in regex.cpp).
class SplitPattern;
SplitPattern parse_pattern(const Json& j, const JsonPath& p);

}  // namespace ceiling::tok
