#include "io/convert.h"

#include <cmath>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/proto_file.h"
#include "model/efficiency.h"
#include "model/node.h"
#include "model/transformer.h"
#include "model/workloads.h"

namespace slackswap {
namespace {

using ::testing::HasSubstr;

v1::OperatorGraph Wire() {
  v1::OperatorGraph g;
  g.set_name("wire");
  for (int64_t id : {100, 200}) {
    v1::Tensor* t = g.add_tensors();
    t->set_id(id);
    t->set_name(id == 100 ? "x" : "w");
    t->set_size_bytes(64);
    if (id == 200) t->set_kind(v1::TENSOR_KIND_PARAMETER);
  }
  v1::Op* f = g.add_ops();
  f->set_id(12);
  f->set_name("mlp_up");
  f->set_phase(v1::PHASE_FORWARD);
  f->add_input_ids(200);
  f->add_output_ids(100);
  v1::Op* b = g.add_ops();
  b->set_id(13);
  b->set_name("mlp_up.bwd");
  b->set_phase(v1::PHASE_BACKWARD);
  b->add_input_ids(100);
  return g;
}

std::string Bytes(const google::protobuf::Message& m) {
  std::string out;
  EXPECT_TRUE(SerializeDeterministic(m, &out));
  return out;
}

std::string ErrorOf(const v1::OperatorGraph& pb) {
  absl::StatusOr<Graph> g = GraphFromProto(pb);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(g.status().message());
}

TEST(ConvertTest, GraphRoundTripsThroughTheWire) {
  absl::StatusOr<Graph> g = GraphFromProto(Wire());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->tensors[0].external_id, 100);
  EXPECT_TRUE(g->index.is_saved[0]);
  EXPECT_EQ(g->ops[0].cost.kernels, 1);  // absent means one launch
  v1::OperatorGraph back = GraphToProto(*g);
  EXPECT_EQ(back.ops(0).input_ids(0), 200);
  EXPECT_EQ(back.tensors(1).kind(), v1::TENSOR_KIND_PARAMETER);
}

TEST(ConvertTest, GeneratedWorkloadsRoundTrip) {
  absl::StatusOr<TransformerConfig> c = FindWorkload("gpt2-xl");
  ASSERT_TRUE(c.ok());
  c->layers = 2;
  absl::StatusOr<Graph> g = BuildTransformer(*c);
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<Graph> back = GraphFromProto(GraphToProto(*g));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->index.saved_bytes, g->index.saved_bytes);
  EXPECT_EQ(GraphToProto(*back).SerializeAsString(),
            GraphToProto(*g).SerializeAsString());
}

// Wire() and a collective after the backward op.
v1::OperatorGraph WireWithCollective() {
  v1::OperatorGraph g = Wire();
  v1::Op* ar = g.add_ops();
  ar->set_id(14);
  ar->set_name("ar");
  ar->set_phase(v1::PHASE_BACKWARD);
  v1::Collective* c = ar->mutable_collective();
  c->set_kind(v1::COLLECTIVE_KIND_ALL_REDUCE);
  c->set_algorithm(v1::COLLECTIVE_ALGORITHM_TREE);
  c->set_bytes(4096);
  c->add_group(1);
  c->add_group(0);
  return g;
}

