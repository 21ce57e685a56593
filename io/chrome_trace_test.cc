#include "io/chrome_trace.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "io/convert.h"
#include "model/node.h"
#include "sim/node_simulator.h"
#include "testing/lowered.h"
#include "testing/stream_events.h"

namespace slackswap {
namespace {

using ::google::protobuf::Struct;
using ::google::protobuf::Value;
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

// Without the simulator's series (an older server's result), each host
// copy loads its links at its average rate.
TEST(ChromeTraceTest, ANodeHasAProcessPerRankAndLinksCountTheirCopiesRates) {
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
  n.add_links()->set_name("GPU 0 NVLink");  // no load recorded: no track
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
  // 100 bytes from 0 to 1,000 ns (0.1 GB/s), 50 from 500 to 1,500 ns.
  for (auto [ts, rate] :
       {std::pair{"0.000", 100'000'000}, std::pair{"0.500", 150'000'000},
        std::pair{"1.000", 50'000'000}, std::pair{"1.500", 0}}) {
    EXPECT_THAT(json,
                HasSubstr(absl::StrCat(
                    "{\"name\":\"switch s uplink\",\"ph\":\"C\",\"pid\":3,"
                    "\"ts\":",
                    ts,
                    ",\"args\":{\"h2d_bytes_per_s\":0,"
                    "\"d2h_bytes_per_s\":",
                    rate, "}}")));
  }
}

// A data-parallel step simulated on a DGX A100: its all-reduces load the
// GPUs' NVLink ports, which carry no host copy, and the trace shows it.
TEST(ChromeTraceTest, ADataParallelStepLoadsTheNvlinkPorts) {
  absl::StatusOr<Node> node = FindNode("dgx-a100-80gb");
  ASSERT_TRUE(node.ok()) << node.status();
  const testutil::Lowered l = testutil::DataParallelStep(node->gpu, 2, 0);
  const std::vector<RankStep> ranks = testutil::OnGpus(l, 2);
  SimOptions opts;
  opts.record_events = true;
  opts.record_link_load = true;
  absl::StatusOr<NodeSimResult> r = SimulateNode(*node, ranks, opts);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->feasible) << r->infeasible_reason;
  const v1::NodeSimulation pb = NodeResultToProto(*r, *node, ranks);
  // The message carries the simulator's series as they are.
  ASSERT_EQ(pb.links_size(), static_cast<int>(r->links.size()));
  for (int l = 0; l < pb.links_size(); ++l) {
    const std::vector<LinkLoadPoint>& want = r->links[l].load;
    ASSERT_EQ(pb.links(l).load_size(), static_cast<int>(want.size()));
    for (int i = 0; i < pb.links(l).load_size(); ++i) {
      const v1::LinkLoadPoint& got = pb.links(l).load(i);
      EXPECT_EQ(got.time_ns(), want[i].time_ns);
      EXPECT_EQ(got.h2d_bytes_per_ns(), want[i].h2d_bytes_per_ns);
      EXPECT_EQ(got.d2h_bytes_per_ns(), want[i].d2h_bytes_per_ns);
    }
  }
  const std::string json = ChromeTraceNodeJson(pb, "ddp");
  Struct parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &parsed).ok());
  // Per counter track: its samples, and the most it shows each way.
  std::map<std::string, int> samples;
  std::map<std::string, double> most;
  for (const Value& e :
       parsed.fields().at("traceEvents").list_value().values()) {
    const auto& f = e.struct_value().fields();
    if (f.at("ph").string_value() != "C" || f.at("pid").number_value() != 3) {
      continue;
    }
    const std::string name = f.at("name").string_value();
    ++samples[name];
    for (const char* dir : {"h2d_bytes_per_s", "d2h_bytes_per_s"}) {
      most[name] =
          std::max(most[name],
                   f.at("args").struct_value().fields().at(dir).number_value());
    }
  }
  // No host copies: only the two ports have a track, each loaded (at most
  // the port's rate).
  EXPECT_EQ(samples.size(), 2u);
  for (const char* port : {"GPU 0 NVLink", "GPU 1 NVLink"}) {
    SCOPED_TRACE(port);
    EXPECT_GT(samples[port], 1);
    EXPECT_GT(most[port], 0);
    EXPECT_LE(most[port], node->nvlink_gbps * 1e9 + 1);
  }
}

}  // namespace
}  // namespace slackswap
