// PlanningCore::FitJob: Fit for a job (a workload, its global batch, the
// parallel layouts to consider) on node types. Every node type is tried
// with every layout on all its GPUs: each rank's step built for the layout
// (its share of the batch, its collectives), every policy's plans made
// with what each rank can count on of the shared links (FairShareGpu) and
// judged by simulating every rank together (shared uplinks, the sockets'
// pinned memory, collectives), the whole device modelled on every rank.
// The answers are ranked by step time (one step is the same global batch
// everywhere) or by the cost of 1,000 steps, each "no" with its numbers.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/format.h"
#include "common/status_macros.h"
#include "core/admission.h"
#include "core/device_fit.h"
#include "core/fit_profile.h"
#include "core/node_planning.h"
#include "core/planning_core.h"
#include "core/policy_round.h"
#include "core/request_convert.h"
#include "io/convert.h"
#include "model/node.h"
#include "model/transformer.h"
#include "model/workloads.h"
#include "planner/analysis.h"
#include "sim/node_simulator.h"
#include "sim/schedule.h"

namespace slackswap {
namespace {

inline constexpr int kMaxFitLayouts = 8;

struct JobLayout {
  int32_t tensor_parallel = 1;
  bool fully_sharded = false;
};

// A Fit request for a job, validated.
struct JobSpec {
  // The model, without batch or layout.
  v1::WorkloadRef workload;
  int64_t seq = 0;
  int64_t global_batch = 0;
  std::vector<Node> nodes;
  std::vector<v1::FitNode> node_refs;
  std::vector<std::optional<double>> prices;
  bool priced = false;
  std::vector<JobLayout> layouts;
  FitOptions options;
};

// Why `layout` cannot run `global_batch` on `gpus` GPUs; empty when it can.
std::string LayoutMismatch(const JobLayout& layout, int32_t gpus,
                           int64_t global_batch) {
  if (gpus % layout.tensor_parallel != 0) {
    return absl::StrCat("tensor_parallel ", layout.tensor_parallel,
                        " does not divide the node's ", gpus, " GPUs");
  }
  const int32_t data = gpus / layout.tensor_parallel;
  if (global_batch % data != 0) {
    return absl::StrCat("a global batch of ", global_batch,
                        " does not split evenly over ", data,
                        " data-parallel ranks");
  }
  return "";
}

std::string LayoutName(const JobLayout& layout, int32_t gpus) {
  const int32_t data = gpus / std::max(1, layout.tensor_parallel);
  std::string name;
  if (layout.tensor_parallel > 1) {
    name = absl::StrCat("tp", layout.tensor_parallel);
    if (data == 1) return name;
    name += " ";
  }
  return absl::StrCat(name, layout.fully_sharded ? "fsdp" : "dp", data);
}

absl::Status ResolveJobWorkload(const v1::FitRequest& req, JobSpec& spec) {
  if (!req.has_workload()) {
    return absl::InvalidArgumentError(absl::StrCat(
        req.has_graph_inline() ? "graph_inline" : "graph_sha256",
        ": a job on nodes builds each rank's step for each layout, so it "
        "takes a workload; to fit a graph built for one layout, plan it on "
        "a node (Plan with step.node_name and a device budget)"));
  }
  const v1::WorkloadRef& w = req.workload();
  const char* set_by_job = w.has_batch()             ? "batch"
                           : w.has_data_parallel()   ? "data_parallel"
                           : w.has_fully_sharded()   ? "fully_sharded"
                           : w.has_tensor_parallel() ? "tensor_parallel"
                           : w.has_rank()            ? "rank"
                                                     : nullptr;
  if (set_by_job != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("workload.", set_by_job,
                     ": a job sets it (global_batch and layouts); leave it "
                     "out"));
  }
  spec.workload = w;
  WorkloadOverrides o;
  if (w.has_seq()) o.seq = w.seq();
  absl::StatusOr<TransformerConfig> config = WorkloadConfig(w.name(), o);
  if (!config.ok()) return InField("workload", config.status());
  spec.seq = config->seq;
  if (req.global_batch() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("global_batch: a job needs the samples of one step over "
                     "all ranks (> 0), got ",
                     req.global_batch()));
  }
  spec.global_batch = req.global_batch();
  return absl::OkStatus();
}

