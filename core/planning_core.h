// The planning service's logic, free of any transport: takes the
// slackswap.v1 request messages, validates them (errors name the field),
// converts them to domain structs once, runs the planner and simulator, and
// builds the response messages. The gRPC server and the CLI's local mode
// both call it, so the same request gives the same result either way.
//
//   PlanningCore core(CoreLimits{});
//   v1::PlanRequest req;
//   req.mutable_step()->mutable_workload()->set_name("gpt2-xl");
//   req.mutable_step()->set_hardware_name("a100-80gb-pcie4");
//   req.set_budget_fraction(0.5);
//   absl::StatusOr<v1::PlanResponse> resp = core.PlanStep(req, /*stop=*/{});
//
// Thread-safe: const methods only, no shared mutable state.
#ifndef SLACKSWAP_CORE_PLANNING_CORE_H_
#define SLACKSWAP_CORE_PLANNING_CORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/stop.h"
#include "core/admission.h"
#include "core/fit_verdicts.h"
#include "core/graph_source.h"
#include "model/transformer.h"
#include "planner/policy.h"
#include "sim/schedule.h"
#include "slackswap/v1/planner_service.pb.h"

namespace slackswap {

// Per-request bounds: a request beyond them is refused up front with
// RESOURCE_EXHAUSTED naming the field and the limit.
struct CoreLimits {
  int64_t max_graph_ops = 1'000'000;
  int64_t max_graph_tensors = 2'000'000;
  int64_t max_workload_layers = kMaxTransformerLayers;
  int32_t max_timeline_points = 100'000;
  int32_t max_sweep_points = 1'000;
  // Events grow with the graph; refused above this many ops.
  int64_t max_event_ops = 200'000;
  // A request whose estimated memory or planning time (core/admission.h)
  // exceeds these is refused up front; 0: no limit.
  int64_t max_request_bytes = 0;
  double max_request_seconds = 0;
  // Recompute tasks one plan's lowering may make (chains rebuilt again and
  // again can make many more than the graph has ops).
  int64_t max_recompute_tasks = LoweringLimits{}.max_recompute_tasks;
};

// What the server wants to measure; every method has a no-op default.
class CoreObserver {
 public:
  virtual ~CoreObserver() = default;
  virtual void GraphOps(int64_t ops) {}
  virtual void PolicyRun(const std::string& policy, double planner_seconds,
                         double simulator_seconds, double retained,
                         bool feasible) {}
  // One profile of a Fit request answered: `verdict` is kFitVerdicts'.
  virtual void FitProfile(const std::string& verdict) {}
  // One node of a Fit request answered: `node_name` is the catalog node's
  // name (model/node.h NodeCatalog) for a node given by name, and "" for a
  // node given inline (whose own name may repeat a catalog node's); metrics
  // count every name outside the catalog as one "inline" node. `verdict` is
  // kFitVerdicts'.
  virtual void FitNode(const std::string& node_name,
                       const std::string& verdict) {}
  // A Plan request admitted (validated, and within the cost limits), once
  // per request, before any planning: `scope` is kGpuScope or kNodeScope
  // (core/plan_scopes.h). Counted per request rather than per policy run:
  // a request's runs vary with its policies and budget, and Sweep runs
  // policies too.
  virtual void PlanAdmitted(const std::string& scope) {}
  // One node simulation the core timed itself: a plan lowered and run on
  // every rank of a node together (SimulateNode), for one policy's reported
  // result of a node plan or for a Simulate on a node, taking `seconds` of
  // wall time. The node runs a policy makes while planning (judging seeds,
  // searching budgets) count in its planner time instead: planner/ and
  // sim/ have no clock.
  virtual void NodeSimulation(double seconds) {}
};

// A sweep computed one unit at a time (a budget's points, one target
// answer, one minimum), so that a caller can stop between units (a client
// not reading) and resume, or let other work run.
class SweepRun {
 public:
  virtual ~SweepRun() = default;
  virtual bool Done() const = 0;
  // Computes the next unit and emits its messages; CANCELLED when `emit`
  // returns false (the client went away). REQUIRES: !Done().
  virtual absl::Status Next(
      const std::function<bool(const v1::SweepResponse&)>& emit) = 0;
};
// A Sweep request's budget fractions when it leaves them at zero.
inline constexpr double kDefaultSweepFrom = 0.1;
inline constexpr double kDefaultSweepTo = 1.0;
inline constexpr double kDefaultSweepStep = 0.05;

// A Fit request's target share and policy when it names none.
inline constexpr double kDefaultFitTarget = 0.99;
inline constexpr char kDefaultFitPolicy[] = "slackswap";

// The profiles one Fit request may list.
inline constexpr int kMaxFitProfiles = 16;

class PlanningCore {
 public:
  // REQUIRES: observer and graphs, if any, outlive the core and are
  // thread-safe. `graphs` resolves StepSpec.graph_sha256.
  explicit PlanningCore(CoreLimits limits, CoreObserver* observer = nullptr,
                        GraphSource* graphs = nullptr);

