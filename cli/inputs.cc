#include "cli/inputs.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/backend.h"
#include "cli/defaults.h"
#include "common/format.h"
#include "common/status_macros.h"
#include "core/planning_core.h"
#include "io/convert.h"
#include "io/graph_file.h"
#include "io/proto_file.h"
#include "model/budget.h"
#include "model/hardware.h"
#include "model/node.h"
#include "model/transformer.h"
#include "model/workloads.h"
#include "planner/policy.h"

namespace slackswap {

const FlagSpecs& StepFlags() {
  static const FlagSpecs* const flags = new FlagSpecs{
      {"workload", "NAME",
       absl::StrCat("a built-in workload (",
                    absl::StrJoin(WorkloadNames(), ", "), "); or --graph")},
      {"graph", "FILE", "an OperatorGraph file (.pb, .txtpb or .json)"},
      {"batch", "N", "workload override: batch size"},
      {"seq", "N", "workload override: sequence length"},
      {"layers", "N", "workload override: number of layers"},
      {"attention", "flash|unfused", "workload override: attention kernels"},
      {"dp", "N",
       "workload override: data parallel over N ranks as PyTorch DDP does "
       "it (bucketed gradient all-reduces in backward; default 1)"},
      {"fsdp", "N",
       "workload override: parameters sharded over N ranks as PyTorch FSDP "
       "does it (per-layer all-gathers, gradient reduce-scatters; default 1; "
       "not with --dp)"},
      {"tp", "N",
       "workload override: each layer's matrices split over N ranks as "
       "Megatron-LM's tensor parallelism does (all-reduces after attention "
       "and MLP; default 1); with --dp or --fsdp, N times that many ranks"},
      {"hardware", "NAME|FILE",
       absl::StrCat("a catalog profile (", absl::StrJoin(HardwareNames(), ", "),
                    ") or a HardwareProfile file"),
       kDefaultHardware},
  };
  return *flags;
}

FlagSpec BudgetFlag(bool required, bool device) {
  return {"budget", "B",
          absl::StrCat(
              "activation budget: a fraction of the unconstrained peak (0.5, "
              "at most ",
              kMaxBudgetFraction, ") or bytes with a unit (20GB, 512MiB)",
              device ? "; or device[:HEADROOM] (device, device:2GB): the "
                       "GPU's memory, less its framework reserve and the "
                       "headroom, for everything (the caching allocator's "
                       "reserved peak)"
                     : ""),
          required ? "" : "none"};
}

FlagSpec ExpandableSegmentsFlag() {
  return {"expandable-segments", "",
          "model PyTorch's allocator with expandable_segments:True"};
}

FlagSpec BudgetAllMemoryFlag() {
  return {"budget-all-memory", "",
          "the budget limits activation plus transient memory"};
}

FlagSpec PolicyFlag() {
  return {"policy", "NAME[,NAME...]|all",
          absl::StrCat("policies: ", absl::StrJoin(PolicyNames(), ", "),
                       "; all is every one"),
          absl::StrJoin(DefaultPolicyNames(), ",")};
}

FlagSpecs BoundFlags() {
  return {{"include-bound", "",
           "also compute the bound no plan can beat (an LP), and each "
           "policy's gap to it"},
          {"optimal-time-limit", "SECONDS",
           "the optimal policy's solver time limit (at most 600)",
           absl::StrCat(PlanningContext::kDefaultOptimalTimeLimitS)}};
}

FlagSpec TimelinePointsFlag() {
  return {"timeline-points", "N",
          absl::StrCat("downsample the memory timeline to N points (at most ",
                       MaxTimelinePoints(), ")")};
}

FlagSpecs NodeFlags(absl::string_view what) {
  return {
      {"node", "NAME",
       absl::StrCat("run the step on a node's GPUs (",
                    absl::StrJoin(NodeNames(), ", "), "), ", what,
                    "; the GPU is the node's")},
      {"ranks", "N", "with --node: how many of its GPUs run the step", "all"}};
}

absl::Status SetNodeFromFlags(const Flags& flags, v1::StepSpec* step) {
  SLACKSWAP_ASSIGN_OR_RETURN(std::optional<int64_t> ranks,
                             flags.GetInt("ranks"));
  if (!flags.Has("node")) {
    if (ranks.has_value()) {
      return absl::InvalidArgumentError("--ranks is for --node");
    }
    return absl::OkStatus();
  }
  if (!flags.Has("hardware")) step->clear_hardware();
  step->set_node_name(*flags.Get("node"));
  if (ranks.has_value()) {
    if (*ranks < 1 || *ranks > kMaxCollectiveRanks) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--ranks must be in [1, ", kMaxCollectiveRanks, "], got ", *ranks));
    }
    step->set_ranks(static_cast<int32_t>(*ranks));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::WorkloadRef> WorkloadFromFlags(const Flags& flags) {
  v1::WorkloadRef ref;
  ref.set_name(flags.Get("workload").value_or(""));
  SLACKSWAP_ASSIGN_OR_RETURN(std::optional<int64_t> batch,
                             flags.GetInt("batch"));
  SLACKSWAP_ASSIGN_OR_RETURN(std::optional<int64_t> seq, flags.GetInt("seq"));
  SLACKSWAP_ASSIGN_OR_RETURN(std::optional<int64_t> layers,
                             flags.GetInt("layers"));
  if (batch.has_value()) ref.set_batch(*batch);
  if (seq.has_value()) ref.set_seq(*seq);
  if (layers.has_value()) ref.set_layers(*layers);
  SLACKSWAP_ASSIGN_OR_RETURN(std::optional<int64_t> dp, flags.GetInt("dp"));
  if (dp.has_value()) {
    // The message's field is an int32: refuse here what would not fit,
    // rather than send a wrapped value.
    if (*dp < 1 || *dp > kMaxDataParallel) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--dp must be in [1, ", kMaxDataParallel, "] ranks, got ", *dp));
    }
    ref.set_data_parallel(static_cast<int32_t>(*dp));
  }
  SLACKSWAP_ASSIGN_OR_RETURN(std::optional<int64_t> fsdp, flags.GetInt("fsdp"));
  if (fsdp.has_value()) {
    if (*fsdp < 1 || *fsdp > kMaxFullyShardedRanks) {
      return absl::InvalidArgumentError(absl::StrCat("--fsdp must be in [1, ",
                                                     kMaxFullyShardedRanks,
                                                     "] ranks, got ", *fsdp));
    }
    if (dp.value_or(1) > 1 && *fsdp > 1) {
      return absl::InvalidArgumentError(
          "--dp and --fsdp cannot both be > 1: hybrid sharding is not "
          "generated");
    }
    ref.set_fully_sharded(static_cast<int32_t>(*fsdp));
  }
  SLACKSWAP_ASSIGN_OR_RETURN(std::optional<int64_t> tp, flags.GetInt("tp"));
  if (tp.has_value()) {
    if (*tp < 1 || *tp > kMaxTensorParallel) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tp must be in [1, ", kMaxTensorParallel, "] ranks, got ", *tp));
    }
    ref.set_tensor_parallel(static_cast<int32_t>(*tp));
  }
  SLACKSWAP_ASSIGN_OR_RETURN(std::optional<int64_t> rank, flags.GetInt("rank"));
  if (rank.has_value()) {
    if (*rank < 0 || *rank >= kMaxCollectiveRanks) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--rank must be in [0, ", kMaxCollectiveRanks - 1, "], got ", *rank));
    }
    ref.set_rank(static_cast<int32_t>(*rank));
  }
  ref.set_attention(flags.Get("attention").value_or(""));
  return ref;
}

