#include "server/shared_entries.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace slackswap {
namespace {

TEST(SharedEntriesTest, ASealedResultOpensForItsKeyOnly) {
  const std::string sealed = SealResult("key-a", "the answer");
  absl::StatusOr<absl::string_view> payload = OpenResult("key-a", sealed);
  ASSERT_TRUE(payload.ok()) << payload.status();
  EXPECT_EQ(*payload, "the answer");

  absl::StatusOr<absl::string_view> other = OpenResult("key-b", sealed);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), absl::StatusCode::kDataLoss);
}

TEST(SharedEntriesTest, AnAlteredOrTruncatedResultIsRefused) {
  const std::string sealed = SealResult("k", "payload bytes");
  for (size_t i = 0; i < sealed.size(); ++i) {
    std::string altered = sealed;
    altered[i] ^= 1;
    EXPECT_FALSE(OpenResult("k", altered).ok()) << i;
  }
  for (size_t n = 0; n < sealed.size(); ++n) {
    EXPECT_FALSE(OpenResult("k", sealed.substr(0, n)).ok()) << n;
  }
  EXPECT_FALSE(OpenResult("k", "garbage").ok());
}

TEST(SharedEntriesTest, AnEmptyPayloadSealsToo) {
  absl::StatusOr<absl::string_view> payload =
      OpenResult("k", SealResult("k", ""));
  ASSERT_TRUE(payload.ok());
  EXPECT_EQ(*payload, "");
}

TEST(SharedEntriesTest, KeysSeparateBuildsKindsAndRequests) {
  const std::string ns = SharedNamespace("v1", "hw", "nodes");
  EXPECT_EQ(ns.size(), 16u);
  EXPECT_NE(ns, SharedNamespace("v2", "hw", "nodes"));
  EXPECT_NE(ns, SharedNamespace("v1", "hw2", "nodes"));
  EXPECT_NE(ns, SharedNamespace("v1", "hw", "nodes2"));
  // Length-prefixed parts: moving a boundary changes the namespace.
  EXPECT_NE(SharedNamespace("ab", "c", ""), SharedNamespace("a", "bc", ""));
  const std::string plan = SharedKey(ns, "plan", "request");
  EXPECT_EQ(plan.rfind("slackswap:" + ns + ":plan:", 0), 0u) << plan;
  EXPECT_NE(plan, SharedKey(ns, "fit", "request"));
  EXPECT_NE(plan, SharedKey(ns, "plan", "request2"));
  EXPECT_EQ(MarkKey(plan), plan + ":planning");
  EXPECT_EQ(SharedGraphKey(ns, "abc"), "slackswap:" + ns + ":graph:abc");
}

TEST(SharedEntriesTest, PackedMessagesUnpackAsTheyWere) {
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

TEST(SharedEntriesTest, GraphBytesMustHashToTheirDigest) {
  // SHA-256("abc").
  const std::string digest =
      "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
  EXPECT_TRUE(GraphBytesMatch("abc", digest));
  EXPECT_FALSE(GraphBytesMatch("abd", digest));
  EXPECT_FALSE(GraphBytesMatch("abc", std::string(64, '0')));
}

}  // namespace
}  // namespace slackswap
