#include "tokenizer/template/chat_template.h"

#include <map>

#include "core/file_read.h"
#include "core/json_bounded.h"
#include "tokenizer/template/parser.h"
#include "tokenizer/template/render.h"

namespace ceiling {
namespace {

using ojson = nlohmann::ordered_json;

// tokenizer_config.json's cap (tokenizer/tokenizer.h); templates have their own, at parse.
constexpr uint64_t kMaxConfigBytes = 64ull << 20;

// Errors are one line: newlines from template text or values are shown escaped.
std::string one_line(std::string_view msg) {
  std::string out;
  for (char c : msg) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += c;
    }
  }
  return out;
}

// transformers' get_chat_template: `tool_use` when tools are given and it exists, else `default`.
std::string pick(const std::map<std::string, std::string>& named, bool has_tools,
                 const std::string& where) {
  if (has_tools && named.count("tool_use")) return named.at("tool_use");
  if (named.count("default")) return named.at("default");
  std::string names;
  for (const auto& [k, v] : named) names += (names.empty() ? "" : ", ") + k;
  fail("{}: several chat templates ({}) and none named 'default'", where, names);
}

// What apply_chat_template does to each message before rendering: keys whose value is null are
// dropped, and reasoning under any of its names is also exposed as `thinking` and
// `reasoning_content` (in that key order).
ojson normalize_message(const ojson& m, size_t index) {
  if (!m.is_object()) fail("chat message {} is a {}, not an object", index, m.type_name());
  ojson out = ojson::object();
  for (const auto& [k, v] : m.items())
    if (!v.is_null()) out[k] = v;
  for (const char* key : {"reasoning_content", "thinking", "reasoning"}) {
    if (!out.contains(key)) continue;
    const ojson reasoning = out[key];
    ojson aliased = ojson::object();
    aliased["thinking"] = reasoning;
    for (const auto& [k, v] : out.items()) aliased[k] = v;
    aliased["reasoning_content"] = reasoning;
    return aliased;
  }
  return out;
}

}  // namespace

ChatTemplate::ChatTemplate(std::string source, ChatTemplateLimits limits)
    : source_(std::move(source)), limits_(limits) {
  if (source_.size() > limits_.max_template_bytes)
    fail("chat template: {} bytes, over the limit of {}", source_.size(),
         limits_.max_template_bytes);
  try {
    program_ = jinja::parse(source_, limits_.max_depth);
  } catch (const Error& e) {
    fail("chat template: {}", one_line(e.what()));
  }
}

ChatTemplate ChatTemplate::from_tokenizer_config(const nlohmann::json& cfg, bool has_tools) {
  const auto it = cfg.find("chat_template");
  if (it == cfg.end() || it->is_null()) fail("tokenizer_config.json has no chat_template");
  if (it->is_string()) return ChatTemplate(it->get<std::string>());
  if (!it->is_array())
    fail("tokenizer_config.json: chat_template is a {}, not a string or a list", it->type_name());
  std::map<std::string, std::string> named;
  for (const auto& e : *it) {
    if (!e.is_object() || !e.contains("name") || !e.contains("template") ||
        !e["name"].is_string() || !e["template"].is_string())
      fail(
          "tokenizer_config.json: chat_template entries must be {{\"name\": str, \"template\": "
          "str}}");
    named[e["name"].get<std::string>()] = e["template"].get<std::string>();
  }
  return ChatTemplate(pick(named, has_tools, "tokenizer_config.json"));
}

ChatTemplate ChatTemplate::from_model_dir(const std::filesystem::path& dir, bool has_tools) {
  // Every file must resolve inside `dir` (core/file_read.h); one template byte over the
  // template cap is refused when read, not after.
  const uint64_t cap = ChatTemplateLimits{}.max_template_bytes;
  std::map<std::string, std::string> named;
  if (dir_entry_present(dir, "chat_template.jinja"))
    named["default"] = read_model_file(dir, "chat_template.jinja", "chat template", cap);
  const auto extra = dir / "additional_chat_templates";
  std::error_code ec;
  if (std::filesystem::is_directory(extra, ec)) {
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(extra, ec)) {
      if (e.path().extension() != ".jinja") continue;
      if (++n > 64) fail("{}: more than 64 chat templates", extra.string());
      named[e.path().stem().string()] = read_model_file(
          dir, "additional_chat_templates/" + e.path().filename().string(), "chat template", cap);
    }
  }
  if (!named.empty()) return ChatTemplate(pick(named, has_tools, dir.string()));
  const auto cfg_path = dir / "tokenizer_config.json";
  const nlohmann::json cfg = parse_json_or_fail(
      read_model_file(dir, "tokenizer_config.json", "tokenizer config", kMaxConfigBytes),
      cfg_path.string());
  return from_tokenizer_config(cfg, has_tools);
}

std::string ChatTemplate::render(const ChatTemplateInputs& in) const {
  using jinja::Value;
  try {
    const int depth = limits_.max_depth;
    if (!in.messages.is_array()) fail("messages must be a list, got {}", in.messages.type_name());
    if (in.messages.empty()) fail("cannot apply a chat template to an empty conversation");
    std::vector<Value> messages;
    for (size_t i = 0; i < in.messages.size(); ++i)
      messages.push_back(jinja::from_json(normalize_message(in.messages[i], i), depth));
    if (!in.tools.is_null() && !in.tools.is_array())
      fail("tools must be a list or null, got {}", in.tools.type_name());
    if (!in.extra.is_object()) fail("extra template variables must be an object");

    std::vector<std::pair<std::string, Value>> vars;
    vars.emplace_back("messages", Value::list(std::move(messages)));
    vars.emplace_back("tools", jinja::from_json(in.tools, depth));
    vars.emplace_back("documents", Value::none());
    vars.emplace_back("add_generation_prompt", Value::boolean(in.add_generation_prompt));
    if (!in.bos_token.empty()) vars.emplace_back("bos_token", Value::string(in.bos_token));
    if (!in.eos_token.empty()) vars.emplace_back("eos_token", Value::string(in.eos_token));
    for (const auto& [k, v] : in.extra.items()) {
      if (k == "messages" || k == "tools" || k == "documents" || k == "add_generation_prompt")
        fail("extra template variable '{}' collides with a built-in input", k);
      Value val = jinja::from_json(v, depth);
      bool replaced = false;
      for (auto& [name, old] : vars)
        if (name == k) old = val, replaced = true;
      if (!replaced) vars.emplace_back(k, std::move(val));
    }
    jinja::Renderer r(*program_, limits_, in.date_override);
    return r.render(std::move(vars));
  } catch (const ChatTemplateRaised&) {
    throw;
  } catch (const Error& e) {
    fail("chat template: {}", one_line(e.what()));
  }
}

std::optional<std::string> config_token(const nlohmann::json& cfg, const std::string& key) {
  const auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  fail("tokenizer config: '{}' is neither a string nor {{\"content\": str}}", key);
}

}  // namespace ceiling