  // Every policy's result, each with the whole device modelled, and
  // whether they fit it (report.device). A budget no policy meets is an
  // answer too: infeasible results, each policy's lowest feasible budget,
  // and report.budget_unmet saying why.
  absl::StatusOr<v1::PlanResponse> PlanStep(const v1::PlanRequest& req,
                                            const StopFn& stop) const;

  // Per profile: whether the step fits, its best plan that fits, and the
  // memory that keeps req.target; ranked (core/fit_step.cc).
  absl::StatusOr<v1::FitResponse> FitStep(const v1::FitRequest& req,
                                          const StopFn& stop) const;

  // Calls `emit` with each point as soon as it is computed, then the target
  // answers and the minimums. Stops with CANCELLED if `emit` returns false.
  absl::Status SweepBudgets(
      const v1::SweepRequest& req, const StopFn& stop,
      const std::function<bool(const v1::SweepResponse&)>& emit) const;
  // The same sweep, validated and admitted, to run unit by unit. `stop` is
  // polled by every unit. REQUIRES: stop outlives the run.
  absl::StatusOr<std::unique_ptr<SweepRun>> StartSweep(
      const v1::SweepRequest& req, const StopFn& stop) const;

  // A graph for the graph store (PutGraph): validated, converted and
  // indexed under the core's limits; errors name `graph`.
  absl::StatusOr<Graph> PrepareGraph(const v1::OperatorGraph& graph,
                                     const StopFn& stop) const;

  absl::StatusOr<v1::SimulateResponse> SimulateStep(
      const v1::SimulateRequest& req, const StopFn& stop) const;

  v1::ListHardwareProfilesResponse ListHardwareProfiles() const;
  // The node catalog (model/node.h), each node's GPU inline.
  v1::ListNodesResponse ListNodes() const;
  // Versions, policies, workloads, hardware and node names, the catalogs'
  // digests and the core's limits
  // (the transport's own limits are the server's to add).
  v1::ServerInfoResponse Info() const;
  absl::StatusOr<v1::ListWorkloadsResponse> ListWorkloads() const;
  absl::StatusOr<v1::GetWorkloadResponse> GetWorkload(
      const v1::GetWorkloadRequest& req) const;

 private:
  // RESOURCE_EXHAUSTED when `work` on g for `req` is estimated to exceed
  // the limits (core/admission.h).
  absl::Status CheckRequestCost(const Graph& g,
                                const google::protobuf::Message& req,
                                const PlanningWork& work) const;
  // FitStep for a job on nodes (FitRequest.nodes; core/fit_job.cc).
  absl::StatusOr<v1::FitResponse> FitJob(const v1::FitRequest& req,
                                         const StopFn& stop) const;
  // A planning context under this core's limits.
  PlanningContext Context(const Graph& g, const Hardware& hw,
                          const StepAnalysis& analysis, int64_t budget,
                          const StopFn& stop) const;

  // Immutable after construction.
  const CoreLimits limits_;
  CoreObserver* const observer_;
  GraphSource* const graphs_;
};

// Why a budget no policy's plan meets is not met (PlanReport.budget_unmet,
// as a FAILED_PRECONDITION status), naming the lowest activation peak `by`
// reaches (`lowest`, from MinimumFeasibleBudget). When that is under
// `budget`, feasibility is not monotone near it, and it says so instead of
// calling `budget` unreachable. Exposed for tests.
absl::Status BudgetNotMetError(int64_t budget, int64_t lowest,
                               const std::string& by, int64_t peak);

}  // namespace slackswap

#endif  // SLACKSWAP_CORE_PLANNING_CORE_H_
