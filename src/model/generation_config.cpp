#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/file_read.h"
#include "core/json_bounded.h"
#include "core/status.h"
#include "model/loader.h"

namespace ceiling {

namespace {

using nlohmann::json;

const json* field(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::optional<float> get_float(const json& j, const char* key, double lo, double hi, bool lo_open,
                               const std::string& origin) {
  const json* v = field(j, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) fail("{}: field '{}' must be a number", origin, key);
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || (lo_open && d == lo) || d > hi)
    fail("{}: field '{}' is {} but must be in {}{}, {}]", origin, key, d, lo_open ? "(" : "[", lo,
         hi);
  return static_cast<float>(d);
}

std::optional<int> get_int(const json& j, const char* key, int64_t lo, const std::string& origin) {
  const json* v = field(j, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer()) fail("{}: field '{}' must be an integer", origin, key);
  const int64_t x = v->is_number_unsigned() && v->get<uint64_t>() > uint64_t{INT32_MAX}
                        ? int64_t{INT32_MAX} + 1
                        : v->get<int64_t>();
  if (x < lo || x > std::numeric_limits<int32_t>::max())
    fail("{}: field '{}' is {} but must be in [{}, {}]", origin, key, x, lo,
         std::numeric_limits<int32_t>::max());
  return static_cast<int>(x);
}

}  // namespace

GenerationDefaults parse_generation_config(std::string_view text, const std::string& origin) {
  const json j = parse_json_or_fail(text, origin);
  if (!j.is_object()) fail("{}: top level must be a JSON object", origin);
  constexpr double kHuge = 1e30;
  GenerationDefaults g;
  g.temperature = get_float(j, "temperature", 0.0, kHuge, false, origin);
  g.top_p = get_float(j, "top_p", 0.0, 1.0, false, origin);
  g.min_p = get_float(j, "min_p", 0.0, 1.0, false, origin);
  g.repetition_penalty = get_float(j, "repetition_penalty", 0.0, kHuge, true, origin);
  g.top_k = get_int(j, "top_k", 0, origin);
  g.max_new_tokens = get_int(j, "max_new_tokens", 1, origin);
  if (const json* v = field(j, "do_sample")) {
    if (!v->is_boolean()) fail("{}: field 'do_sample' must be a boolean", origin);
    g.do_sample = v->get<bool>();
  }
  g.bos_token_id = get_int(j, "bos_token_id", 0, origin);
  if (const json* v = field(j, "eos_token_id")) {
    auto one = [&](const json& e) {
      if (!e.is_number_integer() || e.get<int64_t>() < 0 ||
          (e.is_number_unsigned() && e.get<uint64_t>() > uint64_t{INT32_MAX}) ||
          e.get<int64_t>() > std::numeric_limits<int32_t>::max())
        fail("{}: field 'eos_token_id' must be a non-negative integer or a list of them", origin);
      g.eos_token_ids.push_back(e.get<int>());
    };
    if (v->is_array())
      for (const auto& e : *v) one(e);
    else
      one(*v);
  }
  return g;
}

GenerationDefaults load_generation_config(const std::filesystem::path& dir) {
  constexpr const char* kName = "generation_config.json";
  if (!dir_entry_present(dir, kName)) return {};
  return parse_generation_config(
      read_model_file(dir, kName, "generation config", kMaxConfigJsonBytes),
      (dir / kName).string());
}

}  // namespace ceiling
