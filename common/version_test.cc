#include "common/version.h"

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace slackswap {
namespace {

using ::testing::MatchesRegex;

TEST(VersionTest, IsTheVersionFile) {
  std::ifstream in(std::string(SLACKSWAP_SOURCE_DIR) + "/VERSION");
  std::string version;
  ASSERT_TRUE(std::getline(in, version));
  EXPECT_EQ(Version(), version);
  EXPECT_THAT(version, MatchesRegex("[0-9]+\\.[0-9]+\\.[0-9]+"));
}

// Built from a git checkout (or outside one, with no commit to name).
TEST(VersionTest, NamesACommit) {
  EXPECT_THAT(Commit(), MatchesRegex("[0-9a-f]{12}(-dirty)?|unknown"));
  EXPECT_EQ(VersionLine("slackswap"), std::string("slackswap ") + Version() +
                                          " (commit " + Commit() + ")\n");
}

}  // namespace
}  // namespace slackswap
