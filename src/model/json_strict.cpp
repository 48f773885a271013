#include "model/json_strict.h"

#include <fmt/format.h>

#include <set>

namespace ceiling {

StrictJson parse_json_strict(std::string_view text) {
  using nlohmann::json;
  StrictJson out;
  std::vector<std::set<std::string, std::less<>>> seen;  // keys of each open object
  std::vector<std::string> path;                         // last key at each open object
  json::parser_callback_t cb = [&](int, json::parse_event_t ev, json& parsed) {
    switch (ev) {
      case json::parse_event_t::object_start:
        seen.emplace_back();
        path.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!seen.empty()) seen.pop_back();
        if (!path.empty()) path.pop_back();
        break;
      case json::parse_event_t::key:
        if (!seen.empty() && parsed.is_string()) {
          const auto& k = parsed.get_ref<const std::string&>();
          path.back() = k;
          if (!seen.back().insert(k).second && out.duplicate_path.empty())
            out.duplicate_path = path;
        }
        break;
      default:
        break;
    }
    return true;
  };
  try {
    out.value = json::parse(text, cb, /*allow_exceptions=*/true);
  } catch (const json::parse_error& e) {
    out.syntax_error = fmt::format("syntax error at byte {}", e.byte);
  } catch (const json::exception&) {  // e.g. out_of_range: a number too large for a double
    out.syntax_error = "number out of range";
  }
  return out;
}

}  // namespace ceiling
