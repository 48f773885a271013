#include "core/json_bounded.h"

#include <fmt/format.h>

#include "core/status.h"

namespace ceiling {

namespace {

using nlohmann::json;

// Builds the DOM one event at a time; O(log n) per key, so linear overall up to that factor.
class DomBuilder final : public nlohmann::json_sax<json> {
 public:
  DomBuilder(BoundedJson& out, const JsonLimits& limits) : out_(out), limits_(limits) {}

  bool null() override { return value(nullptr); }
  bool boolean(bool v) override { return value(v); }
  bool number_integer(number_integer_t v) override { return value(v); }
  bool number_unsigned(number_unsigned_t v) override { return value(v); }
  bool number_float(number_float_t v, const string_t&) override { return value(v); }
  bool string(string_t& s) override { return value(std::move(s)); }
  bool binary(binary_t&) override { return refuse("binary values are not JSON"); }
  bool key(string_t& k) override {
    json& obj = *stack_.back();
    if (out_.duplicate_path.empty() && obj.contains(k)) {
      out_.duplicate_path = keys_;
      out_.duplicate_path.push_back(k);
    }
    key_ = std::move(k);
    return true;
  }
  bool start_object(std::size_t) override { return open(json::object()); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t byte, const std::string&,
                   const nlohmann::detail::exception& e) override {
    return refuse(fmt::format("syntax error at byte {}: {}", byte, json_error_rule(e)));
  }

 private:
  bool refuse(std::string why) {
    if (!out_.error) out_.error = std::move(why);
    return false;
  }
  json* insert(json&& v) {
    if (stack_.empty()) {
      out_.value = std::move(v);
      return &out_.value;
    }
    json& parent = *stack_.back();
    if (parent.is_object()) {
      json& slot = parent[key_];
      slot = std::move(v);
      return &slot;
    }
    parent.push_back(std::move(v));
    return &parent.back();
  }
  bool value(json&& v) {
    insert(std::move(v));
    return true;
  }
  bool open(json&& container) {
    if (stack_.size() >= static_cast<size_t>(limits_.max_depth))
      return refuse(fmt::format("nested deeper than {} levels", limits_.max_depth));
    const bool object = container.is_object();
    std::string k = !stack_.empty() && stack_.back()->is_object() ? key_ : std::string();
    stack_.push_back(insert(std::move(container)));
    if (object && stack_.size() > 1) keys_.push_back(std::move(k));
    objects_.push_back(object);
    return true;
  }
  bool close() {
    if (objects_.back() && stack_.size() > 1) keys_.pop_back();
    objects_.pop_back();
    stack_.pop_back();
    return true;
  }

  BoundedJson& out_;
  JsonLimits limits_;
  std::vector<json*> stack_;       // open containers, outermost first
  std::vector<bool> objects_;      // whether each open container is an object
  std::vector<std::string> keys_;  // key of each open nested object in its parent
  std::string key_;
};

}  // namespace

std::string json_error_rule(const std::exception& e) {
  std::string_view s = e.what();
  if (s.starts_with("[json.exception.")) {
    if (const size_t p = s.find("] "); p != std::string_view::npos) s.remove_prefix(p + 2);
  }
  if (const size_t p = s.find("; last read"); p != std::string_view::npos) s = s.substr(0, p);
  if (s.starts_with("number overflow")) return "number out of range";  // drop the '1e999' token
  return std::string(s);
}

BoundedJson parse_json_bounded(std::string_view text, const JsonLimits& limits) {
  BoundedJson out;
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    out.error = fmt::format("NUL byte at byte {} (JSON text cannot hold one)", nul);
    return out;
  }
  DomBuilder builder(out, limits);
  try {
    if (!json::sax_parse(text, &builder) && !out.error) out.error = "not valid JSON";
  } catch (const json::exception& e) {  // e.g. out_of_range: a number too large for a double
    out.error = json_error_rule(e);
  }
  if (out.error) out.value = nullptr;
  return out;
}

json parse_json_or_fail(std::string_view text, const std::string& origin,
                        const JsonLimits& limits) {
  BoundedJson r = parse_json_bounded(text, limits);
  if (r.error) fail("{}: not valid JSON ({})", origin, *r.error);
  return std::move(r.value);
}

}  // namespace ceiling
