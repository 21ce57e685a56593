#include "testing/node_plan_cases.h"

#include "model/node.h"

namespace slackswap::testutil {

v1::StepSpec NodePlanCase::Step(bool on_node) const {
  v1::StepSpec step;
  v1::WorkloadRef& w = *step.mutable_workload();
  w.set_name(workload);
  if (layout == "DDP") {
    w.set_data_parallel(kRanks);
  } else {
    w.set_fully_sharded(kRanks);
  }
  if (on_node) {
    step.set_node_name(node);
  } else {
    step.set_hardware_name(FindNode(node)->gpu.name);
  }
  return step;
}

std::vector<NodePlanCase> NodePlanCases() {
  std::vector<NodePlanCase> cases;
  for (const char* node : {"dgx-a100-80gb", "hgx-h100-sxm"}) {
    for (const char* layout : {"DDP", "FSDP"}) {
      for (const char* workload : {"bert-large", "gpt2-xl", "llama-7b"}) {
        if (std::string(layout) == "FSDP" &&
            std::string(workload) == "bert-large") {
          continue;
        }
        for (double budget : {0.3, 0.5}) {
          cases.push_back({node, layout, workload, budget});
        }
      }
    }
  }
  return cases;
}

}  // namespace slackswap::testutil