TEST(ConvertTest, CollectivesRoundTrip) {
  absl::StatusOr<Graph> g = GraphFromProto(WireWithCollective());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_FALSE(g->ops[1].collective.has_value());
  ASSERT_TRUE(g->ops[2].collective.has_value());
  const Collective& c = *g->ops[2].collective;
  EXPECT_EQ(c.kind, CollectiveKind::kAllReduce);
  EXPECT_EQ(c.algorithm, CollectiveAlgorithm::kTree);
  EXPECT_EQ(c.bytes, 4096);
  EXPECT_THAT(c.group, ::testing::ElementsAre(1, 0));
  const v1::OperatorGraph back = GraphToProto(*g);
  EXPECT_FALSE(back.ops(1).has_collective());
  EXPECT_EQ(Bytes(back.ops(2).collective()),
            Bytes(WireWithCollective().ops(2).collective()));
  // Every kind and algorithm, both ways.
  v1::OperatorGraph pb = WireWithCollective();
  for (v1::CollectiveKind kind :
       {v1::COLLECTIVE_KIND_ALL_GATHER, v1::COLLECTIVE_KIND_REDUCE_SCATTER,
        v1::COLLECTIVE_KIND_ALL_REDUCE, v1::COLLECTIVE_KIND_ALL_TO_ALL,
        v1::COLLECTIVE_KIND_SEND_RECV}) {
    for (v1::CollectiveAlgorithm algorithm :
         {v1::COLLECTIVE_ALGORITHM_RING, v1::COLLECTIVE_ALGORITHM_TREE}) {
      pb.mutable_ops(2)->mutable_collective()->set_kind(kind);
      pb.mutable_ops(2)->mutable_collective()->set_algorithm(algorithm);
      absl::StatusOr<Graph> each = GraphFromProto(pb);
      ASSERT_TRUE(each.ok()) << each.status();
      EXPECT_EQ(Bytes(GraphToProto(*each).ops(2).collective()),
                Bytes(pb.ops(2).collective()));
    }
  }
  // No algorithm: a ring, written back as one.
  pb.mutable_ops(2)->mutable_collective()->clear_algorithm();
  absl::StatusOr<Graph> ring = GraphFromProto(pb);
  ASSERT_TRUE(ring.ok()) << ring.status();
  EXPECT_EQ(ring->ops[2].collective->algorithm, CollectiveAlgorithm::kRing);
  EXPECT_EQ(GraphToProto(*ring).ops(2).collective().algorithm(),
            v1::COLLECTIVE_ALGORITHM_RING);
}

TEST(ConvertTest, CollectiveErrorsNameTheField) {
  v1::OperatorGraph pb = WireWithCollective();
  pb.mutable_ops(2)->mutable_collective()->set_kind(
      static_cast<v1::CollectiveKind>(99));
  EXPECT_EQ(ErrorOf(pb), "op 14 (ar): collective.kind has unknown value 99");
  pb.mutable_ops(2)->mutable_collective()->clear_kind();
  EXPECT_THAT(ErrorOf(pb), HasSubstr("op 14 (ar): collective.kind is unset"));
  pb = WireWithCollective();
  pb.mutable_ops(2)->mutable_collective()->set_algorithm(
      static_cast<v1::CollectiveAlgorithm>(7));
  EXPECT_EQ(ErrorOf(pb),
            "op 14 (ar): collective.algorithm has unknown value 7");
  // The bytes and group as IndexGraph checks them (model/graph.h).
  pb = WireWithCollective();
  pb.mutable_ops(2)->mutable_collective()->set_group(1, 70);
  EXPECT_EQ(ErrorOf(pb),
            "op 14 (ar): collective.group[1]: rank 70 is outside [0, 64)");
  pb = WireWithCollective();
  pb.mutable_ops(2)->mutable_collective()->set_bytes(-1);
  EXPECT_THAT(ErrorOf(pb), HasSubstr("op 14 (ar): collective.bytes must be"));
  pb = WireWithCollective();
  pb.mutable_ops(2)->mutable_collective()->clear_group();
  EXPECT_THAT(ErrorOf(pb), HasSubstr("op 14 (ar): collective.group must"));
  // An empty message is a collective still: one with no kind.
  pb = Wire();
  pb.mutable_ops(1)->mutable_collective();
  EXPECT_THAT(ErrorOf(pb), HasSubstr("op 13 (mlp_up.bwd): collective.kind"));
}

TEST(ConvertTest, DataParallelWorkloadsRoundTripAndOthersHaveNoCollective) {
  WorkloadOverrides o;
  o.layers = 2;
  absl::StatusOr<Graph> one = BuildWorkload("gpt2-xl", o);
  ASSERT_TRUE(one.ok()) << one.status();
  // No collective, no field: such a graph's bytes are what they were
  // before the field existed.
  const v1::OperatorGraph one_pb = GraphToProto(*one);
  for (const v1::Op& op : one_pb.ops()) {
    EXPECT_FALSE(op.has_collective()) << op.name();
  }
  o.data_parallel = 8;
  absl::StatusOr<Graph> g = BuildWorkload("gpt2-xl", o);
  ASSERT_TRUE(g.ok()) << g.status();
  const v1::OperatorGraph pb = GraphToProto(*g);
  int collectives = 0;
  for (const v1::Op& op : pb.ops()) {
    if (!op.has_collective()) continue;
    ++collectives;
    EXPECT_EQ(op.collective().kind(), v1::COLLECTIVE_KIND_ALL_REDUCE);
    EXPECT_EQ(op.collective().algorithm(), v1::COLLECTIVE_ALGORITHM_RING);
    EXPECT_EQ(op.collective().group_size(), 8);
  }
  EXPECT_GT(collectives, 1);
  absl::StatusOr<Graph> back = GraphFromProto(pb);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(Bytes(GraphToProto(*back)), Bytes(pb));
}