absl::StatusOr<GraphFrom> GraphFromFlags(const Flags& flags,
                                         v1::OperatorGraph* graph,
                                         v1::WorkloadRef* workload,
                                         std::string* held_key) {
  if (flags.Has("workload") == flags.Has("graph")) {
    return absl::InvalidArgumentError(
        "give exactly one of --workload NAME and --graph FILE");
  }
  if (!flags.Has("graph")) {
    SLACKSWAP_ASSIGN_OR_RETURN(*workload, WorkloadFromFlags(flags));
    return GraphFrom::kWorkload;
  }
  for (const char* name :
       {"batch", "seq", "layers", "attention", "dp", "fsdp", "tp"}) {
    if (flags.Has(name)) {
      return absl::InvalidArgumentError(std::string("--") + name +
                                        " applies to --workload, not --graph");
    }
  }
  const std::string path = *flags.Get("graph");
  if (IsLocal(flags)) {
    SLACKSWAP_ASSIGN_OR_RETURN(Graph g, ReadGraphFile(path));
    *held_key = HoldLocalGraph(std::move(g));
    return GraphFrom::kHeld;
  }
  SLACKSWAP_RETURN_IF_ERROR(ReadProtoFile(path, graph));
  // Check it here too, so errors name the file, as they do locally.
  absl::Status valid = GraphFromProto(*graph).status();
  if (!valid.ok()) {
    return absl::Status(valid.code(),
                        absl::StrCat(path, ": ", valid.message()));
  }
  return GraphFrom::kInline;
}

