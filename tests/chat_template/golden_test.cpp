// Real chat templates (Qwen2.5, Mistral v0.3, TinyLlama, a Llama 3.1-style template) rendered
// for many conversations, compared byte for byte with transformers' apply_chat_template output
// recorded by make_golden.py.
#include <gtest/gtest.h>

#include "test_util.h"

namespace ceiling {
namespace {

using ojson = nlohmann::ordered_json;

ChatTemplate load_template(const std::string& name, bool has_tools) {
  if (name == "llama31-style")
    return ChatTemplate(test::read_text(std::string(CEILING_SOURCE_DIR) +
                                        "/tests/chat_template/llama31_style.jinja"));
  const std::string dir = name == "qwen2.5"        ? "qwen2.5"
                          : name == "mistral-v0.3" ? "mistral-7b-instruct-v0.3"
                                                   : "tinyllama";
  const auto cfg =
      nlohmann::json::parse(test::read_text(test::tokenizer_dir(dir) + "/tokenizer_config.json"));
  return ChatTemplate::from_tokenizer_config(cfg, has_tools);
}

ChatTemplateInputs inputs_for(const ojson& golden, const ojson& c) {
  ChatTemplateInputs in;
  in.messages = c["messages"];
  in.tools = c["tools"];
  in.add_generation_prompt = c["add_generation_prompt"].get<bool>();
  for (const auto& [k, v] : golden["special_tokens"].items()) {
    if (k == "bos_token") {
      in.bos_token = v.get<std::string>();
    } else if (k == "eos_token") {
      in.eos_token = v.get<std::string>();
    } else {
      in.extra[k] = v;
    }
  }
  for (const auto& [k, v] : c["extra"].items()) in.extra[k] = v;
  in.date_override = golden["date"].get<std::string>();
  return in;
}

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, MatchesTransformersByteForByte) {
  const ojson golden = test::load_golden(GetParam() + ".json");
  ASSERT_FALSE(golden["cases"].empty());
  const ChatTemplate plain = load_template(GetParam(), false);
  const ChatTemplate with_tools = load_template(GetParam(), true);
  int compared = 0, errors = 0;
  for (const auto& c : golden["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const ChatTemplate& t = c["tools"].is_null() ? plain : with_tools;
    bool raised = false;
    const std::string got = test::render_or_error(t, inputs_for(golden, c), &raised);
    if (c.contains("expected")) {
      EXPECT_EQ(got, c["expected"].get<std::string>());
      ++compared;
      continue;
    }
    ++errors;
    const auto& err = c["error"];
    ASSERT_EQ(got.rfind("ERROR", 0), 0u) << "expected an error, rendered:\n" << got;
    if (err["type"] == "TemplateError") {  // the template's raise_exception: same message
      EXPECT_TRUE(raised);
      EXPECT_EQ(got, "ERROR[raised]: " + err["message"].get<std::string>());
    } else {
      EXPECT_FALSE(raised) << got;
    }
  }
  EXPECT_GT(compared, 20);
  RecordProperty("compared", compared);
  RecordProperty("errors", errors);
}

INSTANTIATE_TEST_SUITE_P(ChatTemplate, Golden,
                         ::testing::Values("qwen2.5", "mistral-v0.3", "tinyllama", "llama31-style"),
                         [](const auto& param_info) {
                           std::string n = param_info.param;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

// The error a real template raises names the template's own message and nothing else.
TEST(GoldenErrors, MistralAlternationMessage) {
  const auto cfg = nlohmann::json::parse(
      test::read_text(test::tokenizer_dir("mistral-7b-instruct-v0.3") + "/tokenizer_config.json"));
  const ChatTemplate t = ChatTemplate::from_tokenizer_config(cfg, false);
  ChatTemplateInputs in;
  in.messages = ojson::parse(R"([{"role":"user","content":"a"},{"role":"assistant","content":"b"},
                                 {"role":"assistant","content":"c"}])");
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  try {
    t.render(in);
    FAIL() << "expected raise_exception";
  } catch (const ChatTemplateRaised& e) {
    EXPECT_STREQ(e.what(),
                 "After the optional system message, conversation roles must alternate "
                 "user/assistant/user/assistant/...");
  }
}

}  // namespace
}  // namespace ceiling