TEST(ConvertTest, NamesDanglingIds) {
  v1::OperatorGraph pb = Wire();
  pb.mutable_ops(0)->add_input_ids(987);
  EXPECT_EQ(ErrorOf(pb), "op 12 (mlp_up): input tensor 987 does not exist");
}

TEST(ConvertTest, NamesDuplicateIds) {
  v1::OperatorGraph pb = Wire();
  pb.mutable_tensors(1)->set_id(100);
  EXPECT_THAT(ErrorOf(pb), HasSubstr("tensors[1]: id 100 is already used"));
  pb = Wire();
  pb.mutable_ops(1)->set_id(12);
  EXPECT_THAT(ErrorOf(pb), HasSubstr("ops[1]: id 12 is already used"));
}

TEST(ConvertTest, RequiresAPhaseAndKnownEnums) {
  v1::OperatorGraph pb = Wire();
  pb.mutable_ops(1)->clear_phase();
  EXPECT_THAT(ErrorOf(pb), HasSubstr("op 13 (mlp_up.bwd): phase must be"));
  pb = Wire();
  pb.mutable_tensors(0)->set_kind(static_cast<v1::TensorKind>(99));
  EXPECT_THAT(ErrorOf(pb), HasSubstr("kind has unknown value 99"));
}

TEST(ConvertTest, NaNFlopsAreRejected) {
  v1::OperatorGraph pb = Wire();
  pb.mutable_ops(0)->mutable_cost()->set_flops(std::nan(""));
  EXPECT_THAT(ErrorOf(pb),
              HasSubstr("op 12 (mlp_up): cost.flops must be finite"));
}

TEST(ConvertTest, FlopsWithoutAKindAreRefusedNotIgnored) {
  v1::OperatorGraph pb = Wire();
  pb.mutable_ops(0)->mutable_cost()->set_kind(v1::OP_KIND_UNSPECIFIED);
  pb.mutable_ops(0)->mutable_cost()->set_flops(5e9);
  EXPECT_THAT(ErrorOf(pb), HasSubstr("op 12 (mlp_up): cost.flops is 5e+09 "
                                     "but cost.kind is unset"));
  // Memory bound on purpose: the FLOPs are informational.
  pb.mutable_ops(0)->mutable_cost()->set_kind(v1::OP_KIND_MEMORY_BOUND);
  EXPECT_TRUE(GraphFromProto(pb).ok());
}