absl::Status HardwareFromFlag(const std::string& value,
                              v1::HardwareProfile* inline_hw, std::string* name,
                              bool* is_inline) {
  *is_inline = FormatForPath(value).ok();
  if (!*is_inline) {
    *name = value;
    return absl::OkStatus();
  }
  SLACKSWAP_RETURN_IF_ERROR(ReadProtoFile(value, inline_hw));
  absl::Status valid = HardwareFromProto(*inline_hw).status();
  if (!valid.ok()) {
    return absl::Status(valid.code(),
                        absl::StrCat(value, ": ", valid.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::StepSpec> StepFromFlags(const Flags& flags) {
  v1::StepSpec step;
  SLACKSWAP_RETURN_IF_ERROR(SetGraphFromFlags(flags, &step));
  v1::HardwareProfile hw;
  std::string name;
  bool is_inline = false;
  SLACKSWAP_RETURN_IF_ERROR(
      HardwareFromFlag(flags.Get("hardware").value_or(kDefaultHardware), &hw,
                       &name, &is_inline));
  if (is_inline) {
    *step.mutable_hardware_inline() = std::move(hw);
  } else {
    step.set_hardware_name(name);
  }
  return step;
}

absl::StatusOr<Budget> BudgetFromFlags(const Flags& flags) {
  return ParseBudget(flags.Get("budget").value_or(""));
}

absl::StatusOr<std::optional<int64_t>> DeviceBudgetFromFlags(
    const Flags& flags) {
  const std::string text = flags.Get("budget").value_or("");
  if (text == "device") return int64_t{0};
  constexpr absl::string_view kPrefix = "device:";
  if (!absl::StartsWith(text, kPrefix)) return std::nullopt;
  absl::StatusOr<Budget> headroom =
      ParseBudget(absl::string_view(text).substr(kPrefix.size()));
  if (!headroom.ok() || headroom->bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--budget device:HEADROOM takes bytes with a unit (device:2GB), got ",
        QuoteInput(text)));
  }
  return headroom->bytes;
}

void AddPolicies(const Flags& flags,
                 google::protobuf::RepeatedPtrField<std::string>* out) {
  if (!flags.Has("policy")) return;  // empty: the default set
  const std::string spec = *flags.Get("policy");
  if (spec == "all") {
    for (const std::string& name : PolicyNames()) out->Add(std::string(name));
    return;
  }
  for (absl::string_view name : absl::StrSplit(spec, ',')) {
    out->Add(std::string(name));
  }
}

int32_t MaxTimelinePoints() { return CoreLimits{}.max_timeline_points; }

absl::StatusOr<std::optional<int32_t>> TimelinePointsFromFlags(
    const Flags& flags) {
  SLACKSWAP_ASSIGN_OR_RETURN(std::optional<int64_t> points,
                             flags.GetInt("timeline-points"));
  if (!points.has_value()) return std::nullopt;
  if (*points < 1 || *points > MaxTimelinePoints()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--timeline-points must be in [1, ", MaxTimelinePoints(), "]"));
  }
  return static_cast<int32_t>(*points);
}

std::string StepGraphName(const v1::StepSpec& step) {
  if (step.has_workload()) return step.workload().name();
  if (step.has_graph_inline()) return step.graph_inline().name();
  std::shared_ptr<const Graph> held = LocalGraph(step.graph_sha256());
  return held == nullptr ? "" : held->name;
}

std::string StepHardwareName(const v1::StepSpec& step) {
  if (step.has_hardware_inline()) return step.hardware_inline().name();
  if (step.has_hardware_name()) return step.hardware_name();
  if (step.has_node_inline()) {
    return step.node_inline().has_gpu_inline()
               ? step.node_inline().gpu_inline().name()
               : step.node_inline().gpu_name();
  }
  absl::StatusOr<Node> node = FindNode(step.node_name());
  return node.ok() ? node->gpu.name : std::string();
}

std::string StepTitle(const v1::StepSpec& step) {
  return StepGraphName(step) + " on " + StepHardwareName(step);
}

absl::Status WriteSvg(const std::string& path, const std::string& svg) {
  if (svg.empty()) {
    return absl::FailedPreconditionError(
        "the answer has no picture for --svg: no result to draw, or a "
        "server that does not draw (an older slackswapd)");
  }
  return WriteFile(path, svg);
}

}  // namespace slackswap
