// Malformed tokenizer.json / tokenizer_config.json: every case is one ceiling::Error whose
// one-line message names the field (or file) and the rule — never a crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "core/status.h"
#include "test_util.h"

namespace ceiling {
namespace {

using nlohmann::json;

// Applies `edit` to a valid document and expects loading to fail with `needle` in the message.
void expect_load_error(const std::function<void(json&)>& edit, const std::string& needle,
                       const json& base = test::tiny_sentencepiece()) {
  json doc = base;
  edit(doc);
  try {
    Tokenizer::from_json(doc.dump(), {}, "t.json");
    ADD_FAILURE() << "loaded without error; expected \"" << needle << "\"";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(needle), std::string::npos) << "message: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
    EXPECT_EQ(msg.rfind("t.json", 0), 0u) << "does not name the file: " << msg;
  }
}

TEST(TokenizerLoad, BaseDocumentsLoad) {
  EXPECT_NO_THROW(Tokenizer::from_json(test::tiny_sentencepiece().dump()));
  EXPECT_NO_THROW(Tokenizer::from_json(test::tiny_bytelevel().dump()));
}

TEST(TokenizerLoad, TextThatIsNotATokenizerJson) {
  for (std::string text : {"", "{", "[]", "null", "{\"model\": 3}", "\x01\x02",
                           "{\"model\": {\"vocab\": {}}} trailing"}) {
    EXPECT_THROW(Tokenizer::from_json(text, {}, "t.json"), Error) << text;
  }
  EXPECT_THROW(Tokenizer::from_json(std::string(100000, '['), {}, "t.json"), Error);
}

TEST(TokenizerLoad, ModelErrorsNameTheField) {
  expect_load_error([](json& d) { d.erase("model"); }, "model: missing");
  expect_load_error([](json& d) { d["model"].erase("vocab"); }, "model.vocab: missing");
  expect_load_error([](json& d) { d["model"]["vocab"] = json::array(); },
                    "model.vocab: expected an object");
  expect_load_error([](json& d) { d["model"]["vocab"]["x"] = "7"; },
                    "model.vocab.x: expected an integer");
  expect_load_error([](json& d) { d["model"]["vocab"]["x"] = -1; }, "model.vocab.x: id must be in");
  expect_load_error([](json& d) { d["model"]["vocab"]["x"] = 1e12; }, "model.vocab.x");
  expect_load_error([](json& d) { d["model"]["vocab"]["x"] = 99999999999; }, "model.vocab.x");
  expect_load_error([](json& d) { d["model"]["merges"] = "a b"; },
                    "model.merges: expected an array");
  expect_load_error(
      [](json& d) {
        d["model"]["merges"].push_back(json::array({"a", "zz"}));
      },
      "model.merges[3]: merge ['a', 'zz'] names a token not in the vocab");
  expect_load_error([](json& d) { d["model"]["merges"].push_back(json::array({"a"})); },
                    "model.merges[3]: a merge pair must have two tokens");
  expect_load_error([](json& d) { d["model"]["merges"].push_back(7); }, "model.merges[3]");
  expect_load_error([](json& d) { d["model"]["merges"] = json::array({"ab"}); }, "has no space");
  expect_load_error([](json& d) { d["model"]["merges"] = json::array({"a c"}); },
                    "makes one");  // "ac" is not in the vocab
  expect_load_error([](json& d) { d["model"]["type"] = "Unigram"; },
                    "model.type: model type \"Unigram\"");
  expect_load_error([](json& d) { d["model"]["dropout"] = 0.1; }, "model.dropout");
  expect_load_error([](json& d) { d["model"]["unk_token"] = "<nope>"; }, "model.unk_token");
  expect_load_error([](json& d) { d["model"]["byte_fallback"] = "yes"; },
                    "model.byte_fallback: expected true/false");
}

TEST(TokenizerLoad, ComponentErrorsNameTheField) {
  expect_load_error(
      [](json& d) {
        d["normalizer"] = {{"type", "Precompiled"}};
      },
      "normalizer.type: unsupported normalizer \"Precompiled\"");
  expect_load_error(
      [](json& d) {
        d["normalizer"] = {{"kind", "NFC"}};
      },
      "normalizer.type: missing");
  expect_load_error(
      [](json& d) {
        d["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}};
      },
      "pre_tokenizer.pattern: bad regex /(unclosed/");
  expect_load_error(
      [](json& d) {
        d["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Glob", "*"}}}};
      },
      "pre_tokenizer.pattern: expected");
  expect_load_error(
      [](json& d) {
        d["pre_tokenizer"] = {
            {"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Sideways"}};
      },
      "pre_tokenizer.behavior: unknown split behavior");
  expect_load_error(
      [](json& d) {
        d["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Bert"}}}}};
      },
      "pre_tokenizer.pretokenizers[0].type: unsupported pre_tokenizer");
  expect_load_error([](json& d) { d["pre_tokenizer"]["replacement"] = "ab"; },
                    "pre_tokenizer.replacement: expected one character");
  expect_load_error(
      [](json& d) {
        d["decoder"] = {{"type", "CTC"}};
      },
      "decoder.type: unsupported decoder \"CTC\"");
  expect_load_error([](json& d) { d["decoder"]["decoders"][3]["start"] = 1e9; },
                    "decoder.decoders[3].start");
  expect_load_error([](json& d) { d["post_processor"]["special_tokens"] = json::object(); },
                    "post_processor.special_tokens.<s>: missing");
  expect_load_error([](json& d) { d["post_processor"]["special_tokens"]["<s>"]["ids"] = {123456}; },
                    "special token id 123456 names no token");
  expect_load_error(
      [](json& d) {
        d["post_processor"] = {{"type", "Magic"}};
      },
      "unsupported post_processor");
  expect_load_error([](json& d) { d["added_tokens"] = json::object(); },
                    "added_tokens: expected an array");
  expect_load_error([](json& d) { d["added_tokens"][0].erase("content"); },
                    "added_tokens[0].content: missing");
  expect_load_error([](json& d) { d["added_tokens"][0]["special"] = 1; },
                    "added_tokens[0].special");
}

