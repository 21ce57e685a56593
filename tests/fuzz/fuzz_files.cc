// libFuzzer target: message files in every format, through conversion and
// validation to the simulator.
//
// The first input byte picks the message (graph, hardware, plan) and the
// format (binary, text, JSON); the rest is the file. A graph that validates
// is simulated; a plan is checked against a small fixed graph and simulated.
// Whatever the bytes, the code must return an error or a result: never
// crash, hang or allocate without bound.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "io/convert.h"
#include "io/proto_file.h"
#include "model/hardware.h"
#include "model/transformer.h"
#include "model/workloads.h"
#include "sim/simulator.h"

namespace {

using namespace slackswap;  // NOLINT: a fuzz target, not a library

constexpr int64_t kMaxOps = 5000;

const Graph& SmallGraph() {
  static const Graph* g = [] {
    TransformerConfig c = *FindWorkload("gpt2-xl");
    c.layers = 1;
    return new Graph(*BuildTransformer(c));
  }();
  return *g;
}

void Simulate(const Graph& g, const Plan& plan, int64_t budget) {
  const Hardware hw = *FindHardware("a100-80gb-pcie4");
  SimOptions opts;
  opts.budget_bytes = budget;
  opts.timeline_points = 16;
  (void)slackswap::Simulate(g, hw, plan, opts);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t selector = data[0];
  const absl::string_view bytes(reinterpret_cast<const char*>(data + 1),
                                size - 1);
  const FileFormat format = static_cast<FileFormat>((selector >> 2) % 3);
  switch (selector % 3) {
    case 0: {
      v1::OperatorGraph pb;
      if (!ParseProto(bytes, format, "fuzz", &pb).ok()) return 0;
      if (pb.ops_size() > kMaxOps || pb.tensors_size() > 2 * kMaxOps) return 0;
      absl::StatusOr<Graph> g = GraphFromProto(pb);
      if (!g.ok()) return 0;
      (void)GraphToProto(*g);
      Simulate(*g, Plan::KeepAll(*g), g->index.saved_bytes / 2 + 1);
      return 0;
    }
    case 1: {
      v1::HardwareProfile pb;
      if (!ParseProto(bytes, format, "fuzz", &pb).ok()) return 0;
      absl::StatusOr<Hardware> hw = HardwareFromProto(pb);
      if (!hw.ok()) return 0;
      (void)hw->TransferNs(1 << 20, Direction::kH2D, true);
      return 0;
    }
    default: {
      v1::Plan pb;
      if (!ParseProto(bytes, format, "fuzz", &pb).ok()) return 0;
      absl::StatusOr<Plan> plan = PlanFromProto(pb, SmallGraph());
      if (!plan.ok()) return 0;
      Simulate(SmallGraph(), *plan, plan->budget_bytes);
      return 0;
    }
  }
}
