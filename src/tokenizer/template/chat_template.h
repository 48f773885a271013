// Chat templates: renders a model's Jinja2 chat template exactly as transformers'
// `apply_chat_template(..., tokenize=False)` does, without Python.
//
// The Jinja2 subset covers what the Llama 3.x, Qwen2.5, Mistral v0.3 and similar templates use:
// {{ }}, {% %}, {# #}, `-`/`+` whitespace control with trim_blocks and lstrip_blocks on (as
// transformers compiles), if/elif/else, for (loop.*, else, `if` filter, unpacking, break and
// continue), set (also `ns.x = ...` and block set), macro/call, filter and with blocks,
// {% generation %}, Python-style values, operators, slicing, filters, tests and str/dict/list
// methods, plus transformers' globals raise_exception, strftime_now, namespace and dict.
//
// Templates are untrusted: parsing and rendering are bounded (ChatTemplateLimits) and every
// problem is a one-line ceiling::Error ("chat template line L col C: ..."); never a hang or crash.
// A ChatTemplate is immutable after construction; render() may run concurrently from threads.
#pragma once

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/status.h"

namespace ceiling {

namespace jinja {
struct Program;
}

struct ChatTemplateLimits {
  size_t max_template_bytes = size_t{1} << 20;  // the template's source (real ones are < 64 KB)
  size_t max_output_bytes = size_t{16} << 20;  // also caps any single string or list built
  uint64_t max_steps = 1'000'000;              // loop iterations + macro/caller calls
  uint64_t max_work = uint64_t{256} << 20;     // bytes/elements produced or scanned
  int max_depth = 200;                         // parse nesting, runtime recursion, nested values
  uint64_t max_alloc_bytes = uint64_t{256} << 20;  // all strings and lists one render builds
};

// Thrown when the template itself calls raise_exception(msg); what() is msg (on one line).
// Servers should report it as a client error: the conversation broke the template's rules.
class ChatTemplateRaised : public Error {
 public:
  explicit ChatTemplateRaised(const std::string& msg) : Error(msg) {}
};

// What the template sees. JSON objects keep their key order (ordered_json), as Python dicts do:
// parse request bodies with nlohmann::ordered_json to keep `tojson` output identical to
// transformers'. A plain nlohmann::json converts implicitly (keys then come out sorted).
struct ChatTemplateInputs {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // [{role, content, ...}]
  nlohmann::ordered_json tools;  // null (no tools) or a list of JSON-schema tool definitions
  bool add_generation_prompt = true;
  std::string bos_token, eos_token;  // empty: not passed to the template (undefined there)
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // more template variables
  std::optional<std::string> date_override;  // "26 Jul 2024" or "2024-07-26" for strftime_now
};

class ChatTemplate {
 public:
  // Parses; throws ceiling::Error on syntax errors (unknown tag/filter/test included).
  explicit ChatTemplate(std::string source, ChatTemplateLimits limits = {});
  // Picks tokenizer_config.json's `chat_template`: a string, or a list of {name, template}
  // (`tool_use` when has_tools and present, else `default`).
  static ChatTemplate from_tokenizer_config(const nlohmann::json& cfg, bool has_tools);
  // As transformers loads a model directory: chat_template.jinja and
  // additional_chat_templates/*.jinja take priority over tokenizer_config.json.
  static ChatTemplate from_model_dir(const std::filesystem::path& dir, bool has_tools);

  // Throws ceiling::Error (ChatTemplateRaised for raise_exception; limits; type errors).
  std::string render(const ChatTemplateInputs& inputs) const;

  const std::string& source() const { return source_; }

 private:
  std::string source_;
  ChatTemplateLimits limits_;
  std::shared_ptr<const jinja::Program> program_;
};

// A special token's text from tokenizer_config.json: "bos_token": "<s>" or {"content": "<s>"}.
std::optional<std::string> config_token(const nlohmann::json& cfg, const std::string& key);

}  // namespace ceiling
