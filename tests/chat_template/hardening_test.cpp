// Issue 18: totals in chat templates. Single values were capped, the sum was not: fifteen
// `{% set lN = [N] * 16000000 %}` in a 700-byte template rendered at 7.5 GB, and a 48 MB template
// of `{{ '' }}` took 4.7 GB to parse. Now the template size and the total a render allocates are
// capped, and an over-budget render is an error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../core/measure.h"
#include "test_util.h"

namespace ceiling {
namespace {


using test::one_user;

std::string sets(int lists, int items) {
  std::string src;
  for (int i = 0; i < lists; ++i)
    src += "{% set l" + std::to_string(i) + " = [" + std::to_string(i) + "] * " +
           std::to_string(items) + " %}";
  return src + "ok";
}

TEST(ChatTemplateHardening, TotalAllocationIsCapped) {
  // One list of 2M items is fine; fifteen of them (each under every single-value cap) are not.
  EXPECT_EQ(ChatTemplate(sets(1, 2'000'000)).render(one_user()), "ok");
  const std::string src = sets(15, 2'000'000);
  const test::Cost c = test::measure([&] { ChatTemplate(src).render(one_user()); });
  ASSERT_FALSE(c.crashed);
  ASSERT_TRUE(c.threw);
  EXPECT_NE(c.error.find("allocated more than its limit"), std::string::npos) << c.error;
  // max_alloc_bytes (256 MiB) plus the interpreter's own overhead.
  EXPECT_LT(c.peak_mib, 400.0) << c.peak_mib;
  // The review's exact template: fifteen lists of 16M.
  const test::Cost big =
      test::measure([&] { ChatTemplate(sets(15, 16'000'000)).render(one_user()); });
  ASSERT_TRUE(big.threw);
  EXPECT_LT(big.peak_mib, 400.0) << big.peak_mib;
}

TEST(ChatTemplateHardening, TemplateSizeIsCapped) {
  std::string src;
  while (src.size() <= ChatTemplateLimits{}.max_template_bytes) src += "{{ '' }}";
  try {
    ChatTemplate t(src);
    ADD_FAILURE() << "parsed a template over the size cap";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("over the limit"), std::string::npos) << e.what();
  }
  // At the cap, parsing costs a bounded multiple of the template.
  src.resize(ChatTemplateLimits{}.max_template_bytes / 8 * 8);
  const test::Cost c = test::measure([&] { ChatTemplate t(src); });
  ASSERT_FALSE(c.crashed);
  EXPECT_LT(c.peak_mib, 200.0) << c.peak_mib;
}

// chat_template.jinja linked out of the model directory is not read.
TEST(ChatTemplateHardening, TemplateFilesStayInsideTheModelDirectory) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("ceiling-ct-hard-" + std::to_string(getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "model");
  std::ofstream(root / "secret.jinja") << "SECRET";
  fs::create_symlink(root / "secret.jinja", root / "model/chat_template.jinja");
  try {
    ChatTemplate::from_model_dir(root / "model", false);
    ADD_FAILURE() << "followed a link out of the model directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("outside the model directory"), std::string::npos)
        << e.what();
  }
  fs::remove_all(root);
}

}  // namespace
}  // namespace ceiling
