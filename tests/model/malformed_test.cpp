// The malformed-model suite: tests/model/malformed/<case>/ (written by make_malformed.py), each
// with the substring its error must contain in malformed/expected.json. Every case must fail
// with one line that names a path inside its directory.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "model/weights.h"

namespace ceiling {
namespace {

namespace fs = std::filesystem;

const fs::path kSuite = fs::path(CEILING_SOURCE_DIR) / "tests/model/malformed";

TEST(MalformedModels, EveryCaseFailsWithItsMessage) {
  std::ifstream in(kSuite / "expected.json");
  ASSERT_TRUE(in) << kSuite / "expected.json";
  const auto expected = nlohmann::json::parse(in);
  std::set<std::string> dirs;
  for (const auto& e : fs::directory_iterator(kSuite))
    if (e.is_directory()) dirs.insert(e.path().filename().string());
  std::set<std::string> listed;
  for (const auto& [name, want] : expected.items()) listed.insert(name);
  EXPECT_EQ(dirs, listed) << "expected.json and the case directories disagree";
  EXPECT_GE(dirs.size(), 30u);

  for (const auto& [name, want_json] : expected.items()) {
    SCOPED_TRACE(name);
    const std::string want = want_json.get<std::string>();
    const fs::path dir = kSuite / name;
    try {
      load_model(dir);
      ADD_FAILURE() << name << ": loaded without error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(want), std::string::npos) << "want '" << want << "', got: " << msg;
      EXPECT_NE(msg.find(dir.string()), std::string::npos) << "names the file: " << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
}

}  // namespace
}  // namespace ceiling
