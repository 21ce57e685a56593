#include "common/text.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace slackswap {
namespace {

using ::testing::HasSubstr;

TEST(TextTest, ReadsAsTheStringItWasMadeFrom) {
  Text empty;
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty, "");
  Text name = "L0.qkv";
  EXPECT_EQ(name, "L0.qkv");
  EXPECT_EQ(name, std::string("L0.qkv"));
  EXPECT_NE(name, "L0.qkv.bwd");
  EXPECT_EQ(name.size(), 6u);
  EXPECT_EQ(absl::StrCat(name.view(), ".bwd"), "L0.qkv.bwd");
  EXPECT_EQ(name.str() + ".bwd", "L0.qkv.bwd");
  EXPECT_THAT(name, HasSubstr("qkv"));
  std::string with_nul("a\0b", 3);
  EXPECT_EQ(Text(with_nul).view(), with_nul);
  EXPECT_EQ(sizeof(Text), 16u);
}

TEST(TextTest, CopiesShareAndOutliveTheOriginal) {
  Text copy;
  {
    Text original = std::string(100, 'x');
    copy = original;
    Text moved = std::move(original);
    EXPECT_TRUE(original.empty());  // NOLINT: moved from, empty
    EXPECT_EQ(moved.data(), copy.data());
  }
  EXPECT_EQ(copy, std::string(100, 'x'));
  copy = copy;  // NOLINT: self-assignment keeps it
  EXPECT_EQ(copy.size(), 100u);
}

TEST(TextTest, PoolPacksAndInterns) {
  std::vector<Text> names;
  {
    TextPool pool;
    for (int i = 0; i < 20000; ++i) {
      names.push_back(pool.Add(absl::StrCat("L", i, ".attn.qkv")));
    }
    // Packed: consecutive strings share a block.
    EXPECT_EQ(names[1].data(), names[0].data() + names[0].size());
    Text a = pool.Intern("bf16");
    Text b = pool.Intern(std::string("bf") + "16");
    EXPECT_EQ(a.data(), b.data());
    EXPECT_NE(pool.Intern("fp32").data(), a.data());
    // A long string gets a block of its own.
    const std::string big(100000, 'y');
    EXPECT_EQ(pool.Add(big), big);
    EXPECT_TRUE(pool.Add("").empty());
  }
  // The pool is gone; its strings are not.
  for (int i = 0; i < 20000; i += 997) {
    EXPECT_EQ(names[i], absl::StrCat("L", i, ".attn.qkv"));
  }
  absl::flat_hash_set<Text> set(names.begin(), names.end());
  EXPECT_EQ(set.size(), names.size());
}

TEST(TextTest, CopiesAcrossThreads) {
  TextPool pool;
  std::vector<Text> names;
  for (int i = 0; i < 1000; ++i) names.push_back(pool.Add(absl::StrCat(i)));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&names] {
      for (int round = 0; round < 100; ++round) {
        std::vector<Text> copies(names.begin(), names.end());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(names[999], "999");
}

}  // namespace
}  // namespace slackswap