TEST(ConvertTest, HardwareRoundTripsAndIsValidated) {
  absl::StatusOr<Hardware> hw = FindHardware("a100-80gb-pcie4");
  ASSERT_TRUE(hw.ok());
  v1::HardwareProfile pb = HardwareToProto(*hw);
  absl::StatusOr<Hardware> back = HardwareFromProto(pb);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->transfer_latency_ns, hw->transfer_latency_ns);
  EXPECT_EQ(back->h2d_gbps, hw->h2d_gbps);
  pb.set_h2d_gbps(-1);
  EXPECT_THAT(std::string(HardwareFromProto(pb).status().message()),
              HasSubstr("h2d_gbps"));
  pb = HardwareToProto(*hw);
  pb.set_transfer_latency_us(std::nan(""));
  EXPECT_THAT(std::string(HardwareFromProto(pb).status().message()),
              HasSubstr("transfer_latency_us"));
  // The framework reserve: absent is the default, present is checked.
  pb = HardwareToProto(*hw);
  EXPECT_EQ(pb.framework_reserve_bytes(), kDefaultFrameworkReserveBytes);
  pb.clear_framework_reserve_bytes();
  EXPECT_EQ(HardwareFromProto(pb)->framework_reserve_bytes,
            kDefaultFrameworkReserveBytes);
  pb.set_framework_reserve_bytes(2'500'000'000);
  EXPECT_EQ(HardwareFromProto(pb)->framework_reserve_bytes, 2'500'000'000);
  pb.set_framework_reserve_bytes(-1);
  EXPECT_THAT(std::string(HardwareFromProto(pb).status().message()),
              HasSubstr("framework_reserve_bytes"));
}

TEST(ConvertTest, KernelShapesRoundTripAndAreChecked) {
  v1::OperatorGraph pb = Wire();
  v1::OpCost* cost = pb.mutable_ops(0)->mutable_cost();
  cost->set_kind(v1::OP_KIND_MATMUL);
  cost->set_flops(2.0 * 64 * 32 * 16);
  cost->mutable_shape()->set_m(64);
  cost->mutable_shape()->set_n(32);
  cost->mutable_shape()->set_k(16);
  absl::StatusOr<Graph> g = GraphFromProto(pb);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->ops[0].cost.shape.m, 64);
  EXPECT_EQ(g->ops[0].cost.shape.n, 32);
  EXPECT_EQ(g->ops[0].cost.shape.k, 16);
  const v1::OperatorGraph out = GraphToProto(*g);
  EXPECT_EQ(Bytes(out.ops(0).cost().shape()), Bytes(cost->shape()));
  EXPECT_FALSE(out.ops(1).cost().has_shape());
  // A GEMM names all three dimensions.
  cost->mutable_shape()->set_k(0);
  EXPECT_THAT(ErrorOf(pb), HasSubstr("op 12 (mlp_up): cost.shape of a GEMM "
                                     "needs m, n and k all > 0"));
  cost->mutable_shape()->set_k(int64_t{1} << 40);
  EXPECT_THAT(ErrorOf(pb),
              HasSubstr("op 12 (mlp_up): cost.shape.k must be in [0, "));
  cost->mutable_shape()->set_k(-1);
  EXPECT_THAT(ErrorOf(pb), HasSubstr("cost.shape.k must be in [0, "));
  cost->mutable_shape()->Clear();
  EXPECT_THAT(ErrorOf(pb), HasSubstr("cost.shape is present but all its "
                                     "dimensions are 0"));
  // Attention needs keys and a head dimension; a memory-bound op no shape.
  cost->set_kind(v1::OP_KIND_FLASH_ATTENTION);
  cost->mutable_shape()->set_n(1024);
  EXPECT_THAT(ErrorOf(pb), HasSubstr("cost.shape of attention needs n (keys "
                                     "per sequence) and k (head dimension)"));
  cost->mutable_shape()->set_k(64);
  cost->mutable_shape()->set_causal(true);
  EXPECT_TRUE(GraphFromProto(pb).ok());
  cost->set_kind(v1::OP_KIND_MEMORY_BOUND);
  EXPECT_THAT(ErrorOf(pb), HasSubstr("cost.shape is only for GEMMs and fused "
                                     "attention"));
}

TEST(ConvertTest, EfficiencyTablesRoundTripAndBadOnesNameTheField) {
  const Hardware hw = *FindHardware("h100-pcie5");
  v1::HardwareProfile pb = HardwareToProto(hw);
  ASSERT_EQ(pb.attention_efficiency_size(), 4);
  absl::StatusOr<Hardware> back = HardwareFromProto(pb);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->gemm_efficiency.size, hw.gemm_efficiency.size);
  EXPECT_EQ(back->gemm_efficiency.efficiency, hw.gemm_efficiency.efficiency);
  ASSERT_EQ(back->attention_efficiency.size(), 4u);
  EXPECT_EQ(back->attention_efficiency[3].bwd, hw.attention_efficiency[3].bwd);
  // A profile without tables keeps working: its constants cost every op.
  pb.clear_attention_efficiency();
  pb.clear_gemm_efficiency();
  back = HardwareFromProto(pb);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->attention_efficiency.empty());
  EXPECT_TRUE(back->gemm_efficiency.empty());

  auto error = [](const v1::HardwareProfile& p) {
    absl::StatusOr<Hardware> h = HardwareFromProto(p);
    EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(h.status().message());
  };
  pb = HardwareToProto(hw);
  pb.mutable_gemm_efficiency()->Clear();
  EXPECT_THAT(error(pb), HasSubstr("gemm_efficiency is present but empty"));
  pb = HardwareToProto(hw);
  pb.mutable_gemm_efficiency()->set_size(0, 9000);  // 9000 > 8192
  EXPECT_THAT(error(pb),
              HasSubstr("gemm_efficiency.size must be strictly increasing"));
  pb = HardwareToProto(hw);
  pb.mutable_attention_efficiency(2)->set_fwd(1, 1.2);
  EXPECT_THAT(error(pb), HasSubstr("hardware \"h100-pcie5\": "
                                   "attention_efficiency[2].fwd[1] must be in "
                                   "(0, 1], got 1.2"));
  pb = HardwareToProto(hw);
  pb.mutable_attention_efficiency(0)->clear_seq_len();
  EXPECT_THAT(error(pb), HasSubstr("attention_efficiency[0].seq_len is empty"));
  pb = HardwareToProto(hw);
  for (int i = 0; i < kMaxEfficiencyCurves; ++i) {
    *pb.add_attention_efficiency() = pb.attention_efficiency(0);
  }
  EXPECT_THAT(error(pb), HasSubstr("attention_efficiency has 68 curves; at "
                                   "most 64"));
  pb = HardwareToProto(hw);
  for (int i = 0; i < 100; ++i) pb.mutable_gemm_efficiency()->add_size(i);
  EXPECT_THAT(error(pb), HasSubstr("gemm_efficiency has more than 64 points"));
}

