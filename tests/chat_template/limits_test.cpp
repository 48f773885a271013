// Hostile templates: every one must fail fast with a one-line ceiling::Error naming the limit,
// never hang, crash or exhaust memory.
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "test_util.h"

namespace ceiling {
namespace {

using ojson = nlohmann::ordered_json;

using test::one_user;

// Parses and renders; returns the error text ("" when it rendered).
std::string error_of(const std::string& src, ChatTemplateLimits limits = {},
                     ChatTemplateInputs in = one_user()) {
  try {
    ChatTemplate(src, limits).render(in);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

struct Case {
  const char* name;
  std::string src;
  const char* expect;  // substring of the error
};

TEST(ChatTemplateLimits, HostileTemplatesFailFast) {
  // Tighter than the defaults so the suite stays fast under sanitizers; DefaultsBoundTime checks
  // the defaults themselves.
  ChatTemplateLimits hostile;
  hostile.max_output_bytes = 1 << 20;
  hostile.max_steps = 100'000;
  hostile.max_work = 16 << 20;
  const std::vector<Case> cases = {
      {"nested loops",
       "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
       "loop iterations"},
      {"output bomb", "{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}", "over the"},
      {"string doubling",
       "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% "
       "endfor %}",
       "over the"},
      {"list bomb", "{{ ([1] * 100000000)|length }}", "over the"},
      {"huge repeat", "{{ 'ab' * 9223372036854775807 }}", "over the"},
      {"big range", "{{ range(1000000)|length }}", "MAX_RANGE"},
      {"infinite recursion", "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "nesting deeper"},
      {"branching recursion",
       "{% macro f(n) %}{{ f(n + 1) }}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "nesting deeper"},
      {"deep parens", "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}",
       "nested too deeply"},
      {"long attribute chain", "{{ x" + repeat(".a", 100000) + " }}", "nested too deeply"},
      {"long operator chain", "{{ 1" + repeat(" + 1", 100000) + " }}", "nested too deeply"},
      {"long filter chain", "{{ 'a'" + repeat("|trim", 100000) + " }}", "nested too deeply"},
      {"long and chain", "{{ 1" + repeat(" and 1", 100000) + " }}", "nested too deeply"},
      {"deep blocks",
       [] {
         std::string s;
         for (int i = 0; i < 3000; ++i) s += "{% if true %}";
         return s;
       }(),
       "nested too deeply"},
      {"deep value",
       "{% set ns = namespace(x=[]) %}{% for i in range(5000) %}{% set ns.x = [ns.x] %}"
       "{% endfor %}{{ ns.x }}",
       "deeper than"},
      {"deep value unprinted",
       "{% set ns = namespace(x=[]) %}{% for i in range(5000) %}"
       "{% set ns.x = [ns.x] %}{% endfor %}",
       "nested deeper than 1000"},
      {"deep dict of methods",
       "{% set ns = namespace(x={}) %}{% for i in range(5000) %}"
       "{% set ns.x = {'a': ns.x}.get %}{% endfor %}",
       "nested deeper than 1000"},
      {"deep loop objects",
       "{% set ns = namespace(l=[]) %}{% for i in range(3000) %}{% for y in [ns.l] %}"
       "{% set ns.l = [loop] %}{% endfor %}{% endfor %}",
       "nested deeper than 1000"},
      {"namespace cycle", "{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}",
       "nesting deeper"},
      {"quadratic concat",
       "{% set ns = namespace(s='') %}{% for i in range(100000) %}{% set ns.s = ns.s ~ "
       "'xxxxxxxxxx' %}"
       "{% endfor %}",
       "work limit"},
      {"int overflow", "{{ 9223372036854775807 + 1 }}", "integer overflow"},
      {"replace bomb", "{{ ('x' * 1000000)|replace('x', 'yyyyyyyyyyyyyyyyyyyy') }}", "over the"},
      {"tojson indent bomb", "{{ [[[[1]]]]|tojson(indent=100000000) }}", "over the"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const auto t0 = std::chrono::steady_clock::now();
    const std::string err = error_of(c.src, hostile);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_NE(err.find(c.expect), std::string::npos) << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
    EXPECT_LT(s, 30.0) << "took " << s << " s";  // typically well under 1 s (Release)
  }
}

TEST(ChatTemplateLimits, DefaultsBoundTime) {
  for (const char* src :
       {"{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        "{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}"}) {
    SCOPED_TRACE(src);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_NE(error_of(src), "");
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(s, 60.0);  // about 0.5 s in Release
  }
}

TEST(ChatTemplateLimits, CustomLimitsApply) {
  ChatTemplateLimits tight;
  tight.max_output_bytes = 16;
  EXPECT_NE(error_of("{{ 'x' * 17 }}", tight).find("over the 16 limit"), std::string::npos);
  EXPECT_EQ(error_of("{{ 'x' * 16 }}", tight), "");
  tight.max_steps = 10;
  EXPECT_NE(error_of("{% for i in range(11) %}{% endfor %}", tight).find("10 loop"),
            std::string::npos);
  EXPECT_EQ(error_of("{% for i in range(9) %}{% endfor %}", tight), "");
}

TEST(ChatTemplateLimits, DeepInputJsonIsRejected) {
  ojson deep = "leaf";
  for (int i = 0; i < 1000; ++i) deep = ojson::array({deep});
  ChatTemplateInputs in = one_user();
  in.messages[0]["content"] = deep;
  EXPECT_NE(error_of("{{ messages[0].content }}", {}, in).find("nested too deeply"),
            std::string::npos);
}

// Random token soup (fresh seed each run, printed on failure): parse and render must either
// succeed or throw ceiling::Error; anything else (crash, other exception) fails the test.
TEST(ChatTemplateLimits, RandomTokenSoupNeverEscapes) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const std::vector<std::string> atoms = {"{{",          "}}",      "{%",
                                          "%}",          "{#",      "#}",
                                          "-",           "+",       " ",
                                          "\n",          "if",      "elif",
                                          "else",        "endif",   "for",
                                          "in",          "endfor",  "set",
                                          "=",           "x",       "ns",
                                          "namespace()", "ns.a",    "loop.index",
                                          "messages",    "[0]",     ".role",
                                          "'s'",         "\"t\"",   "1",
                                          "2.5",         "(",       ")",
                                          "[",           "]",       "{",
                                          "}",           ",",       ":",
                                          "|",           "trim",    "tojson",
                                          "length",      "is",      "not",
                                          "defined",     "and",     "or",
                                          "~",           "*",       "//",
                                          "%",           "macro",   "endmacro",
                                          "m()",         "raw",     "endraw",
                                          "range(3)",    "none",    "true",
                                          "[::-1]",      "items()", "selectattr('role')",
                                          "join(',')",   "\\",      "'",
                                          "\""};
  int ok = 0, failed = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string src;
    const int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) src += atoms[rng() % atoms.size()];
    try {
      ChatTemplate(src).render(one_user());
      ++ok;
    } catch (const Error&) {
      ++failed;
    }
  }
  EXPECT_GT(ok, 0);
  EXPECT_GT(failed, 0);
}

}  // namespace
}  // namespace ceiling