TEST(TokenizerLoad, ConfigErrorsNameTheField) {
  const std::string tok = test::tiny_sentencepiece().dump();
  auto expect_config_error = [&](const std::string& config, const std::string& needle) {
    try {
      Tokenizer::from_json(tok, config);
      ADD_FAILURE() << "loaded: " << config;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_config_error("[1]", "expected an object");
  expect_config_error("{\"chat_template\": 5}", "chat_template: expected a string or a list");
  expect_config_error("{\"chat_template\": [{\"name\": \"x\"}]}",
                      "chat_template[0].template: missing");
  expect_config_error("{\"bos_token\": 3}", "bos_token: expected a string");
  expect_config_error("{\"add_bos_token\": \"yes\"}", "add_bos_token: expected true/false");
  expect_config_error("{\"model_max_length\": \"big\"}", "model_max_length: expected a number");
}

TEST(TokenizerLoad, MissingFilesAreOneLineErrors) {
  const auto tmp = std::filesystem::temp_directory_path() / "ceiling_tokenizer_load_test";
  std::filesystem::create_directories(tmp);
  EXPECT_THROW(Tokenizer::from_dir(tmp / "nope"), Error);
  try {
    Tokenizer::from_dir(tmp);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no tokenizer.json"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Tokenizer::from_file(tmp), Error);  // a directory is not a tokenizer.json
  std::ofstream(tmp / "tokenizer.json")
      << "{\"model\": {\"vocab\": {\"a\": 0}, \"merges\": [\"a b\"]}}";
  try {
    Tokenizer::from_dir(tmp);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.json: model.merges[0]"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove_all(tmp);
}

}  // namespace
}  // namespace ceiling
