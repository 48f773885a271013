// Jinja semantics one construct at a time: small templates rendered by transformers' Jinja
// environment (golden/jinja_snippets.json), including the ones that must fail.
#include <gtest/gtest.h>

#include "test_util.h"

namespace ceiling {
namespace {

using ojson = nlohmann::ordered_json;

TEST(JinjaSnippets, MatchJinja2) {
  const ojson golden = test::load_golden("jinja_snippets.json");
  const ojson& base = golden["base_variables"];
  int rendered = 0, failed_as_expected = 0;
  for (const auto& c : golden["cases"]) {
    const std::string src = c["template"].get<std::string>();
    SCOPED_TRACE(src);
    std::string got;
    bool raised = false;
    try {
      const ChatTemplate t(src);
      ChatTemplateInputs in;
      in.messages = base["messages"];
      in.tools = base["tools"];
      in.add_generation_prompt = base["add_generation_prompt"].get<bool>();
      in.extra = c["variables"];
      in.date_override = golden["date"].get<std::string>();
      got = test::render_or_error(t, in, &raised);
    } catch (const Error& e) {
      got = std::string("ERROR: ") + e.what();
      EXPECT_TRUE(c.contains("error")) << "unexpected syntax error: " << e.what();
    }
    if (c.contains("expected")) {
      EXPECT_EQ(got, c["expected"].get<std::string>());
      ++rendered;
      continue;
    }
    ASSERT_EQ(got.rfind("ERROR", 0), 0u)
        << "expected " << c["error"].dump() << ", rendered: " << got;
    EXPECT_EQ(got.find('\n'), std::string::npos) << "error messages are one line: " << got;
    if (c["error"]["type"] == "TemplateError") {
      EXPECT_TRUE(raised);
      EXPECT_EQ(got, "ERROR[raised]: " + c["error"]["message"].get<std::string>());
    } else if (c.contains("syntax_error")) {
      EXPECT_NE(got.find("line 1 col "), std::string::npos) << got;
    }
    ++failed_as_expected;
  }
  EXPECT_GT(rendered, 50);
  EXPECT_GT(failed_as_expected, 20);
}

}  // namespace
}  // namespace ceiling
