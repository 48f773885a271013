// libFuzzer target: the input is template text, rendered with a fixed conversation (system,
// user, assistant tool call, tool result) and tools. Parsing or rendering may fail only with
// ceiling::Error; any other exception, crash, leak, hang or sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tokenizer/template/chat_template.h"

namespace {

ceiling::ChatTemplateInputs make_inputs() {
  ceiling::ChatTemplateInputs in;
  in.messages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "You are helpful. {{ not jinja }}"},
    {"role": "user", "content": "Weather in Paris? ünïcödé 😀"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call12345", "type": "function",
      "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2.5, true]}}}]},
    {"role": "tool", "tool_call_id": "call12345", "content": "{\"temp\": 22}"},
    {"role": "user", "content": [{"type": "text", "text": "thanks"}]}])");
  in.tools =
      nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
    "required": ["city"]}}}])");
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  in.extra = {{"custom", {{"flag", true}, {"n", 3}}}};
  in.date_override = "26 Jul 2024";
  return in;
}

ceiling::ChatTemplateLimits fuzz_limits() {
  ceiling::ChatTemplateLimits l;  // tighter than the defaults to keep iterations fast
  l.max_output_bytes = 1 << 20;
  l.max_steps = 100'000;
  l.max_work = 16 << 20;
  return l;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ceiling::ChatTemplateInputs inputs = make_inputs();
  static const ceiling::ChatTemplateLimits limits = fuzz_limits();
  const std::string src(reinterpret_cast<const char*>(data), size);
  try {
    const ceiling::ChatTemplate t(src, limits);
    (void)t.render(inputs);
  } catch (const ceiling::Error&) {
  }
  return 0;
}
