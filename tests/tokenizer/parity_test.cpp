// Parity with Hugging Face `tokenizers`: the fixture tokenizer_parity_oracle (parity_oracle.py)
// writes, per real tokenizer, the corpus + seeded random strings with HF's ids and decodes; this
// test loads the same tokenizer.json with ceiling and requires identical ids and text, and that
// StreamDecoder's pieces add up to the same text.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace ceiling {
namespace {

using nlohmann::json;

constexpr int kMaxReported = 8;  // mismatches printed per check

struct Expected {
  json data;
  Tokenizer tokenizer;
};

// Loads <parity dir>/<name>.json and the tokenizer it names (once per process).
const Expected& expected(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Expected>> cache;
  auto& slot = cache[name];
  if (!slot) {
    const auto path = std::filesystem::path(CEILING_TOKENIZER_PARITY_DIR) / (name + ".json");
    std::ifstream in(path);
    if (!in) {
      throw std::runtime_error(fmt::format(
          "{} missing: run the ctest fixture tokenizer_parity_oracle (needs python3 + tokenizers)",
          path.string()));
    }
    json data = json::parse(in);
    const std::string config = data.at("tokenizer_config");
    Tokenizer t = Tokenizer::from_file(data.at("tokenizer_json").get<std::string>(), config);
    slot = std::make_unique<Expected>(Expected{std::move(data), std::move(t)});
    fmt::print("{}: HF seed {}, {} texts ({} from the corpus), {} id lists\n", name,
               slot->data["seed"].get<int64_t>(), slot->data["cases"].size(),
               slot->data["corpus_cases"].get<int>(), slot->data["decode"].size());
  }
  return *slot;
}

// The text with control and non-ASCII characters escaped, shortened, for failure messages.
std::string show(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size() && out.size() < 160;) {
    char32_t c = 0;
    int n = tok::utf8_decode(s, i, &c);
    if (n == 0) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(s[i]));
      ++i;
      continue;
    }
    if (c >= 0x20 && c < 0x7F && c != '\\')
      out += static_cast<char>(c);
    else if (c > 0xFFFF)
      out += fmt::format("\\U{:08x}", static_cast<uint32_t>(c));
    else
      out += fmt::format("\\u{:04x}", static_cast<uint32_t>(c));
    i += n;
  }
  return s.size() > 160 ? out + "..." : out;
}

std::string stream_decode(const Tokenizer& t, const std::vector<int32_t>& ids, bool skip,
                          std::string* bad_piece) {
  StreamDecoder sd(t, skip);
  std::string all;
  auto take = [&](std::string piece) {
    if (tok::utf8_find_invalid(piece) != std::string::npos && bad_piece->empty())
      *bad_piece = piece;
    all += piece;
  };
  for (int32_t id : ids) take(sd.push(id));
  take(sd.flush());
  return all;
}

// Each check returns the number of mismatches and reports the first few.
int check_encode(const std::string& name, const Expected& e) {
  int bad = 0;
  for (const json& c : e.data["cases"]) {
    const std::string text = c["text"];
    for (bool special : {true, false}) {
      const auto want = c[special ? "ids" : "ids_plain"].get<std::vector<int32_t>>();
      const auto got = e.tokenizer.encode(text, special);
      if (got != want && ++bad <= kMaxReported) {
        ADD_FAILURE() << fmt::format(
            "{}: encode(\"{}\", add_special_tokens={})\n  hf:      {}\n  ceiling: {}", name,
            show(text), special, want, got);
      }
    }
  }
  return bad;
}

template <typename F>
void for_each_id_list(const Expected& e, F&& f) {
  for (const json& c : e.data["cases"]) f(c);
  for (const json& c : e.data["decode"]) f(c);
}

