#include "io/chrome_trace.h"

#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace slackswap {
namespace {

using ::testing::HasSubstr;

TEST(ChromeTraceTest, IsValidJsonWithStreamsAndMemory) {
  v1::SimulationResult r;
  auto add = [&](v1::Stream s, v1::EventKind k, const char* name, int64_t start,
                 int64_t end) {
    v1::StreamEvent* e = r.add_events();
    e->set_stream(s);
    e->set_kind(k);
    e->set_name(name);
    e->set_start_ns(start);
    e->set_end_ns(end);
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