TEST(ConvertTest, EveryCatalogNodeRoundTrips) {
  for (const Node& node : NodeCatalog()) {
    SCOPED_TRACE(node.name);
    const v1::NodeProfile pb = NodeToProto(node);
    ASSERT_TRUE(pb.has_gpu_inline());
    absl::StatusOr<Node> back = NodeFromProto(pb);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->name, node.name);
    EXPECT_EQ(back->description, node.description);
    EXPECT_EQ(back->gpu.name, node.gpu.name);
    EXPECT_EQ(back->gpu.transfer_latency_ns, node.gpu.transfer_latency_ns);
    EXPECT_EQ(back->num_gpus, node.num_gpus);
    ASSERT_EQ(back->switches.size(), node.switches.size());
    for (size_t i = 0; i < node.switches.size(); ++i) {
      EXPECT_EQ(back->switches[i].name, node.switches[i].name);
      EXPECT_EQ(back->switches[i].gpus, node.switches[i].gpus);
      EXPECT_EQ(back->switches[i].socket, node.switches[i].socket);
      EXPECT_EQ(back->switches[i].uplink.bidir_h2d_gbps,
                node.switches[i].uplink.bidir_h2d_gbps);
    }
    ASSERT_EQ(back->sockets.size(), node.sockets.size());
    for (size_t i = 0; i < node.sockets.size(); ++i) {
      EXPECT_EQ(back->sockets[i].name, node.sockets[i].name);
      EXPECT_EQ(back->sockets[i].memory.d2h_gbps,
                node.sockets[i].memory.d2h_gbps);
      EXPECT_EQ(back->sockets[i].pinned_host_memory_bytes,
                node.sockets[i].pinned_host_memory_bytes);
    }
    EXPECT_EQ(back->nvlink_gbps, node.nvlink_gbps);
    EXPECT_EQ(back->inter_socket_gbps, node.inter_socket_gbps);
    ASSERT_EQ(back->nics.size(), node.nics.size());
    for (size_t i = 0; i < node.nics.size(); ++i) {
      EXPECT_EQ(back->nics[i].name, node.nics[i].name);
      EXPECT_EQ(back->nics[i].pcie_switch, node.nics[i].pcie_switch);
      EXPECT_EQ(back->nics[i].gbps, node.nics[i].gbps);
    }
    EXPECT_EQ(back->sources, node.sources);
    // And the message of the converted node is the same message.
    EXPECT_EQ(Bytes(NodeToProto(*back)), Bytes(pb));
  }
}

TEST(ConvertTest, NodeGpuByNameIsTheCatalogProfile) {
  v1::NodeProfile pb = NodeToProto(*FindNode("gh200-4x"));
  pb.set_gpu_name("gh200-c2c");
  absl::StatusOr<Node> node = NodeFromProto(pb);
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(Bytes(HardwareToProto(node->gpu)),
            Bytes(HardwareToProto(*FindHardware("gh200-c2c"))));
}

