#include "model/node.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/hardware.h"

namespace slackswap {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(NodeCatalogTest, HasTheFourNodes) {
  EXPECT_THAT(NodeNames(), ElementsAre("dgx-a100-80gb", "hgx-h100-sxm",
                                       "a100-pcie-8x", "gh200-4x"));
}

TEST(NodeCatalogTest, EveryNodeIsValidAndSourced) {
  for (const Node& node : NodeCatalog()) {
    SCOPED_TRACE(node.name);
    EXPECT_TRUE(ValidateNode(node).ok()) << ValidateNode(node);
    EXPECT_FALSE(node.description.empty());
    EXPECT_FALSE(node.sources.empty());
    // The GPU is the hardware catalog's profile, unchanged.
    absl::StatusOr<Hardware> gpu = FindHardware(node.gpu.name);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    EXPECT_EQ(node.gpu.h2d_gbps, gpu->h2d_gbps);
    EXPECT_EQ(node.gpu.memory_gb, gpu->memory_gb);
    for (int32_t g = 0; g < node.num_gpus; ++g) {
      const int32_t sw = node.SwitchOf(g);
      ASSERT_GE(sw, 0);
      EXPECT_EQ(node.SocketOf(g), node.switches[sw].socket);
    }
  }
}

TEST(NodeCatalogTest, DgxA100MatchesItsTopology) {
  absl::StatusOr<Node> node = FindNode("dgx-a100-80gb");
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->gpu.name, "a100-80gb-pcie4");
  EXPECT_EQ(node->num_gpus, 8);
  ASSERT_EQ(node->switches.size(), 4u);
  ASSERT_EQ(node->sockets.size(), 2u);
  for (const PcieSwitch& sw : node->switches) {
    EXPECT_EQ(sw.gpus.size(), 2u);
    // One PCIe 4.0 x16 uplink: the GPU's own measured rates.
    EXPECT_EQ(sw.uplink.h2d_gbps, 25.0);
    EXPECT_EQ(sw.uplink.bidir_h2d_gbps, 13.0);
  }
  EXPECT_EQ(node->SwitchOf(3), 1);
  EXPECT_EQ(node->SocketOf(3), 0);
  EXPECT_EQ(node->SocketOf(4), 1);
  // 600 GB/s NVLink per GPU counts both directions.
  EXPECT_EQ(node->nvlink_gbps, 300.0);
  ASSERT_EQ(node->nics.size(), 8u);
  for (const Nic& nic : node->nics) EXPECT_EQ(nic.gbps, 25.0);  // 200 Gb/s
  // 2 TB of host memory, half of each socket's terabyte pinned.
  for (const Socket& s : node->sockets) {
    EXPECT_EQ(s.pinned_host_memory_bytes, 500'000'000'000);
    EXPECT_DOUBLE_EQ(s.memory.h2d_gbps, 204.8);
  }
}

// DGX A100: two GPUs behind each 25 GB/s (13 both ways) uplink, four on
// each socket (204.8 GB/s, never the limit), 500 GB pinned per socket.
TEST(FairShareGpuTest, SplitsEachSharedLinkAmongTheRanksBehindIt) {
  const Node node = *FindNode("dgx-a100-80gb");
  const Hardware alone = FairShareGpu(node, 1);
  EXPECT_EQ(alone.h2d_gbps, node.gpu.h2d_gbps);
  EXPECT_EQ(alone.bidir_d2h_gbps, node.gpu.bidir_d2h_gbps);
  EXPECT_EQ(alone.pinned_host_memory_bytes, 500'000'000'000);
  // Ranks 0 and 1 share switch 0: each gets half of its uplink.
  const Hardware two = FairShareGpu(node, 2);
  EXPECT_DOUBLE_EQ(two.h2d_gbps, std::min(node.gpu.h2d_gbps, 25.0 / 2));
  EXPECT_DOUBLE_EQ(two.bidir_h2d_gbps,
                   std::min(node.gpu.bidir_h2d_gbps, 13.0 / 2));
  EXPECT_EQ(two.pinned_host_memory_bytes, 250'000'000'000);
  // Rank 2 alone behind switch 1 changes nothing for the pair, which is the
  // worst rank's share.
  EXPECT_DOUBLE_EQ(FairShareGpu(node, 3).h2d_gbps, two.h2d_gbps);
  const Hardware all = FairShareGpu(node, 8);
  EXPECT_DOUBLE_EQ(all.h2d_gbps, two.h2d_gbps);
  EXPECT_EQ(all.pinned_host_memory_bytes, 125'000'000'000);
  // Everything else is the GPU's.
  EXPECT_EQ(all.name, node.gpu.name);
  EXPECT_EQ(all.hbm_gbps, node.gpu.hbm_gbps);
  // GH200: each GPU has its own C2C link; nothing is shared but the pinned
  // memory.
  const Node gh = *FindNode("gh200-4x");
  EXPECT_EQ(FairShareGpu(gh, gh.num_gpus).h2d_gbps, gh.gpu.h2d_gbps);
}

TEST(NodeCatalogTest, OtherNodesMatchTheirTopology) {
  absl::StatusOr<Node> h100 = FindNode("hgx-h100-sxm");
  ASSERT_TRUE(h100.ok());
  EXPECT_EQ(h100->gpu.name, "h100-pcie5");
  EXPECT_EQ(h100->nvlink_gbps, 450.0);
  EXPECT_EQ(h100->switches[0].uplink.h2d_gbps, 56.2);
  EXPECT_EQ(h100->nics[0].gbps, 50.0);  // 400 Gb/s
  EXPECT_EQ(h100->sockets[1].pinned_host_memory_bytes, 500'000'000'000);

  absl::StatusOr<Node> pcie = FindNode("a100-pcie-8x");
  ASSERT_TRUE(pcie.ok());
  EXPECT_EQ(pcie->nvlink_gbps, 0);
  EXPECT_DOUBLE_EQ(pcie->inter_socket_gbps, 67.2);
  EXPECT_EQ(pcie->sockets[0].pinned_host_memory_bytes, 250'000'000'000);
  EXPECT_TRUE(pcie->nics.empty());

  absl::StatusOr<Node> gh = FindNode("gh200-4x");
  ASSERT_TRUE(gh.ok());
  EXPECT_EQ(gh->num_gpus, 4);
  ASSERT_EQ(gh->switches.size(), 4u);
  ASSERT_EQ(gh->sockets.size(), 4u);
  for (int32_t g = 0; g < 4; ++g) {
    EXPECT_EQ(gh->SwitchOf(g), g);
    EXPECT_EQ(gh->SocketOf(g), g);
    // The "switch" is the GPU's own C2C link: it never binds beyond it.
    EXPECT_EQ(gh->switches[g].uplink.h2d_gbps, gh->gpu.h2d_gbps);
    EXPECT_EQ(gh->switches[g].uplink.bidir_d2h_gbps, gh->gpu.bidir_d2h_gbps);
  }
  EXPECT_EQ(gh->sockets[0].pinned_host_memory_bytes, 240'000'000'000);
}

TEST(NodeCatalogTest, FindNodeNamesTheKnownOnes) {
  absl::StatusOr<Node> node = FindNode("dgx-z");
  EXPECT_EQ(node.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(node.status().message(), HasSubstr("dgx-a100-80gb"));
}

// A small valid node: 4 GPUs, two per switch, one switch per socket.
Node SmallNode() {
  Node node;
  node.name = "small";
  node.gpu = *FindHardware("a100-80gb-pcie4");
  node.num_gpus = 4;
  const LinkRates link{25, 25, 13, 24};
  node.sockets = {{"s0", {200, 200, 100, 100}, 1'000'000'000},
                  {"s1", {200, 200, 100, 100}, 1'000'000'000}};
  node.switches = {{"sw0", {0, 1}, 0, link}, {"sw1", {2, 3}, 1, link}};
  node.inter_socket_gbps = 50;
  node.nics = {{"nic0", 0, 25}};
  return node;
}

struct BadCase {
  std::string what;
  std::function<void(Node&)> breaks;
  std::string message;
};

TEST(ValidateNodeTest, SmallNodeIsValid) {
  EXPECT_TRUE(ValidateNode(SmallNode()).ok()) << ValidateNode(SmallNode());
}

TEST(ValidateNodeTest, RejectsNamingTheField) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  const std::vector<BadCase> cases = {
      {"no name", [](Node& n) { n.name.clear(); },
       "node <unnamed>: name: must not be empty"},
      {"no GPUs", [](Node& n) { n.num_gpus = 0; },
       "node \"small\": num_gpus: must be in [1, 64], got 0"},
      {"65 GPUs", [](Node& n) { n.num_gpus = 65; },
       "num_gpus: must be in [1, 64], got 65"},
      {"bad GPU profile", [](Node& n) { n.gpu.h2d_gbps = 0; },
       "node \"small\": gpu.h2d_gbps must be in [0.001, 100000] GB/s, got 0"},
      {"no sockets", [](Node& n) { n.sockets.clear(); },
       "sockets: a node needs at least one socket"},
      {"unnamed socket", [](Node& n) { n.sockets[1].name.clear(); },
       "sockets[1].name: must not be empty"},
      {"socket name twice", [](Node& n) { n.sockets[1].name = "s0"; },
       "sockets[1].name: \"s0\" is also sockets[0]'s name"},
      {"memory rate 0", [](Node& n) { n.sockets[1].memory.h2d_gbps = 0; },
       "sockets[1].memory.h2d_gbps must be in [0.001, 100000] GB/s, got 0"},
      {"memory rate NaN",
       [kNaN](Node& n) { n.sockets[0].memory.bidir_d2h_gbps = kNaN; },
       "sockets[0].memory.bidir_d2h_gbps must be in [0.001, 100000] GB/s, "
       "got nan"},
      {"memory rate absurd",
       [](Node& n) { n.sockets[0].memory.d2h_gbps = 1e9; },
       "sockets[0].memory.d2h_gbps must be in [0.001, 100000] GB/s, got "
       "1e+09"},
      {"pinned < 0",
       [](Node& n) { n.sockets[0].pinned_host_memory_bytes = -1; },
       "sockets[0].pinned_host_memory_bytes: must be in [0, 1e+15] bytes, "
       "got -1"},
      {"pinned huge",
       [](Node& n) { n.sockets[0].pinned_host_memory_bytes = INT64_MAX; },
       "sockets[0].pinned_host_memory_bytes: must be in [0, 1e+15] bytes"},
      {"no switches", [](Node& n) { n.switches.clear(); },
       "switches: a node needs at least one PCIe switch"},
      {"switch name twice", [](Node& n) { n.switches[1].name = "sw0"; },
       "switches[1].name: \"sw0\" is also switches[0]'s name"},
      {"switch on no socket", [](Node& n) { n.switches[1].socket = 2; },
       "switches[1].socket: socket 2 does not exist (2 sockets)"},
      {"negative socket", [](Node& n) { n.switches[0].socket = -1; },
       "switches[0].socket: socket -1 does not exist (2 sockets)"},
      {"GPU out of range", [](Node& n) { n.switches[1].gpus[1] = 9; },
       "switches[1].gpus[1]: GPU 9 does not exist (num_gpus 4)"},
      {"negative GPU", [](Node& n) { n.switches[0].gpus[0] = -3; },
       "switches[0].gpus[0]: GPU -3 does not exist (num_gpus 4)"},
      {"GPU behind two switches", [](Node& n) { n.switches[1].gpus[0] = 1; },
       "switches[1].gpus[0]: GPU 1 sits behind two switches (switches[0] "
       "and switches[1])"},
      {"GPU listed twice", [](Node& n) { n.switches[0].gpus[1] = 0; },
       "switches[0].gpus[1]: GPU 0 listed twice"},
      {"GPU behind no switch", [](Node& n) { n.switches[1].gpus.pop_back(); },
       "node \"small\": switches: GPU 3 sits behind no switch"},
      {"uplink negative", [](Node& n) { n.switches[0].uplink.d2h_gbps = -1; },
       "switches[0].uplink.d2h_gbps must be in [0.001, 100000] GB/s, got -1"},
      {"NVLink negative", [](Node& n) { n.nvlink_gbps = -5; },
       "nvlink_gbps must be 0 or in [0.001, 100000] GB/s, got -5"},
      {"NVLink NaN", [kNaN](Node& n) { n.nvlink_gbps = kNaN; },
       "nvlink_gbps must be 0 or in [0.001, 100000] GB/s, got nan"},
      {"no path between sockets", [](Node& n) { n.inter_socket_gbps = 0; },
       "inter_socket_gbps: must be > 0 with 2 sockets and no NVLink "
       "(nvlink_gbps 0)"},
      {"socket link with one socket",
       [](Node& n) {
         n.sockets.pop_back();
         n.switches[1].socket = 0;
       },
       "inter_socket_gbps: must be 0 with one socket, got 50"},
      {"NIC on no switch", [](Node& n) { n.nics[0].pcie_switch = 2; },
       "nics[0].pcie_switch: switch 2 does not exist (2 switches)"},
      {"NIC rate 0", [](Node& n) { n.nics[0].gbps = 0; },
       "nics[0].gbps must be in [0.001, 100000] GB/s, got 0"},
      {"unnamed NIC", [](Node& n) { n.nics[0].name.clear(); },
       "nics[0].name: must not be empty"},
      {"too many NICs", [](Node& n) { n.nics.resize(257, n.nics[0]); },
       "nics: at most 256 entries, got 257"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.what);
    Node node = SmallNode();
    c.breaks(node);
    const absl::Status s = ValidateNode(node);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr(c.message));
  }
}

TEST(ValidateNodeTest, NVLinkNodeNeedsNoSocketLink) {
  Node node = SmallNode();
  node.inter_socket_gbps = 0;
  node.nvlink_gbps = 300;
  EXPECT_TRUE(ValidateNode(node).ok()) << ValidateNode(node);
}

TEST(ValidateNodeTest, SwitchOfAnUnlistedGpuIsNone) {
  const Node node = SmallNode();
  EXPECT_EQ(node.SwitchOf(2), 1);
  EXPECT_EQ(node.SocketOf(2), 1);
  // Outside the REQUIRES: no crash, no switch.
  EXPECT_EQ(node.SwitchOf(7), -1);
  EXPECT_EQ(node.SocketOf(-1), -1);
}

TEST(ValidateNodeTest, NeverCrashesOnHostileValues) {
  const std::vector<std::function<void(Node&)>> mutations = {
      [](Node& n) { n.num_gpus = INT32_MIN; },
      [](Node& n) { n.num_gpus = INT32_MAX; },
      [](Node& n) { n.switches[0].gpus.assign(1000, INT32_MAX); },
      [](Node& n) { n.switches[0].socket = INT32_MIN; },
      [](Node& n) { n.nics[0].pcie_switch = INT32_MAX; },
      [](Node& n) {
        n.inter_socket_gbps = std::numeric_limits<double>::infinity();
      },
      [](Node& n) { n.switches.resize(10000); },
  };
  for (const auto& mutate : mutations) {
    Node node = SmallNode();
    mutate(node);
    EXPECT_EQ(ValidateNode(node).code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(ValidateHardwareFieldsTest, PrefixesTheFieldAndDropsTheLabel) {
  Hardware hw = *FindHardware("h100-pcie5");
  hw.matmul_efficiency = 2;
  EXPECT_EQ(ValidateHardwareFields(hw, "gpu.").message(),
            "gpu.matmul_efficiency must be in (0, 1], got 2");
  EXPECT_THAT(ValidateHardware(hw).message(),
              HasSubstr("hardware \"h100-pcie5\": matmul_efficiency must be"));
}

}  // namespace
}  // namespace slackswap
