#include "io/chrome_trace.h"

#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace slackswap {
namespace {

using ::testing::HasSubstr;

TEST(ChromeTraceTest, IsValidJsonWithStreamsAndMemory) {
  Graph g;
  g.name = "g";
  int32_t a = g.AddTensor({.name = "a \"quoted\"", .bytes = 10});
  g.AddOp({.name = "f", .phase = Phase::kForward, .outputs = {a}});
  g.AddOp({.name = "b", .phase = Phase::kBackward, .inputs = {a}});
  ASSERT_TRUE(IndexGraph(g).ok());
  SimResult r;
  r.events.push_back({StreamId::kCompute, EventType::kOp, 0, 0, 1500});
  r.events.push_back({StreamId::kD2H, EventType::kSwapOut, a, 1500, 2500});
  r.events.push_back(
      {StreamId::kCompute, EventType::kRecompute, 0, 3000, 4000});
  r.timeline.push_back({0, 10, 0});
  std::string json = ChromeTraceJson(r, g);
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

}  // namespace
}  // namespace slackswap