int check_decode(const std::string& name, const Expected& e) {
  int bad = 0;
  for_each_id_list(e, [&](const json& c) {
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    for (bool skip : {false, true}) {
      const std::string want = c[skip ? "decoded_skip" : "decoded"];
      const std::string got = e.tokenizer.decode(ids, skip);
      if (got != want && ++bad <= kMaxReported) {
        ADD_FAILURE() << fmt::format(
            "{}: decode({}, skip_special_tokens={})\n  hf:      \"{}\"\n  ceiling: \"{}\"", name,
            ids, skip, show(want), show(got));
      }
    }
  });
  return bad;
}

int check_stream(const std::string& name, const Expected& e) {
  int bad = 0;
  for_each_id_list(e, [&](const json& c) {
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    for (bool skip : {false, true}) {
      std::string bad_piece;
      const std::string want = e.tokenizer.decode(ids, skip);
      const std::string got = stream_decode(e.tokenizer, ids, skip, &bad_piece);
      if ((got != want || !bad_piece.empty()) && ++bad <= kMaxReported) {
        ADD_FAILURE() << fmt::format(
            "{}: stream({}, skip={})\n  decode: \"{}\"\n  stream: \"{}\"{}", name, ids, skip,
            show(want), show(got), bad_piece.empty() ? "" : "\n  split piece: " + show(bad_piece));
      }
    }
  });
  return bad;
}

class Parity : public ::testing::TestWithParam<std::string> {};

TEST_P(Parity, EncodeMatchesHf) {
  EXPECT_EQ(check_encode(GetParam(), expected(GetParam())), 0) << "encode mismatches";
}

TEST_P(Parity, DecodeMatchesHf) {
  EXPECT_EQ(check_decode(GetParam(), expected(GetParam())), 0) << "decode mismatches";
}

TEST_P(Parity, StreamDecodeAddsUpToDecode) {
  EXPECT_EQ(check_stream(GetParam(), expected(GetParam())), 0) << "stream mismatches";
}

// Real or synthetic tokenizer.json files with one component swapped (see parity_oracle.py).
TEST(ParityVariants, AllMatchHf) {
  std::ifstream in(std::filesystem::path(CEILING_TOKENIZER_PARITY_DIR) / "index.json");
  ASSERT_TRUE(in) << "index.json missing: run the ctest fixture tokenizer_parity_oracle";
  const json index = json::parse(in);
  int variants = 0;
  for (const json& n : index["results"]) {
    const std::string name = n;
    if (!name.starts_with("variants/")) continue;
    ++variants;
    const Expected& e = expected(name);
    EXPECT_EQ(check_encode(name, e) + check_decode(name, e) + check_stream(name, e), 0) << name;
  }
  EXPECT_GE(variants, 30);
}

// The real chat model's tokenizer (scripts/fetch_smollm2.sh converts it from the GGUF): skipped
// when the model was not fetched, so the oracle wrote no result for it.
TEST(ParityModels, SmolLM2MatchesHf) {
  std::ifstream in(std::filesystem::path(CEILING_TOKENIZER_PARITY_DIR) / "index.json");
  ASSERT_TRUE(in) << "index.json missing: run the ctest fixture tokenizer_parity_oracle";
  const json index = json::parse(in);
  const json models = index.value("models", json::array());
  if (std::find(models.begin(), models.end(), "smollm2") == models.end())
    GTEST_SKIP() << "models/SmolLM2-135M-Instruct missing: run scripts/fetch_smollm2.sh";
  const Expected& e = expected("smollm2");
  EXPECT_EQ(check_encode("smollm2", e), 0) << "encode mismatches";
  EXPECT_EQ(check_decode("smollm2", e), 0) << "decode mismatches";
  EXPECT_EQ(check_stream("smollm2", e), 0) << "stream mismatches";
}

INSTANTIATE_TEST_SUITE_P(RealTokenizers, Parity,
                         ::testing::Values("gpt2", "llama3", "qwen2.5", "mistral-7b-instruct-v0.3",
                                           "tinyllama"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string n = p.param;
                           for (char& ch : n)
                             ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return n;
                         });

}  // namespace
}  // namespace ceiling
