#include "cli/flags.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace slackswap {
namespace {

using ::testing::HasSubstr;

TEST(FlagsTest, ParsesBothSpellingsAndSwitches) {
  auto f =
      Flags::Parse({"--a=1", "--b", "two", "--json"}, {"a", "b"}, {"json"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(*f->Get("a"), "1");
  EXPECT_EQ(*f->Get("b"), "two");
  EXPECT_TRUE(f->Has("json"));
  EXPECT_EQ(**f->GetInt("a"), 1);
  EXPECT_FALSE(f->Get("c").has_value());
}

TEST(FlagsTest, RejectsWhatItDoesNotKnow) {
  EXPECT_THAT(
      std::string(Flags::Parse({"--c=1"}, {"a"}, {}).status().message()),
      HasSubstr("unknown flag --c"));
  EXPECT_THAT(
      std::string(Flags::Parse({"stray"}, {"a"}, {}).status().message()),
      HasSubstr("unexpected argument 'stray'"));
  EXPECT_THAT(std::string(Flags::Parse({"--a"}, {"a"}, {}).status().message()),
              HasSubstr("--a needs a value"));
  EXPECT_THAT(
      std::string(
          Flags::Parse({"--a=1", "--a=2"}, {"a"}, {}).status().message()),
      HasSubstr("given twice"));
  auto f = Flags::Parse({"--a=x"}, {"a"}, {});
  EXPECT_THAT(std::string(f->GetInt("a").status().message()),
              HasSubstr("--a must be an integer"));
}

}  // namespace
}  // namespace slackswap
