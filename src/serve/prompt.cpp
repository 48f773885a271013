#include "serve/prompt.h"

#include <algorithm>

#include "core/status.h"

namespace ceiling::serve {

std::vector<int32_t> encode_text(const Tokenizer& tok, std::string_view text) {
  return tok.encode(text, /*add_special_tokens=*/true);
}

std::vector<int32_t> encode_chat(const Tokenizer& tok, const ChatTemplate& tmpl,
                                 const nlohmann::ordered_json& messages) {
  CEILING_ENSURE(messages.is_array() && !messages.empty(),
                 "messages: must be a non-empty list of {{role, content}} objects");
  ChatTemplateInputs in;
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    CEILING_ENSURE(m.is_object(), "messages[{}]: must be an object", i);
    CEILING_ENSURE(m.contains("role") && m["role"].is_string(),
                   "messages[{}].role: must be a string", i);
    const std::string role = m["role"].get<std::string>();
    CEILING_ENSURE(role == "system" || role == "user" || role == "assistant" ||
                       role == "developer" || role == "tool",
                   "messages[{}].role: '{}' is not one of system, user, assistant, developer, tool",
                   i, role.substr(0, 32));
    CEILING_ENSURE(m.contains("content"), "messages[{}].content: missing", i);
    std::string content;
    const auto& c = m["content"];
    if (c.is_string()) {
      content = c.get<std::string>();
    } else if (c.is_array()) {  // text parts, joined
      for (size_t j = 0; j < c.size(); ++j) {
        CEILING_ENSURE(c[j].is_object() && c[j].value("type", "") == "text" &&
                           c[j].contains("text") && c[j]["text"].is_string(),
                       "messages[{}].content[{}]: only {{type: text, text: ...}} parts are "
                       "supported",
                       i, j);
        if (!content.empty()) content += "\n";
        content += c[j]["text"].get<std::string>();
      }
    } else if (!c.is_null()) {
      fail("messages[{}].content: must be a string or a list of text parts", i);
    }
    in.messages.push_back({{"role", role == "developer" ? "system" : role}, {"content", content}});
  }
  in.add_generation_prompt = true;
  in.bos_token = tok.config().bos_token.value_or("");
  in.eos_token = tok.config().eos_token.value_or("");
  return tok.encode(tmpl.render(in), /*add_special_tokens=*/false);
}

RequestParams default_params(const GenerationDefaults& g) {
  RequestParams r;
  cpu::SamplingParams& p = r.sampling;
  p.temperature = g.do_sample.value_or(true) ? g.temperature.value_or(1.0f) : 0.0f;
  p.top_p = g.top_p.value_or(1.0f);
  p.top_k = g.top_k.value_or(0);
  p.min_p = g.min_p.value_or(0.0f);
  p.repetition_penalty = g.repetition_penalty.value_or(1.0f);
  r.max_tokens = g.max_new_tokens.value_or(256);
  return r;
}

std::vector<int32_t> eos_token_ids(const Model& model, const Tokenizer& tok) {
  std::vector<int32_t> ids;
  for (int id : model.generation.eos_token_ids) ids.push_back(id);
  for (int id : model.config.eos_token_ids) ids.push_back(id);
  if (auto e = tok.eos_id()) ids.push_back(*e);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace ceiling::serve
