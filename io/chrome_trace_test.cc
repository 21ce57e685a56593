#include "io/chrome_trace.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "testing/stream_events.h"

namespace slackswap {
namespace {

using ::testing::HasSubstr;

TEST(ChromeTraceTest, IsValidJsonWithStreamsAndMemory) {
  v1::SimulationResult r;
  auto add = [&](v1::Stream s, v1::EventKind k, const char* name, int64_t start,
                 int64_t end) {
    testutil::AddStreamEvent(r, s, k, name, start, end);
  };
  add(v1::STREAM_COMPUTE, v1::EVENT_KIND_OP, "f", 0, 1500);
  add(v1::STREAM_D2H, v1::EVENT_KIND_SWAP_OUT, "a \"quoted\"", 1500, 2500);
  add(v1::STREAM_COMPUTE, v1::EVENT_KIND_RECOMPUTE, "f", 3000, 4000);
  v1::MemoryPoint* m = r.add_memory_timeline();
  m->set_activation_bytes(10);
  std::string json = ChromeTraceJson(r, "g");
  google::protobuf::Struct parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &parsed).ok())
      << json;
  const auto& events = parsed.fields().at("traceEvents").list_value();
  EXPECT_EQ(events.values_size(), 1 + 3 + 3 + 1);
  EXPECT_THAT(json, HasSubstr("\"ts\":1.500,\"dur\":1.000"));
  EXPECT_THAT(json, HasSubstr("recompute f"));
  EXPECT_THAT(json, HasSubstr("H2D copy"));
  EXPECT_THAT(json, HasSubstr("\"activation_bytes\":10"));
}

TEST(ChromeTraceTest, TheAllocatorHasACounterTrackWhereModelled) {
  v1::SimulationResult r;
  v1::MemoryPoint* m = r.add_memory_timeline();
  m->set_time_ns(2000);
  m->set_allocated_bytes(512);
  m->set_reserved_bytes(2097152);
  EXPECT_THAT(ChromeTraceJson(r, "g"), ::testing::Not(HasSubstr("allocator")));
  r.mutable_device()->set_peak_reserved_bytes(2097152);
  const std::string json = ChromeTraceJson(r, "g");
  EXPECT_THAT(json, HasSubstr("{\"name\":\"allocator\",\"ph\":\"C\",\"pid\":1,"
                              "\"ts\":2.000,\"args\":{\"allocated_bytes\":512,"
                              "\"reserved_bytes\":2097152}}"));
}

}  // namespace
}  // namespace slackswap

namespace slackswap {
namespace {

TEST(ChromeTraceTest, ANodeHasAProcessPerRankAndLinksCountBytesInFlight) {
  v1::NodeSimulation n;
  for (int i = 0; i < 2; ++i) {
    v1::RankResult* rank = n.add_ranks();
    rank->set_rank(i);
    rank->set_gpu(i);
    testutil::AddStreamEvent(*rank->mutable_result(), v1::STREAM_D2H,
                             v1::EVENT_KIND_SWAP_OUT, "a", i * 500,
                             1000 + i * 500, i == 0 ? 100 : 50);
  }
  v1::LinkUsage* uplink = n.add_links();
  uplink->set_name("switch s uplink");
  uplink->add_ranks(0);
  uplink->add_ranks(1);
  n.add_links()->set_name("GPU 0 NVLink");  // no host copies: no track
  const std::string json = ChromeTraceNodeJson(n, "g");
  google::protobuf::Struct parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &parsed).ok())
      << json;
  EXPECT_THAT(json, HasSubstr("\"pid\":1,\"args\":{\"name\":\"rank 0 (GPU 0): "
                              "g\"}"));
  EXPECT_THAT(json, HasSubstr("\"pid\":2,\"args\":{\"name\":\"rank 1 (GPU 1): "
                              "g\"}"));
  EXPECT_THAT(json, HasSubstr("\"pid\":3,\"args\":{\"name\":\"shared links: "
                              "g\"}"));
  EXPECT_THAT(json, ::testing::Not(HasSubstr("NVLink")));
  // 100 bytes from 0 to 1,000 ns, 50 from 500 to 1,500 ns.
  for (auto [ts, bytes] : {std::pair{"0.000", 100}, std::pair{"0.500", 150},
                           std::pair{"1.000", 50}, std::pair{"1.500", 0}}) {
    EXPECT_THAT(json,
                HasSubstr(absl::StrCat(
                    "{\"name\":\"switch s uplink\",\"ph\":\"C\",\"pid\":3,"
                    "\"ts\":",
                    ts,
                    ",\"args\":{\"h2d_bytes_in_flight\":0,"
                    "\"d2h_bytes_in_flight\":",
                    bytes, "}}")));
  }
}

}  // namespace
}  // namespace slackswap
