#include "cli/flags.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace slackswap {
namespace {

using ::testing::HasSubstr;

const FlagSpecs kSpecs = {
    {"a", "N", "a number"}, {"b", "TEXT", "a word"}, {"json", "", "a switch"}};

TEST(FlagsTest, ParsesBothSpellingsAndSwitches) {
  auto f = Flags::Parse({"--a=1", "--b", "two", "--json"}, kSpecs);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(*f->Get("a"), "1");
  EXPECT_EQ(*f->Get("b"), "two");
  EXPECT_TRUE(f->Has("json"));
  EXPECT_EQ(**f->GetInt("a"), 1);
  EXPECT_FALSE(f->Get("c").has_value());
}

TEST(FlagsTest, RejectsWhatItDoesNotKnow) {
  EXPECT_THAT(std::string(Flags::Parse({"--c=1"}, kSpecs).status().message()),
              HasSubstr("unknown flag --c"));
  EXPECT_THAT(std::string(Flags::Parse({"stray"}, kSpecs).status().message()),
              HasSubstr("unexpected argument 'stray'"));
  EXPECT_THAT(std::string(Flags::Parse({"--a"}, kSpecs).status().message()),
              HasSubstr("--a needs a value"));
  EXPECT_THAT(
      std::string(Flags::Parse({"--a=1", "--a=2"}, kSpecs).status().message()),
      HasSubstr("given twice"));
  auto f = Flags::Parse({"--a=x"}, kSpecs);
  EXPECT_THAT(std::string(f->GetInt("a").status().message()),
              HasSubstr("--a must be an integer"));
}

TEST(FlagsTest, KeepsAsManyPlainArgumentsAsAllowed) {
  auto f = Flags::Parse({"policies", "--json"}, kSpecs, /*max_positional=*/1);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->Positional(), std::vector<std::string>{"policies"});
  EXPECT_THAT(
      std::string(Flags::Parse({"a", "b"}, kSpecs, 1).status().message()),
      HasSubstr("unexpected argument 'b'"));
  EXPECT_THAT(
      std::string(Flags::Parse({"--json=1"}, kSpecs).status().message()),
      HasSubstr("--json takes no value"));
}

}  // namespace
}  // namespace slackswap
