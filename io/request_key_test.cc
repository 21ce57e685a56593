#include "io/request_key.h"

#include <string>

#include "common/sha256.h"
#include "gtest/gtest.h"
#include "io/convert.h"
#include "io/proto_file.h"
#include "model/workloads.h"

namespace slackswap {
namespace {

v1::PlanRequest InlineRequest() {
  v1::PlanRequest req;
  *req.mutable_step()->mutable_graph_inline() =
      GraphToProto(*BuildWorkload("bert-large", {}));
  req.mutable_step()->set_hardware_name("a100-80gb-pcie4");
  req.set_budget_fraction(0.5);
  req.add_policies("slackswap");
  req.add_policies("capuchin");
  return req;
}

TEST(RequestKeyTest, PolicyOrderAndRepeatsDoNotMatter) {
  v1::PlanRequest a = InlineRequest();
  v1::PlanRequest b = InlineRequest();
  b.clear_policies();
  for (const char* p : {"capuchin", "slackswap", "capuchin"}) {
    b.add_policies(p);
  }
  EXPECT_EQ(PlanRequestKey(a), PlanRequestKey(b));
  b.add_policies("ideal");
  EXPECT_NE(PlanRequestKey(a), PlanRequestKey(b));
}

TEST(RequestKeyTest, AGraphInlineOrByDigestIsTheSameQuestion) {
  v1::PlanRequest inline_req = InlineRequest();
  const std::string key = PlanRequestKey(inline_req);
  EXPECT_EQ(key.size(), 32u);
  ASSERT_TRUE(inline_req.step().has_graph_inline());  // put back, whole
  EXPECT_GT(inline_req.step().graph_inline().ops_size(), 500);
  v1::PlanRequest by_ref = inline_req;
  by_ref.mutable_step()->set_graph_sha256(
      GraphDigest(*inline_req.mutable_step()->mutable_graph_inline()));
  EXPECT_EQ(PlanRequestKey(by_ref), key);
  // Another graph, another key.
  inline_req.mutable_step()->mutable_graph_inline()->mutable_ops(0)->set_name(
      "renamed");
  EXPECT_NE(PlanRequestKey(inline_req), key);
}

// Outside an inline graph, that is: see request_key.h.
TEST(RequestKeyTest, UnknownFieldsAreDropped) {
  v1::PlanRequest req = InlineRequest();
  const std::string key = PlanRequestKey(req);
  std::string wire = req.SerializeAsString();
  wire += std::string("\xb8\x3e\x01", 3);  // field 999, varint 1
  v1::PlanRequest with_unknown;
  ASSERT_TRUE(with_unknown.ParseFromString(wire));
  ASSERT_FALSE(
      with_unknown.GetReflection()->GetUnknownFields(with_unknown).empty());
  EXPECT_EQ(PlanRequestKey(with_unknown), key);
}

TEST(RequestKeyTest, EveryAnswerChangingFieldChangesTheKey) {
  v1::PlanRequest base = InlineRequest();
  const std::string key = PlanRequestKey(base);
  v1::PlanRequest r = base;
  r.set_budget_fraction(0.6);
  EXPECT_NE(PlanRequestKey(r), key);
  r = base;
  r.mutable_step()->set_hardware_name("h100-pcie5");
  EXPECT_NE(PlanRequestKey(r), key);
  r = base;
  r.set_timeline_points(10);
  EXPECT_NE(PlanRequestKey(r), key);
  r = base;
  r.set_include_bound(true);
  EXPECT_NE(PlanRequestKey(r), key);
}

TEST(RequestKeyTest, GraphDigestIsHexOfTheCanonicalBytes) {
  v1::PlanRequest req = InlineRequest();
  v1::OperatorGraph& g = *req.mutable_step()->mutable_graph_inline();
  int64_t bytes = 0;
  const std::string hex = GraphDigest(g, &bytes);
  std::string canonical;
  ASSERT_TRUE(SerializeDeterministic(g, &canonical));
  EXPECT_EQ(bytes, static_cast<int64_t>(canonical.size()));
  EXPECT_GT(bytes, int64_t{64} << 10);  // spans several of the hash's buffers
  EXPECT_EQ(hex, Sha256Hex(Sha256::Of(canonical)));
}

TEST(RequestKeyTest, FitAndSweepKeysDropUnknownFieldsAndFollowTheRest) {
  v1::FitRequest fit;
  fit.mutable_workload()->set_name("gpt2-xl");
  fit.add_profiles()->set_hardware_name("a100-80gb-pcie4");
  v1::FitRequest fit_unknown = fit;
  fit_unknown.GetReflection()
      ->MutableUnknownFields(&fit_unknown)
      ->AddVarint(999, 1);
  const std::string fit_key = FitRequestKey(fit);
  EXPECT_EQ(fit_key.size(), 32u);
  EXPECT_EQ(FitRequestKey(fit_unknown), fit_key);
  v1::FitRequest other = fit;
  other.set_target(0.9);
  EXPECT_NE(FitRequestKey(other), fit_key);

  v1::SweepRequest sweep;
  sweep.mutable_step()->mutable_workload()->set_name("gpt2-xl");
  sweep.mutable_step()->set_hardware_name("a100-80gb-pcie4");
  const std::string sweep_key = SweepRequestKey(sweep);
  EXPECT_EQ(sweep_key.size(), 32u);
  v1::SweepRequest wider = sweep;
  wider.set_to(0.9);
  EXPECT_NE(SweepRequestKey(wider), sweep_key);
}

}  // namespace
}  // namespace slackswap
