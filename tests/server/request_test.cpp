// Request parsing and validation: typed requests from OpenAI bodies, and every refusal an
// ApiError with the right status and param. Uses the bundled stories260K tokenizer.
#include "server/request.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "server/api_error.h"
#include "server/response.h"

namespace ceiling::server {
namespace {

using nlohmann::json;

const std::filesystem::path kStories =
    std::filesystem::path(CEILING_SOURCE_DIR) / "models/stories260K";

struct Fixture {
  Tokenizer tok = Tokenizer::from_dir(kStories);
  ChatTemplate tmpl{
      "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"};
  ModelInfo info() const {
    ModelInfo m;
    m.name = "tiny";
    m.tokenizer = &tok;
    m.chat_template = &tmpl;
    m.defaults.max_tokens = 256;
    m.vocab_size = tok.vocab_size();
    m.max_model_len = 64;
    m.max_n = 4;
    return m;
  }
};

// The ApiError a body gets (status, param), or fails the test.
std::pair<int, std::string> refusal(const std::string& body, bool chat = false) {
  static const Fixture f;
  try {
    const json b = parse_body(body);
    if (chat) {
      parse_chat(b, f.info());
    } else {
      parse_completion(b, f.info());
    }
  } catch (const ApiError& e) {
    return {e.status, e.param};
  }
  ADD_FAILURE() << "accepted: " << body;
  return {0, ""};
}

TEST(Request, CompletionFieldsBecomeTypedParams) {
  const Fixture f;
  const GenerationRequest r = parse_completion(
      parse_body(R"({"model": "tiny", "prompt": ["Once", "The cat"], "max_tokens": 5, "n": 2,
      "temperature": 0.5, "top_p": 0.9, "top_k": -1, "min_p": 0.1, "seed": 7, "stop": "x",
      "logit_bias": {"10": -100, "11": 2.5}, "min_tokens": 2, "ignore_eos": true,
      "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.1,
      "logprobs": 3, "user": "u"})"),
      f.info());
  ASSERT_EQ(r.prompts.size(), 2u);
  ASSERT_EQ(r.choices.size(), 4u);  // prompts × n
  EXPECT_EQ(r.choices[2].prompt_index, 1);
  const serve::RequestParams& p = r.choices[1].params;
  EXPECT_EQ(p.max_tokens, 5);
  EXPECT_FLOAT_EQ(p.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(p.sampling.top_p, 0.9f);
  EXPECT_EQ(p.sampling.top_k, 0);
  EXPECT_EQ(p.sampling.seed, 8u);  // seed + choice index
  EXPECT_EQ(r.choices[0].params.sampling.seed, 7u);
  EXPECT_EQ(r.choices[2].params.sampling.seed, 7u);
  EXPECT_EQ(p.stop, std::vector<std::string>{"x"});
  ASSERT_EQ(p.logit_bias.size(), 2u);
  EXPECT_EQ(p.min_tokens, 2);
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_EQ(p.logprobs, 3);
  EXPECT_EQ(r.prompts[0], f.tok.encode("Once", true));
}

TEST(Request, TokenPromptsAndUnsetMaxTokensClipped) {
  const Fixture f;
  const GenerationRequest r =
      parse_completion(parse_body(R"({"prompt": [[1, 2, 3], [4, 5]]})"), f.info());
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[1], (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(r.choices[0].params.max_tokens, 64 - 3);  // what max_model_len leaves
  const GenerationRequest one = parse_completion(parse_body(R"({"prompt": [1, 2]})"), f.info());
  EXPECT_EQ(one.prompts.size(), 1u);
}

// A token-id prompt longer than the cap on prompts per request is one prompt (the cap counts
// prompts, not tokens); a list of more prompts than the cap is refused.
TEST(Request, LongTokenPromptIsOnePrompt) {
  const Fixture f;
  ModelInfo m = f.info();
  m.max_model_len = 2048;
  json ids = json::array();
  for (int i = 0; i < 1024; ++i) ids.push_back(1 + i % 100);
  const GenerationRequest r = parse_completion(json{{"prompt", ids}, {"max_tokens", 8}}, m);
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].size(), 1024u);
  json many = json::array();
  for (int i = 0; i < 257; ++i) many.push_back("a");
  try {
    parse_completion(json{{"prompt", many}}, m);
    ADD_FAILURE() << "257 prompts accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "prompt");
  }
}

TEST(Request, ChatRendersTheTemplate) {
  const Fixture f;
  const GenerationRequest r = parse_chat(
      parse_body(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
      "max_completion_tokens": 3, "logprobs": true, "top_logprobs": 2, "stream": true,
      "stream_options": {"include_usage": true}})"),
      f.info());
  EXPECT_TRUE(r.chat && r.stream && r.include_usage);
  EXPECT_EQ(r.choices[0].params.max_tokens, 3);
  EXPECT_EQ(r.choices[0].params.logprobs, 2);
  EXPECT_EQ(r.prompts[0], f.tok.encode("user: Hi\nassistant:", false));
}

