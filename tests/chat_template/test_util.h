// Helpers shared by the chat template tests: file reading and golden-file loading.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tokenizer/template/chat_template.h"

namespace ceiling::test {

inline std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// One user message (the inputs most template tests render).
inline ChatTemplateInputs one_user(const std::string& content = "hi") {
  ChatTemplateInputs in;
  in.messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", content}}});
  return in;
}

inline std::string golden_path(const std::string& name) {
  return std::string(CEILING_SOURCE_DIR) + "/tests/chat_template/golden/" + name;
}

inline std::string tokenizer_dir(const std::string& name) {
  return std::string(CEILING_DATA_DIR) + "/tokenizers/" + name;
}

// Golden files are parsed in order: tojson output depends on key order.
inline nlohmann::ordered_json load_golden(const std::string& name) {
  return nlohmann::ordered_json::parse(read_text(golden_path(name)));
}

// Renders and returns either the text or "ERROR[raised]: msg" / "ERROR: msg".
inline std::string render_or_error(const ChatTemplate& t, const ChatTemplateInputs& in,
                                   bool* raised = nullptr) {
  try {
    return t.render(in);
  } catch (const ChatTemplateRaised& e) {
    if (raised) *raised = true;
    return std::string("ERROR[raised]: ") + e.what();
  } catch (const Error& e) {
    if (raised) *raised = false;
    return std::string("ERROR: ") + e.what();
  }
}

}  // namespace ceiling::test