absl::Status ResolveJobNodes(const v1::FitRequest& req, JobSpec& spec) {
  if (req.nodes_size() > kMaxFitProfiles) {
    return absl::InvalidArgumentError(
        absl::StrCat("nodes: give 1 to ", kMaxFitProfiles, " nodes, got ",
                     req.nodes_size()));
  }
  spec.priced = req.nodes(0).has_price_per_hour();
  for (int i = 0; i < req.nodes_size(); ++i) {
    const v1::FitNode& n = req.nodes(i);
    const std::string field = absl::StrCat("nodes[", i, "].");
    SLACKSWAP_ASSIGN_OR_RETURN(
        Node node,
        ResolveNode(
            n.has_node_inline() ? &n.node_inline() : nullptr,
            n.node_case() == v1::FitNode::kNodeName ? &n.node_name() : nullptr,
            field));
    spec.nodes.push_back(std::move(node));
    spec.node_refs.push_back(n);
    SLACKSWAP_ASSIGN_OR_RETURN(
        std::optional<double> price,
        ResolvePrice(n.has_price_per_hour(), n.price_per_hour(), spec.priced,
                     "node", field));
    spec.prices.push_back(price);
  }
  return absl::OkStatus();
}

absl::Status ResolveJobLayouts(const v1::FitRequest& req, JobSpec& spec) {
  if (req.layouts_size() > kMaxFitLayouts) {
    return absl::InvalidArgumentError(
        absl::StrCat("layouts: give at most ", kMaxFitLayouts, " layouts, got ",
                     req.layouts_size()));
  }
  std::vector<std::string> fields;
  for (int i = 0; i < req.layouts_size(); ++i) {
    const v1::ParallelLayout& l = req.layouts(i);
    const std::string field = absl::StrCat("layouts[", i, "]");
    if (l.tensor_parallel() < 0 || l.tensor_parallel() > kMaxTensorParallel) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".tensor_parallel must be in [0, ",
                       kMaxTensorParallel, "], got ", l.tensor_parallel()));
    }
    const JobLayout layout{.tensor_parallel = std::max(1, l.tensor_parallel()),
                           .fully_sharded = l.fully_sharded()};
    for (size_t j = 0; j < spec.layouts.size(); ++j) {
      if (spec.layouts[j].tensor_parallel == layout.tensor_parallel &&
          spec.layouts[j].fully_sharded == layout.fully_sharded) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ": the same layout as layouts[", j, "]"));
      }
    }
    spec.layouts.push_back(layout);
    fields.push_back(field);
  }
  if (spec.layouts.empty()) {
    spec.layouts = {{.tensor_parallel = 1, .fully_sharded = false},
                    {.tensor_parallel = 1, .fully_sharded = true}};
    fields = {"the default layout DDP", "the default layout FSDP"};
  }
  // A layout no node can run is a mistake in the request, not an answer.
  for (size_t i = 0; i < spec.layouts.size(); ++i) {
    const JobLayout& layout = spec.layouts[i];
    bool runs_somewhere = false;
    bool divides_some_node = false;
    std::vector<std::string> gpus;
    for (const Node& node : spec.nodes) {
      divides_some_node |= node.num_gpus % layout.tensor_parallel == 0;
      runs_somewhere |=
          LayoutMismatch(layout, node.num_gpus, spec.global_batch).empty();
      gpus.push_back(absl::StrCat(node.name, " ", node.num_gpus));
    }
    if (!divides_some_node) {
      return absl::InvalidArgumentError(absl::StrCat(
          fields[i], ".tensor_parallel: ", layout.tensor_parallel,
          " divides no node's GPUs (", absl::StrJoin(gpus, ", "), ")"));
    }
    if (!runs_somewhere) {
      return absl::InvalidArgumentError(absl::StrCat(
          "global_batch: ", spec.global_batch, " does not split evenly over ",
          fields[i], "'s data-parallel ranks on any node (GPUs / ",
          layout.tensor_parallel, ": ", absl::StrJoin(gpus, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<JobSpec> ResolveJob(const v1::FitRequest& req) {
  JobSpec spec;
  if (!req.profiles().empty()) {
    return absl::InvalidArgumentError(
        "profiles: a job gives nodes; a Fit over single GPUs gives profiles, "
        "not both");
  }
  SLACKSWAP_RETURN_IF_ERROR(ResolveJobWorkload(req, spec));
  SLACKSWAP_RETURN_IF_ERROR(ResolveJobNodes(req, spec));
  SLACKSWAP_RETURN_IF_ERROR(ResolveJobLayouts(req, spec));
  SLACKSWAP_ASSIGN_OR_RETURN(spec.options, ResolveFitOptions(req));
  return spec;
}

// The request a Plan on node `n` would send for `layout`'s step.
v1::StepSpec LayoutSpec(const JobSpec& spec, size_t n, size_t layout_index) {
  const JobLayout& layout = spec.layouts[layout_index];
  const int32_t data = spec.nodes[n].num_gpus / layout.tensor_parallel;
  v1::StepSpec step;
  v1::WorkloadRef& w = *step.mutable_workload();
  w = spec.workload;
  w.set_batch(spec.global_batch / data);
  if (layout.tensor_parallel > 1) w.set_tensor_parallel(layout.tensor_parallel);
  if (data > 1) {
    if (layout.fully_sharded) {
      w.set_fully_sharded(data);
    } else {
      w.set_data_parallel(data);
    }
  }
  const v1::FitNode& ref = spec.node_refs[n];
  if (ref.has_node_inline()) {
    *step.mutable_node_inline() = ref.node_inline();
  } else {
    step.set_node_name(ref.node_name());
  }
  return step;
}

// `s` (about the step LayoutSpec made) naming the layout and node.
absl::Status InLayout(const absl::Status& s, const JobSpec& spec, size_t n,
                      size_t layout_index) {
  if (s.ok()) return s;
  return absl::Status(
      s.code(),
      absl::StrCat("layouts[", layout_index, "] on ", spec.nodes[n].name, ": ",
                   absl::StripPrefix(s.message(), "step.")));
}

// Rank 0's graph of `layout` on node `n`, for admission.
absl::StatusOr<Graph> LayoutGraph(const JobSpec& spec, size_t n,
                                  size_t layout_index,
                                  const CoreLimits& limits) {
  absl::StatusOr<Graph> g = ResolveWorkload(
      LayoutSpec(spec, n, layout_index).workload(), "workload", limits);
  if (!g.ok()) return InLayout(g.status(), spec, n, layout_index);
  return g;
}

// The step of `layout` on node `n`: every rank's graph, built as a Plan
// request on the node would build it.
absl::StatusOr<Step> LayoutStep(const JobSpec& spec, size_t n,
                                size_t layout_index, const CoreLimits& limits,
                                const StopFn& stop) {
  absl::StatusOr<Step> step =
      ResolveStep(LayoutSpec(spec, n, layout_index), limits, stop);
  if (!step.ok()) return InLayout(step.status(), spec, n, layout_index);
  return step;
}

// Every rank's device and the node's pinned memory for the chosen plan: the
// search judged the slowest rank's device; this judges each.
absl::Status CheckEveryRank(const PlanningContext& ctx,
                            const FitOptions& options, const Plan& plan,
                            v1::FitResult& out) {
  SimOptions report;
  report.record_timeline = false;
  report.device = options.device;
  SimOptions opts = ctx.Simulation(report);
  opts.budget_bytes = out.policy() == kKeepAllName ? 0 : out.budget_bytes();
  SLACKSWAP_ASSIGN_OR_RETURN(
      Schedule schedule,
      LowerPlan(ctx.graph, plan, ctx.analysis.durations, ctx.Lowering()));
  NodeSimResult run;
  SLACKSWAP_ASSIGN_OR_RETURN(SimResult reported,
                             RunSchedule(ctx, schedule, opts, &run));
  const Node& node = *ctx.node->node;
  for (size_t s = 0; s < run.peak_pinned_bytes_per_socket.size(); ++s) {
    if (run.peak_pinned_bytes_per_socket[s] >= out.peak_pinned_bytes()) {
      out.set_peak_pinned_bytes(run.peak_pinned_bytes_per_socket[s]);
      out.set_pinned_capacity_bytes(node.sockets[s].pinned_host_memory_bytes);
    }
  }
  if (!out.fits_device()) return absl::OkStatus();
  if (!reported.feasible) {
    out.set_fits_device(false);
    out.set_fits_without_plan(false);
    out.set_summary(absl::StrCat("does not fit: on the node, ",
                                 reported.infeasible_reason));
    return absl::OkStatus();
  }
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    const SimResult& rank = run.ranks[r];
    if (rank.device.has_value() && rank.device->fits) continue;
    out.set_fits_device(false);
    out.set_fits_without_plan(false);
    out.set_summary(absl::StrCat(
        "rank ", r, " ", DeviceSummary(ResultToProto(rank, ctx.graph))));
    return absl::OkStatus();
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::FitResponse> PlanningCore::FitJob(const v1::FitRequest& req,
                                                     const StopFn& stop) const {
  Stopwatch watch;
  SLACKSWAP_ASSIGN_OR_RETURN(const JobSpec spec, ResolveJob(req));
  // Admission before any plan: every runnable pair's search, each judgment
  // on all its ranks, costed on the largest rank-0 step among them; checked
  // as each pair is added, so that a request past the limits is refused
  // before building the rest.
  PlanningWork work;
  std::optional<Graph> largest;
  for (size_t n = 0; n < spec.nodes.size(); ++n) {
    for (size_t l = 0; l < spec.layouts.size(); ++l) {
      const int32_t gpus = spec.nodes[n].num_gpus;
      if (!LayoutMismatch(spec.layouts[l], gpus, spec.global_batch).empty()) {
        continue;
      }
      if (stop && stop()) return absl::CancelledError("Fit stopped");
      const PlanningWork pair =
          NodePlanWork(FitWork(spec.options.policies, 1), gpus);
      work.plans += pair.plans;
      work.ranks = std::max(work.ranks, pair.ranks);
      SLACKSWAP_ASSIGN_OR_RETURN(Graph g, LayoutGraph(spec, n, l, limits_));
      if (!largest.has_value() || GraphElements(g) > GraphElements(*largest)) {
        largest = std::move(g);
      }
      SLACKSWAP_RETURN_IF_ERROR(CheckRequestCost(*largest, req, work));
    }
  }
  if (observer_ != nullptr) observer_->GraphOps(largest->ops.size());

  v1::FitResponse resp;
  resp.set_graph_name(largest->name);
  resp.set_target(spec.options.target);
  resp.set_global_batch(spec.global_batch);
  resp.set_ranked_by(spec.priced ? "cost_per_1000_steps" : "step_time");
  for (size_t n = 0; n < spec.nodes.size(); ++n) {
    const Node& node = spec.nodes[n];
    for (size_t l = 0; l < spec.layouts.size(); ++l) {
      const JobLayout& layout = spec.layouts[l];
      v1::FitResult out;
      const std::string mismatch =
          LayoutMismatch(layout, node.num_gpus, spec.global_batch);
      if (mismatch.empty()) {
        SLACKSWAP_ASSIGN_OR_RETURN(const Step step,
                                   LayoutStep(spec, n, l, limits_, stop));
        const Graph& g = step.graph();
        const NodePlanning on_node = *PlanOnNode(step);
        SLACKSWAP_ASSIGN_OR_RETURN(StepAnalysis analysis,
                                   AnalyzeStep(g, on_node.planning_hw, stop));
        PlanningContext ctx =
            Context(g, on_node.planning_hw, analysis,
                    std::max<int64_t>(1, g.index.saved_bytes), stop);
        ctx.explain = false;
        ctx.node = &on_node.ranks;
        SLACKSWAP_ASSIGN_OR_RETURN(DeviceAnswer a,
                                   FitDevice(spec.options, ctx));
        out = std::move(a.result);
        SLACKSWAP_RETURN_IF_ERROR(
            CheckEveryRank(ctx, spec.options, a.plan, out));
        if (out.peak_pinned_bytes() > 0) {
          absl::StrAppend(out.mutable_summary(), "; pinned host memory ",
                          FormatDeviceBytes(out.peak_pinned_bytes()), " of ",
                          FormatDeviceBytes(out.pinned_capacity_bytes()),
                          " on the busiest socket");
        }
        out.set_batch_per_rank(spec.global_batch /
                               (node.num_gpus / layout.tensor_parallel));
        if (out.fits_device() && out.step_ns() > 0) {
          const double steps_per_second =
              1e9 / static_cast<double>(out.step_ns());
          out.set_samples_per_second(static_cast<double>(spec.global_batch) *
                                     steps_per_second);
          out.set_tokens_per_second(out.samples_per_second() *
                                    static_cast<double>(spec.seq));
        }
      } else {
        out.set_summary(absl::StrCat("does not fit: ", mismatch));
      }
      out.set_hardware_name(node.gpu.name);
      out.set_node_name(node.name);
      out.mutable_layout()->set_tensor_parallel(layout.tensor_parallel);
      out.mutable_layout()->set_fully_sharded(layout.fully_sharded);
      out.set_layout_name(LayoutName(layout, node.num_gpus));
      out.set_ranks(node.num_gpus);
      SetCost(spec.prices[n], out);
      if (observer_ != nullptr) {
        // Inline nodes are one series: their names are the caller's.
        observer_->FitNode(spec.node_refs[n].has_node_inline() ? "" : node.name,
                           FitVerdictOf(out));
      }
      *resp.add_results() = std::move(out);
    }
  }
  RankFits(spec.priced, *resp.mutable_results());
  resp.set_server_seconds(watch.Lap());
  return resp;
}

}  // namespace slackswap