TEST(Request, RefusalsNameTheParam) {
  using R = std::pair<int, std::string>;
  EXPECT_EQ(refusal("{\"prompt\": \"a\""), R(400, ""));      // invalid JSON
  EXPECT_EQ(refusal("{\"prompt\": \"\xff\"}"), R(400, ""));  // invalid UTF-8
  EXPECT_EQ(refusal("[1]"), R(400, ""));
  EXPECT_EQ(refusal(R"({"prompt": 5})"), R(400, "prompt"));
  EXPECT_EQ(refusal(R"({})"), R(400, "prompt"));
  EXPECT_EQ(refusal(R"({"prompt": []})"), R(400, "prompt"));
  EXPECT_EQ(refusal(R"({"prompt": [1, 100000]})"), R(400, "prompt"));
  EXPECT_EQ(refusal(R"({"prompt": "a", "temperature": -1})"), R(400, "temperature"));
  EXPECT_EQ(refusal(R"({"prompt": "a", "temperature": "hot"})"), R(400, "temperature"));
  EXPECT_EQ(refusal(R"({"prompt": "a", "top_p": 0})"), R(400, "top_p"));
  EXPECT_EQ(refusal(R"({"prompt": "a", "top_p": 1.5})"), R(400, "top_p"));
  EXPECT_EQ(refusal(R"({"prompt": "a", "n": 0})"), R(400, "n"));
  EXPECT_EQ(refusal(R"({"prompt": "a", "n": 5})"), R(400, "n"));  // over max_n
  EXPECT_EQ(refusal(R"({"prompt": "a", "max_tokens": 0})"), R(400, "max_tokens"));
  EXPECT_EQ(refusal(R"({"prompt": "a", "max_tokens": 1.5})"), R(400, "max_tokens"));
  EXPECT_EQ(refusal(R"({"prompt": "a", "max_tokens": 100})"), R(400, "max_tokens"));
  EXPECT_EQ(refusal(R"({"prompt": "a", "logit_bias": {"100000": 1}})"), R(400, "logit_bias"));
  EXPECT_EQ(refusal(R"({"prompt": "a", "logit_bias": {"1": 101}})"), R(400, "logit_bias"));
  EXPECT_EQ(refusal(R"({"prompt": "a", "logit_bias": {"x": 1}})"), R(400, "logit_bias"));
  EXPECT_EQ(refusal(R"({"prompt": "a", "stop": 3})"), R(400, "stop"));
  EXPECT_EQ(refusal(R"({"prompt": "a", "model": "other"})"), R(404, "model"));
  EXPECT_EQ(refusal(R"({"prompt": "a", "stream_options": {"include_usage": true}})"),
            R(400, "stream_options"));
  EXPECT_EQ(refusal(R"({"prompt": "a", "echo": true, "logprobs": 1})"), R(400, "echo"));
  EXPECT_EQ(refusal(R"({"prompt": "a", "min_tokens": 9, "max_tokens": 3})"), R(400, "min_tokens"));
  EXPECT_EQ(refusal(R"({"messages": []})", true), R(400, "messages"));
  EXPECT_EQ(refusal(R"({"messages": [{"role": "robot", "content": "x"}]})", true),
            R(400, "messages"));
  EXPECT_EQ(refusal(R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", true),
            R(400, "top_logprobs"));
}

TEST(Response, InvalidUtf8BecomesReplacementCharacters) {
  const std::string s = dump(json{{"text", std::string("a\xff\xfe"
                                                       "b")}});
  EXPECT_EQ(s,
            "{\"text\":\"a\xEF\xBF\xBD\xEF\xBF\xBD"
            "b\"}");
}

}  // namespace
}  // namespace ceiling::server
