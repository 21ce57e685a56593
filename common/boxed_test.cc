#include "common/boxed.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace slackswap {
namespace {

using ::testing::HasSubstr;

struct Recipe {
  std::vector<int> inputs;
  int cost = 0;
};

TEST(BoxedTest, ReadsLikeAnOptional) {
  Boxed<Recipe> r;
  EXPECT_FALSE(r.has_value());
  r = Recipe{{1, 2}, 5};
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->inputs.size(), 2u);
  Boxed<Recipe> copy = r;  // deep
  copy->cost = 7;
  EXPECT_EQ(r->cost, 5);
  r = std::nullopt;
  EXPECT_FALSE(r.has_value());
  r.emplace().cost = 3;
  EXPECT_EQ((*r).cost, 3);
  EXPECT_EQ(sizeof(Boxed<Recipe>), sizeof(void*));
}

TEST(BoxedTest, StringReadsLikeAString) {
  BoxedString s;
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(s.str(), "");
  s = std::string("keep: fits");
  EXPECT_EQ(s, "keep: fits");
  EXPECT_THAT(s, HasSubstr("fits"));
  EXPECT_NE(s.find("fits"), std::string::npos);
  EXPECT_EQ(s.find("swap"), std::string::npos);
  const std::string& ref = s;
  EXPECT_EQ(ref.size(), 10u);
  BoxedString copy = s;
  EXPECT_EQ(copy, "keep: fits");
  EXPECT_EQ(sizeof(BoxedString), sizeof(void*));
}

}  // namespace
}  // namespace slackswap
