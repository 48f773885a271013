// The public API: template selection from tokenizer configs and model directories, input
// normalization (as apply_chat_template does it), key order, dates and error reporting.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "test_util.h"

namespace ceiling {
namespace {

using ojson = nlohmann::ordered_json;

using test::one_user;

TEST(ChatTemplateApi, PicksNamedTemplates) {
  nlohmann::json cfg = {
      {"chat_template", nlohmann::json::array({
                            {{"name", "default"}, {"template", "D{{ tools is none }}"}},
                            {{"name", "tool_use"}, {"template", "T{{ tools|length }}"}},
                        })}};
  ChatTemplateInputs in = one_user("x");
  EXPECT_EQ(ChatTemplate::from_tokenizer_config(cfg, false).render(in), "DTrue");
  in.tools = ojson::array({{{"type", "function"}}});
  EXPECT_EQ(ChatTemplate::from_tokenizer_config(cfg, true).render(in), "T1");
  cfg["chat_template"].erase(0);
  EXPECT_THROW(ChatTemplate::from_tokenizer_config(cfg, false), Error);  // no default
  EXPECT_THROW(ChatTemplate::from_tokenizer_config(nlohmann::json::object(), false), Error);
  EXPECT_THROW(ChatTemplate::from_tokenizer_config({{"chat_template", 5}}, false), Error);
}

TEST(ChatTemplateApi, ModelDirPrefersJinjaFiles) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("ceiling_tmpl_" + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(dir / "additional_chat_templates");
  std::ofstream(dir / "tokenizer_config.json") << R"({"chat_template": "from config"})";
  EXPECT_EQ(ChatTemplate::from_model_dir(dir, false).render(one_user("x")), "from config");
  std::ofstream(dir / "chat_template.jinja") << "from jinja {{ messages[0].content }}\n";
  EXPECT_EQ(ChatTemplate::from_model_dir(dir, false).render(one_user("x")), "from jinja x");
  std::ofstream(dir / "additional_chat_templates" / "tool_use.jinja") << "tools!";
  EXPECT_EQ(ChatTemplate::from_model_dir(dir, true).render(one_user("x")), "tools!");
  EXPECT_EQ(ChatTemplate::from_model_dir(dir, false).render(one_user("x")), "from jinja x");
  std::filesystem::remove_all(dir);
}

TEST(ChatTemplateApi, ConfigToken) {
  const nlohmann::json cfg = {{"bos_token", "<s>"},
                              {"eos_token", {{"content", "</s>"}, {"lstrip", false}}},
                              {"unk_token", nullptr}};
  EXPECT_EQ(config_token(cfg, "bos_token"), "<s>");
  EXPECT_EQ(config_token(cfg, "eos_token"), "</s>");
  EXPECT_EQ(config_token(cfg, "unk_token"), std::nullopt);
  EXPECT_EQ(config_token(cfg, "pad_token"), std::nullopt);
}

TEST(ChatTemplateApi, NormalizesMessagesLikeTransformers) {
  const ChatTemplate t(
      "{% for m in messages %}{{ m.content is defined }}{{ m|tojson }};{% endfor %}");
  ChatTemplateInputs in;
  in.messages = ojson::parse(R"([{"role":"assistant","content":null,"tool_calls":[]},
      {"role":"assistant","content":"a","reasoning":"r"}])");
  EXPECT_EQ(t.render(in),
            "False{\"role\": \"assistant\", \"tool_calls\": []};"
            "True{\"thinking\": \"r\", \"role\": \"assistant\", \"content\": \"a\", \"reasoning\": "
            "\"r\", "
            "\"reasoning_content\": \"r\"};");
  in.messages = ojson::array();
  EXPECT_THROW(t.render(in), Error);
  in.messages = ojson::array({"not an object"});
  EXPECT_THROW(t.render(in), Error);
}

TEST(ChatTemplateApi, KeepsKeyOrderOfOrderedJsonAndAcceptsPlainJson) {
  const ChatTemplate t("{{ tools[0]|tojson }}");
  ChatTemplateInputs in = one_user("x");
  in.tools = ojson::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  EXPECT_EQ(t.render(in), R"({"type": "function", "function": {"name": "f"}})");
  in.tools = nlohmann::json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  EXPECT_EQ(t.render(in), R"({"function": {"name": "f"}, "type": "function"})");  // sorted
}

TEST(ChatTemplateApi, SpecialTokensAndExtraVariables) {
  const ChatTemplate t("[{{ bos_token }}|{{ eos_token is defined }}|{{ mode }}]");
  ChatTemplateInputs in = one_user("x");
  in.bos_token = "<s>";
  in.extra = {{"mode", "fast"}};
  EXPECT_EQ(t.render(in), "[<s>|False|fast]");
  in.extra = {{"bos_token", "override"}};
  EXPECT_EQ(t.render(in), "[override|False|]");
  in.extra = {{"messages", 1}};
  EXPECT_THROW(t.render(in), Error);
}

TEST(ChatTemplateApi, DateOverrideFormats) {
  const ChatTemplate t("{{ strftime_now('%d %b %Y|%A|%Y-%m-%d') }}");
  ChatTemplateInputs in = one_user("x");
  in.date_override = "26 Jul 2024";
  EXPECT_EQ(t.render(in), "26 Jul 2024|Friday|2024-07-26");
  in.date_override = "2025-01-05";
  EXPECT_EQ(t.render(in), "05 Jan 2025|Sunday|2025-01-05");
  in.date_override = "yesterday";
  EXPECT_THROW(t.render(in), Error);
  in.date_override.reset();  // the real clock: a plausible date
  const std::string now = t.render(in);
  EXPECT_EQ(now.size(), std::string("26 Jul 2024|").size() + now.substr(12).size());
  EXPECT_GE(std::stoi(now.substr(7, 4)), 2024);
}

TEST(ChatTemplateApi, RaiseExceptionIsOneLineAndTyped) {
  const ChatTemplate t("{{ raise_exception('bad\\nthing: ' ~ messages[0].role) }}");
  try {
    t.render(one_user("x"));
    FAIL();
  } catch (const ChatTemplateRaised& e) {
    EXPECT_STREQ(e.what(), "bad thing: user");
  }
}

TEST(ChatTemplateApi, ErrorsNameLineAndColumn) {
  auto syntax_error = [](const std::string& src) {
    try {
      ChatTemplate t(src);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(syntax_error("a\nb {{ x | nope }}"),
            "chat template: line 2 col 10: unknown filter 'nope'");
  EXPECT_EQ(syntax_error("{% if x %}\n  {% frob %}"),
            "chat template: line 2 col 6: unknown tag 'frob'");
  EXPECT_EQ(
      syntax_error("{% for x in y %}"),
      "chat template: line 1 col 17: unexpected end of template, expected 'endfor' or 'else'");
  EXPECT_EQ(syntax_error("{{ x is nope }}"), "chat template: line 1 col 9: unknown test 'nope'");
  EXPECT_EQ(syntax_error(std::string("{{ '\xff' }}")),
            "chat template: template is not valid UTF-8");
  // Text from the template or the inputs never breaks the line.
  EXPECT_EQ(syntax_error("{{ x | e }}{% frob\n %}"),
            "chat template: line 1 col 15: unknown tag 'frob'");
  const ChatTemplate multi("{{ {}['a\\nb'].c }}");
  EXPECT_EQ(test::render_or_error(multi, one_user("x")),
            "ERROR: chat template: line 1 col 15: 'dict object' has no attribute 'a\\nb'");
  const ChatTemplate t("line one\n{{ messages[0].nope.deeper }}");
  EXPECT_EQ(test::render_or_error(t, one_user("x")),
            "ERROR: chat template: line 2 col 21: 'dict object' has no attribute 'nope'");
}

TEST(ChatTemplateApi, ConcurrentRendersShareOneTemplate) {
  const auto cfg = nlohmann::json::parse(
      test::read_text(test::tokenizer_dir("qwen2.5") + "/tokenizer_config.json"));
  const ChatTemplate t = ChatTemplate::from_tokenizer_config(cfg, false);
  const std::string want = t.render(one_user("hi"));
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      for (int k = 0; k < 50; ++k) ok[i] += t.render(one_user("hi")) == want;
    });
  for (auto& th : threads) th.join();
  for (int v : ok) EXPECT_EQ(v, 50);
}

}  // namespace
}  // namespace ceiling
