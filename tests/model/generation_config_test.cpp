// generation_config.json: the fields the sampler uses, their types and ranges.
#include <gtest/gtest.h>

#include "model/loader.h"
#include "model_test_util.h"

namespace ceiling {
namespace {

TEST(GenerationConfig, ParsesTheUsualFields) {
  const GenerationDefaults g = parse_generation_config(R"({
    "bos_token_id": 128000, "do_sample": true, "eos_token_id": [128001, 128008, 128009],
    "temperature": 0.6, "top_p": 0.9, "top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1,
    "max_new_tokens": 512, "transformers_version": "4.45.0", "pad_token_id": null})",
                                                       "g.json");
  EXPECT_EQ(g.bos_token_id, 128000);
  EXPECT_EQ(g.do_sample, true);
  EXPECT_EQ(g.eos_token_ids, (std::vector<int>{128001, 128008, 128009}));
  EXPECT_FLOAT_EQ(*g.temperature, 0.6f);
  EXPECT_FLOAT_EQ(*g.top_p, 0.9f);
  EXPECT_EQ(g.top_k, 20);
  EXPECT_FLOAT_EQ(*g.min_p, 0.05f);
  EXPECT_FLOAT_EQ(*g.repetition_penalty, 1.1f);
  EXPECT_EQ(g.max_new_tokens, 512);
}

TEST(GenerationConfig, AbsentAndNullStayUnset) {
  const GenerationDefaults g =
      parse_generation_config(R"({"temperature": null, "eos_token_id": 2})", "g.json");
  EXPECT_FALSE(g.temperature);
  EXPECT_FALSE(g.top_p);
  EXPECT_FALSE(g.top_k);
  EXPECT_FALSE(g.do_sample);
  EXPECT_FALSE(g.bos_token_id);
  EXPECT_EQ(g.eos_token_ids, std::vector<int>{2});
  test::TempDir dir;
  const GenerationDefaults none = load_generation_config(dir.path());  // no file
  EXPECT_FALSE(none.temperature);
  EXPECT_TRUE(none.eos_token_ids.empty());
}

TEST(GenerationConfig, Errors) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"temperature": "hot"})", "'temperature' must be a number"},
      {R"({"temperature": -0.5})", "'temperature' is -0.5 but must be in [0"},
      {R"({"top_p": 1.5})", "'top_p' is 1.5"},
      {R"({"min_p": -0.1})", "'min_p'"},
      {R"({"repetition_penalty": 0})", "'repetition_penalty' is 0 but must be in (0"},
      {R"({"top_k": 2.5})", "'top_k' must be an integer"},
      {R"({"top_k": -1})", "'top_k' is -1"},
      {R"({"max_new_tokens": 0})", "'max_new_tokens' is 0"},
      {R"({"do_sample": 1})", "'do_sample' must be a boolean"},
      {R"({"bos_token_id": "1"})", "'bos_token_id' must be an integer"},
      {R"({"eos_token_id": [1, "2"]})", "'eos_token_id' must be a non-negative integer"},
      {R"({"eos_token_id": -3})", "'eos_token_id'"},
      {R"([])", "top level must be a JSON object"},
      {R"({"a": )", "not valid JSON"},
  };
  for (const auto& [json, want] : cases) {
    try {
      parse_generation_config(json, "gen.json");
      ADD_FAILURE() << "no error for " << json;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(want), std::string::npos) << json << " -> " << msg;
      EXPECT_EQ(msg.rfind("gen.json: ", 0), 0u) << msg;
    }
  }
}

}  // namespace
}  // namespace ceiling
