#include "server/shared_entries.h"

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "gtest/gtest.h"

namespace slackswap {
namespace {

constexpr absl::string_view kSecret = "0123456789abcdef0123456789abcdef";
constexpr absl::string_view kOtherSecret = "fedcba9876543210fedcba9876543210";

// Each test runs sealed both ways: without a fleet secret, and with one.
class SharedEntriesTest : public ::testing::TestWithParam<absl::string_view> {
 protected:
  absl::string_view secret() const { return GetParam(); }
};

INSTANTIATE_TEST_SUITE_P(BothSeals, SharedEntriesTest,
                         ::testing::Values(absl::string_view(), kSecret),
                         [](const auto& info) {
                           return info.param.empty() ? std::string("Digests")
                                                     : std::string("Mac");
                         });

TEST_P(SharedEntriesTest, ASealedResultOpensForItsKeyOnly) {
  const std::string sealed = SealResult("key-a", "the answer", secret());
  absl::StatusOr<absl::string_view> payload =
      OpenResult("key-a", sealed, secret());
  ASSERT_TRUE(payload.ok()) << payload.status();
  EXPECT_EQ(*payload, "the answer");

  absl::StatusOr<absl::string_view> other =
      OpenResult("key-b", sealed, secret());
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), absl::StatusCode::kDataLoss);
}

TEST_P(SharedEntriesTest, AnAlteredOrTruncatedResultIsRefused) {
  const std::string sealed = SealResult("k", "payload bytes", secret());
  for (size_t i = 0; i < sealed.size(); ++i) {
    std::string altered = sealed;
    altered[i] ^= 1;
    EXPECT_FALSE(OpenResult("k", altered, secret()).ok()) << i;
  }
  for (size_t n = 0; n < sealed.size(); ++n) {
    EXPECT_FALSE(OpenResult("k", sealed.substr(0, n), secret()).ok()) << n;
  }
  EXPECT_FALSE(OpenResult("k", "garbage", secret()).ok());
}

TEST_P(SharedEntriesTest, AnEmptyPayloadSealsToo) {
  absl::StatusOr<absl::string_view> payload =
      OpenResult("k", SealResult("k", "", secret()), secret());
  ASSERT_TRUE(payload.ok());
  EXPECT_EQ(*payload, "");
}

// What a client of the Redis without the secret can write: a value sealed
// by digests (anyone can compute them), or a MAC under a secret of its own.
// Neither opens where the fleet has a secret; and a replica without one
// does not take the fleet's sealed values for its own.
TEST(SharedEntriesSecretTest, OnlyTheFleetsSecretOpensItsValues) {
  const std::string forged = SealResult("k", "chosen answer", "");
  absl::StatusOr<absl::string_view> opened = OpenResult("k", forged, kSecret);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(opened.status().message().find("without the fleet secret"),
            absl::string_view::npos)
      << opened.status();
  EXPECT_FALSE(
      OpenResult("k", SealResult("k", "chosen answer", kOtherSecret), kSecret)
          .ok());

  const std::string fleets = SealResult("k", "the answer", kSecret);
  absl::StatusOr<absl::string_view> unkeyed = OpenResult("k", fleets, "");
  ASSERT_FALSE(unkeyed.ok());
  EXPECT_NE(unkeyed.status().message().find("this replica has none"),
            absl::string_view::npos)
      << unkeyed.status();
  // The seal is a MAC, not a digest anyone can recompute: it changes with
  // the secret for the same key and payload.
  EXPECT_NE(fleets, SealResult("k", "the answer", kOtherSecret));
  EXPECT_EQ(fleets, SealResult("k", "the answer", kSecret));
}

TEST(SharedEntriesKeyTest, KeysSeparateBuildsSecretsKindsAndRequests) {
  const std::string ns = SharedNamespace("v1", "hw", "nodes", "");
  EXPECT_EQ(ns.size(), 16u);
  EXPECT_NE(ns, SharedNamespace("v2", "hw", "nodes", ""));
  EXPECT_NE(ns, SharedNamespace("v1", "hw2", "nodes", ""));
  EXPECT_NE(ns, SharedNamespace("v1", "hw", "nodes2", ""));
  // A fleet with a secret, or another secret, reads none of these answers.
  const std::string keyed = SharedNamespace("v1", "hw", "nodes", kSecret);
  EXPECT_NE(ns, keyed);
  EXPECT_NE(keyed, SharedNamespace("v1", "hw", "nodes", kOtherSecret));
  EXPECT_EQ(keyed, SharedNamespace("v1", "hw", "nodes", kSecret));
  // Length-prefixed parts: moving a boundary changes the namespace.
  EXPECT_NE(SharedNamespace("ab", "c", "", ""),
            SharedNamespace("a", "bc", "", ""));
  const std::string plan = SharedKey(ns, "plan", "request");
  EXPECT_EQ(plan.rfind("slackswap:" + ns + ":plan:", 0), 0u) << plan;
  EXPECT_NE(plan, SharedKey(ns, "fit", "request"));
  EXPECT_NE(plan, SharedKey(ns, "plan", "request2"));
  EXPECT_EQ(MarkKey(plan), plan + ":planning");
  EXPECT_EQ(SharedGraphKey(ns, "abc"), "slackswap:" + ns + ":graph:abc");
}

TEST(SharedEntriesPackTest, PackedMessagesUnpackAsTheyWere) {
  std::string packed;
  const std::vector<std::string> messages = {"a", "", std::string(70000, 'x'),
                                             std::string("\0\1", 2)};
  for (const std::string& m : messages) AppendPacked(m, &packed);
  std::vector<absl::string_view> out;
  ASSERT_TRUE(UnpackMessages(packed, &out));
  ASSERT_EQ(out.size(), messages.size());
  for (size_t i = 0; i < messages.size(); ++i) EXPECT_EQ(out[i], messages[i]);
  ASSERT_TRUE(UnpackMessages("", &out));
  EXPECT_TRUE(out.empty());
  // Cut anywhere inside a message or its length: refused. (Cut at a
  // boundary, 6 bytes: the last message whole, it is a shorter stream; the
  // sealed entry's payload digest refuses that.)
  for (size_t n = 1; n < 10; ++n) {
    if (n == 6) continue;
    EXPECT_FALSE(UnpackMessages(packed.substr(0, packed.size() - n), &out))
        << n;
  }
  EXPECT_FALSE(UnpackMessages(std::string("\xff\xff\xff\xff", 4), &out));
}

TEST(SharedEntriesGraphTest, GraphBytesMustHashToTheirDigest) {
  // SHA-256("abc").
  const std::string digest =
      "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
  EXPECT_TRUE(GraphBytesMatch("abc", digest));
  EXPECT_FALSE(GraphBytesMatch("abd", digest));
  EXPECT_FALSE(GraphBytesMatch("abc", std::string(64, '0')));
}

}  // namespace
}  // namespace slackswap
