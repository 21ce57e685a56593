#include "server/redis_url.h"

#include "gtest/gtest.h"

namespace slackswap {
namespace {

TEST(RedisUrlTest, ReadsEveryPart) {
  absl::StatusOr<RedisEndpoint> e =
      ParseRedisUrl("rediss://planner:p%40ss@redis.slackswap:6380/2");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_TRUE(e->tls);
  EXPECT_EQ(e->host, "redis.slackswap");
  EXPECT_EQ(e->port, 6380);
  EXPECT_EQ(e->db, 2);
  EXPECT_EQ(e->user, "planner");
  EXPECT_EQ(e->password, "p@ss");
  EXPECT_EQ(e->Redacted(), "rediss://planner:***@redis.slackswap:6380/2");
}

TEST(RedisUrlTest, DefaultsThePortAndDatabase) {
  absl::StatusOr<RedisEndpoint> e = ParseRedisUrl("redis://10.0.0.7");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_FALSE(e->tls);
  EXPECT_EQ(e->port, 6379);
  EXPECT_EQ(e->db, 0);
  EXPECT_TRUE(e->password.empty());
  EXPECT_EQ(e->Redacted(), "redis://10.0.0.7:6379/0");
}

TEST(RedisUrlTest, TakesAPasswordWithoutAUserAndBracketedIpv6) {
  absl::StatusOr<RedisEndpoint> e = ParseRedisUrl("redis://:secret@[::1]:7000");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->host, "::1");
  EXPECT_EQ(e->port, 7000);
  EXPECT_EQ(e->user, "");
  EXPECT_EQ(e->password, "secret");
  EXPECT_EQ(e->Redacted(), "redis://:***@[::1]:7000/0");
}

TEST(RedisUrlTest, RefusesWhatItCannotUseNamingTheFlag) {
  for (const char* url :
       {"", "http://h", "redis://", "redis://h:", "redis://h:0",
        "redis://h:65536", "redis://h:port", "redis://h/x", "redis://h/-1",
        "redis://h?db=1", "redis://h#f", "redis://us er@h", "redis://:%zz@h",
        "redis://[::1", "redis://[::1]x", "redis://[zz]:1", "redis://h%2f:1"}) {
    absl::StatusOr<RedisEndpoint> e = ParseRedisUrl(url);
    ASSERT_FALSE(e.ok()) << url;
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument) << url;
    EXPECT_NE(e.status().message().find("--shared_store"),
              absl::string_view::npos)
        << e.status();
  }
}

TEST(RedisUrlTest, TakesAUserWhosePasswordComesFromAFile) {
  absl::StatusOr<RedisEndpoint> e = ParseRedisUrl("redis://planner@h");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->user, "planner");
  EXPECT_EQ(e->password, "");
}

TEST(RedisUrlTest, NeverEchoesThePassword) {
  absl::StatusOr<RedisEndpoint> e = ParseRedisUrl("redis://:hunter2@h:1/99999");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message().find("hunter2"), absl::string_view::npos);
}

}  // namespace
}  // namespace slackswap