TEST(ConvertTest, NodeErrorsNameTheField) {
  const v1::NodeProfile good = NodeToProto(*FindNode("dgx-a100-80gb"));
  const auto error_of = [](const v1::NodeProfile& pb) {
    absl::StatusOr<Node> node = NodeFromProto(pb);
    EXPECT_EQ(node.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(node.status().message());
  };
  v1::NodeProfile pb = good;
  pb.clear_gpu();
  EXPECT_EQ(error_of(pb),
            "node \"dgx-a100-80gb\": gpu: set gpu_inline or gpu_name");
  pb.set_gpu_name("tpu-v9");
  EXPECT_THAT(error_of(pb),
              HasSubstr("node \"dgx-a100-80gb\": gpu_name: unknown hardware "
                        "profile \"tpu-v9\""));
  pb = good;
  pb.mutable_gpu_inline()->set_d2h_gbps(-2);
  EXPECT_THAT(error_of(pb), HasSubstr("gpu_inline: hardware "
                                      "\"a100-80gb-pcie4\": d2h_gbps must be"));
  pb = good;
  pb.mutable_switches(2)->set_gpus(1, 9);
  EXPECT_THAT(error_of(pb),
              HasSubstr("switches[2].gpus[1]: GPU 9 does not exist (num_gpus "
                        "8)"));
  pb = good;
  pb.mutable_sockets(1)->mutable_memory()->set_h2d_gbps(std::nan(""));
  EXPECT_THAT(error_of(pb), HasSubstr("sockets[1].memory.h2d_gbps must be"));
  pb = good;
  pb.mutable_nics(0)->set_pcie_switch(4);
  EXPECT_THAT(error_of(pb), HasSubstr("nics[0].pcie_switch: switch 4 does "
                                      "not exist (4 switches)"));
  pb = good;
  pb.set_num_gpus(0);
  EXPECT_THAT(error_of(pb), HasSubstr("num_gpus: must be in [1, 64], got 0"));
  // An empty message is refused, not crashed on.
  EXPECT_THAT(error_of(v1::NodeProfile()), HasSubstr("gpu: set gpu_inline"));
}

TEST(ConvertTest, TheDeviceAndTheAllocatorTimelineReachTheProto) {
  SimResult r;
  r.peak_transient_ns = 7;
  r.timeline.push_back({10, 1, 2, 3, 4});
  DeviceReport d;
  d.capacity_bytes = 100;
  d.reserve_bytes = 10;
  d.headroom_bytes = 5;
  d.peak_reserved_bytes = 60;
  d.peak_reserved_step = 2;
  d.required_bytes = 75;
  d.fits = true;
  r.device = d;
  Graph g;
  const v1::SimulationResult pb = ResultToProto(r, g);
  EXPECT_EQ(pb.peak_transient_ns(), 7);
  EXPECT_EQ(pb.memory_timeline(0).allocated_bytes(), 3);
  EXPECT_EQ(pb.memory_timeline(0).reserved_bytes(), 4);
  ASSERT_TRUE(pb.has_device());
  EXPECT_EQ(pb.device().capacity_bytes(), 100);
  EXPECT_EQ(pb.device().framework_reserve_bytes(), 10);
  EXPECT_EQ(pb.device().headroom_bytes(), 5);
  EXPECT_EQ(pb.device().peak_reserved_step(), 2);
  EXPECT_EQ(pb.device().required_bytes(), 75);
  EXPECT_TRUE(pb.device().fits_device());
  r.device.reset();
  EXPECT_FALSE(ResultToProto(r, g).has_device());
}

TEST(ConvertTest, PlansRoundTripByWireIds) {
  absl::StatusOr<Graph> g = GraphFromProto(Wire());
  ASSERT_TRUE(g.ok());
  // Three ops so a prefetch point exists between production and use.
  v1::Plan pb;
  v1::Decision* d = pb.add_decisions();
  d->set_tensor_id(100);
  d->set_action(v1::ACTION_RECOMPUTE);
  absl::StatusOr<Plan> plan = PlanFromProto(pb, *g);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->decisions[0].action, Action::kRecompute);
  v1::Plan back = PlanToProto(*plan, *g, "hw");
  EXPECT_EQ(back.decisions(0).tensor_id(), 100);
  EXPECT_EQ(back.decisions(0).action(), v1::ACTION_RECOMPUTE);

  d->set_tensor_id(5);
  EXPECT_THAT(std::string(PlanFromProto(pb, *g).status().message()),
              HasSubstr("tensor 5 does not exist"));
  d->set_tensor_id(100);
  d->set_action(v1::ACTION_SWAP);
  EXPECT_THAT(std::string(PlanFromProto(pb, *g).status().message()),
              HasSubstr("swap needs prefetch_after_op_id"));
  d->set_prefetch_after_op_id(77);
  EXPECT_THAT(std::string(PlanFromProto(pb, *g).status().message()),
              HasSubstr("prefetch_after_op_id 77 does not exist"));
}

}  // namespace
}  // namespace slackswap
