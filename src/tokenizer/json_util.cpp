#include "tokenizer/json_util.h"

#include "tokenizer/utf8.h"

namespace ceiling::tok {

const char* json_type_name(const Json& j) {
  return j.type_name();
}

const Json* json_find(const Json& obj, std::string_view key, const JsonPath& p) {
  if (!obj.is_object()) json_fail(p, fmt::format("expected an object, got {}", obj.type_name()));
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

const Json& json_require(const Json& obj, std::string_view key, const JsonPath& p) {
  const Json* j = json_find(obj, key, p);
  if (j == nullptr) json_fail(p / key, "missing");
  return *j;
}

std::string json_string(const Json& j, const JsonPath& p) {
  if (!j.is_string()) json_fail(p, fmt::format("expected a string, got {}", j.type_name()));
  return j.get<std::string>();
}

bool json_bool(const Json& j, const JsonPath& p) {
  if (!j.is_boolean()) json_fail(p, fmt::format("expected true/false, got {}", j.type_name()));
  return j.get<bool>();
}

int64_t json_int(const Json& j, const JsonPath& p, int64_t lo, int64_t hi) {
  int64_t v = 0;
  if (j.is_number_unsigned()) {
    const auto u = j.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) json_fail(p, fmt::format("{} is above {}", u, hi));
    v = static_cast<int64_t>(u);
  } else if (j.is_number_integer()) {
    v = j.get<int64_t>();
  } else {
    json_fail(p, fmt::format("expected an integer, got {}", j.type_name()));
  }
  if (v < lo || v > hi) json_fail(p, fmt::format("{} is outside [{}, {}]", v, lo, hi));
  return v;
}

char32_t json_char(const Json& j, const JsonPath& p) {
  const std::string s = json_string(j, p);
  char32_t c = 0;
  if (s.empty() || utf8_decode(s, 0, &c) != static_cast<int>(s.size())) {
    json_fail(p, fmt::format("expected one character, got \"{}\"", s));
  }
  return c;
}

std::optional<std::string> json_opt_string(const Json& obj, std::string_view key,
                                           const JsonPath& p) {
  const Json* j = json_find(obj, key, p);
  if (j == nullptr) return std::nullopt;
  return json_string(*j, p / key);
}

bool json_opt_bool(const Json& obj, std::string_view key, const JsonPath& p, bool dflt) {
  const Json* j = json_find(obj, key, p);
  return j == nullptr ? dflt : json_bool(*j, p / key);
}

}  // namespace ceiling::tok
