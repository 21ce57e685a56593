#include "sim/schedule.h"

#include <algorithm>
#include <array>
#include <tuple>
#include <utility>

#include "absl/base/attributes.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/stop.h"

namespace slackswap {
namespace {

using TaskItem = std::pair<int32_t, int32_t>;  // (task, tensor)

TaskLists BuildLists(const std::vector<TaskItem>& items, int32_t num_tasks) {
  TaskLists lists;
  lists.offsets.assign(num_tasks + 1, 0);
  for (const TaskItem& it : items) ++lists.offsets[it.first + 1];
  for (int32_t i = 0; i < num_tasks; ++i) {
    lists.offsets[i + 1] += lists.offsets[i];
  }
  lists.items.resize(items.size());
  std::vector<int32_t> fill(lists.offsets.begin(), lists.offsets.end() - 1);
  // Stable: items keep the order they were recorded in within a task.
  for (const TaskItem& it : items) lists.items[fill[it.first]++] = it.second;
  return lists;
}

// The lists a task's lowering fills in task order: each item belongs to the
// task made last, so they need no sort (frees do not: see
// Lowerer::FlushFrees). Where each task's items begin is recorded once per
// task for all four: four offset vectors grown beside the items held less
// at the end, but past the reserve (long recompute chains) their growth
// left more memory resident (docs/PERFORMANCE.md).
class InOrderLists {
 public:
  enum List { kWaits, kAllocs, kSwapOuts, kForwardDone, kLists };

  void Reserve(size_t tasks, size_t allocs) {
    starts_.reserve(tasks);
    items_[kAllocs].reserve(allocs);
  }
  void OpenTask() {
    starts_.push_back({static_cast<int32_t>(items_[kWaits].size()),
                       static_cast<int32_t>(items_[kAllocs].size()),
                       static_cast<int32_t>(items_[kSwapOuts].size()),
                       static_cast<int32_t>(items_[kForwardDone].size())});
  }
  void Add(List list, int32_t item) { items_[list].push_back(item); }
  TaskLists Finish(List list) {
    TaskLists out;
    out.offsets.resize(starts_.size() + 1);
    for (size_t i = 0; i < starts_.size(); ++i) {
      out.offsets[i] = starts_[i][list];
    }
    out.offsets.back() = static_cast<int32_t>(items_[list].size());
    out.items = std::move(items_[list]);
    return out;
  }

 private:
  std::vector<std::array<int32_t, kLists>> starts_;
  std::vector<int32_t> items_[kLists];
};

// Frees, filled task by task when an op's tasks are all made.
class ListBuilder {
 public:
  void Reserve(size_t tasks, size_t items) {
    lists_.offsets.reserve(tasks + 1);
    lists_.items.reserve(items);
  }
  void OpenTask() {
    lists_.offsets.push_back(static_cast<int32_t>(lists_.items.size()));
  }
  void Add(int32_t item) { lists_.items.push_back(item); }
  TaskLists Finish() {
    lists_.offsets.push_back(static_cast<int32_t>(lists_.items.size()));
    return std::move(lists_);
  }

 private:
  TaskLists lists_;
};

// Where a tensor is, as the lowering walks the launch order.
enum class Where : uint8_t {
  kStatic,   // never produced: resident throughout
  kAbsent,   // not produced yet
  kLive,     // on the GPU
  kOnHost,   // swapped out; the first task that needs it waits for it
  kDropped,  // freed; must be rebuilt if needed again
  kTemp,     // rebuilt for a recompute chain, freed after its last reader
};

// A swap's prefetch point is an op of the graph after the tensor's last
// forward use.
absl::Status CheckPrefetchPoint(const Graph& g, int32_t t, const Decision& d) {
  const int32_t k = d.prefetch_after_op;
  if (k < 0 || k >= static_cast<int32_t>(g.ops.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("decision for ", g.TensorLabel(t),
                     ": swap needs prefetch_after_op, an op of the graph"));
  }
  const int32_t after = std::max(g.index.producer[t], g.index.last_fwd_use[t]);
  if (k <= after) {
    return absl::InvalidArgumentError(absl::StrCat(
        "decision for ", g.TensorLabel(t), ": prefetch_after_op ", g.OpLabel(k),
        " must come after the tensor's last forward use ", g.OpLabel(after)));
  }
  return absl::OkStatus();
}

class Lowerer {
 public:
  // The schedule without prefetches: IssuePrefetches adds them, and checks
  // the prefetch points, which nothing here reads.
  Lowerer(const Graph& g, const Plan& plan, const OpDurations& d,
          const LoweringLimits& limits)
      : g_(g),
        idx_(g.index),
        plan_(plan),
        d_(d),
        limits_(limits),
        poller_(limits_.should_stop) {}

  absl::StatusOr<Schedule> Run() {
    absl::Status s = ReadPlan();
    if (!s.ok()) return s;

    const int32_t num_tensors = static_cast<int32_t>(g_.tensors.size());
    const int32_t num_ops = static_cast<int32_t>(g_.ops.size());
    where_.assign(num_tensors, Where::kAbsent);
    temp_last_reader_.assign(num_tensors, kNone);
    out_.task_of_op.assign(num_ops, kNone);
    out_.first_need.assign(num_tensors, kNone);
    for (int32_t t = 0; t < num_tensors; ++t) {
      if (idx_.producer[t] == kNone) where_[t] = Where::kStatic;
    }
    // A recompute task per recomputed tensor is what a plan without chains
    // through unsaved tensors needs (siblings share one, chains add more):
    // the exact size nearly always, and a held schedule has no capacity to
    // spare (a vector that outgrows its reserve doubles, and a graph of a
    // million ops then holds tens of MB it never fills).
    const int64_t tasks = int64_t{num_ops} + out_.recomputed_tensors;
    const int64_t items = int64_t{num_tensors} + out_.recomputed_tensors;
    out_.tasks.reserve(static_cast<size_t>(tasks));
    lists_.Reserve(static_cast<size_t>(tasks), static_cast<size_t>(items));
    frees_.Reserve(static_cast<size_t>(tasks), static_cast<size_t>(items));
    last_reader_op_.assign(num_tensors, kNone);
    for (int32_t o = 0; o < num_ops; ++o) {
      SLACKSWAP_RETURN_IF_ERROR(LowerOp(o));
    }

    out_.waits = lists_.Finish(InOrderLists::kWaits);
    out_.allocs = lists_.Finish(InOrderLists::kAllocs);
    out_.frees = frees_.Finish();
    out_.swap_outs = lists_.Finish(InOrderLists::kSwapOuts);
    out_.forward_done = lists_.Finish(InOrderLists::kForwardDone);
    out_.prefetches.offsets.assign(out_.tasks.size() + 1, 0);
    return std::move(out_);
  }

 private:
  // Checks the plan against the graph and copies its actions into actions_:
  // the lowering reads them for every tensor it touches, and a Decision is
  // eight bytes of which they are one (packed, a cache line holds eight
  // times as many).
  absl::Status ReadPlan() {
    if (plan_.decisions.size() != g_.tensors.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "plan has ", plan_.decisions.size(), " decisions for a graph of ",
          g_.tensors.size(), " tensors"));
    }
    actions_.resize(plan_.decisions.size());
    for (size_t i = 0; i < plan_.decisions.size(); ++i) {
      const int32_t t = static_cast<int32_t>(i);
      const Decision& d = plan_.decisions[t];
      actions_[t] = d.action;
      if (d.action == Action::kKeep) continue;
      ++(d.action == Action::kSwap ? out_.swapped_tensors
                                   : out_.recomputed_tensors);
      if (!idx_.is_saved[t]) {
        return absl::InvalidArgumentError(
            absl::StrCat("decision for ", g_.TensorLabel(t),
                         ": only saved activations "
                         "(produced in forward, read in backward) can be ",
                         d.action == Action::kSwap ? "swapped" : "recomputed"));
      }
    }
    return absl::OkStatus();
  }

  Action ActionOf(int32_t t) const { return actions_[t]; }

  int32_t NewTask(Task task) {
    out_.tasks.push_back(task);
    lists_.OpenTask();
    return static_cast<int32_t>(out_.tasks.size()) - 1;
  }

  // Makes `inputs` resident, rebuilding what is dropped, then appends `task`,
  // which waits for the inputs still on the host; returns its id. A rebuild
  // reads inputs that may be dropped too (a chain, as long as the graph):
  // walked with an explicit stack, never by recursion.
  absl::StatusOr<int32_t> EmitReading(absl::Span<const int32_t> inputs,
                                      const Task& task) {
    // A member, so that its capacity is reused from op to op.
    restored_.clear();
    // Most tasks read nothing dropped: no chain to walk.
    if (std::none_of(inputs.begin(), inputs.end(), [&](int32_t in) {
          return where_[in] == Where::kDropped;
        })) {
      return Emit(Reading{inputs, task});
    }
    std::vector<Reading>& stack = reading_stack_;
    stack.clear();
    stack.push_back(Reading{inputs, task});
    while (true) {
      Reading& top = stack.back();
      if (top.next < top.inputs.size()) {
        const int32_t in = top.inputs[top.next++];
        // Only a recipe can read a tensor made later (model/graph.cc,
        // CheckRebuildOrder): run before it exists, the rebuild would read
        // memory nothing holds.
        if (where_[in] == Where::kAbsent && stack.size() > 1) {
          const int32_t rebuilt = restored_[top.restored_begin];
          return absl::InvalidArgumentError(absl::StrCat(
              "rebuilding ", g_.TensorLabel(rebuilt), " for ",
              g_.OpLabel(current_op_), " reads ", g_.TensorLabel(in),
              ", which ", g_.OpLabel(idx_.producer[in]),
              " has not produced yet"));
        }
        if (where_[in] == Where::kDropped) {
          SLACKSWAP_RETURN_IF_ERROR(CountTask());
          SLACKSWAP_RETURN_IF_ERROR(CheckRebuildable(in));
          stack.push_back(RebuildOf(in));
        }
        continue;
      }
      const int32_t id = Emit(top);
      if (stack.size() == 1) return id;
      restored_.resize(top.restored_begin);
      stack.pop_back();
    }
  }

  // One task being lowered: it reads `inputs` (made resident first, in
  // order) and, for a rebuild, restores `restored`.
  struct Reading {
    absl::Span<const int32_t> inputs;
    Task task;
    size_t next = 0;
    // What it restores: restored_[restored_begin, restored_end). The
    // readings form a stack, and so do their ranges.
    size_t restored_begin = 0;
    size_t restored_end = 0;
  };

  // A collective's output cannot be rebuilt by one rank alone: the plan
  // must keep or swap it (and what needs it rebuilt).
  absl::Status CheckRebuildable(int32_t t) const {
    if (idx_.has_recipe[t] || !idx_.collective_output[t]) {
      return absl::OkStatus();
    }
    const int32_t p = idx_.producer[t];
    return absl::InvalidArgumentError(absl::StrCat(
        "rebuilding for ", g_.OpLabel(current_op_), " needs ",
        g_.TensorLabel(t), ", which collective ", g_.OpLabel(p),
        " wrote: a collective's output can be kept or swapped, not "
        "recomputed"));
  }

  // The task that rebuilds dropped tensor t: its Rebuild recipe, or its
  // producer re-run, which also restores the producer's other outputs that
  // the plan recomputes and that are still dropped.
  Reading RebuildOf(int32_t t) {
    const int32_t p = idx_.producer[t];
    Reading r;
    r.task.op = p;
    r.task.recompute = true;
    r.restored_begin = restored_.size();
    restored_.push_back(t);
    if (idx_.has_recipe[t]) {
      r.task.rebuild_of = t;
      r.task.duration_ns = d_.rebuild_ns[t];
      r.inputs = absl::MakeConstSpan(g_.tensors[t].rebuild->inputs);
      r.restored_end = restored_.size();
      return r;
    }
    r.task.duration_ns = d_.op_ns[p];
    r.task.workspace_bytes = idx_.workspace_bytes[p];
    r.inputs = idx_.InputsOf(p);
    for (int32_t sibling : idx_.OutputsOf(p)) {
      if (sibling != t && where_[sibling] == Where::kDropped &&
          idx_.is_saved[sibling] && ActionOf(sibling) == Action::kRecompute &&
          idx_.last_use[sibling] >= current_op_) {
        restored_.push_back(sibling);
      }
    }
    r.restored_end = restored_.size();
    return r;
  }

  // Appends the task of `r`, whose inputs are resident now, with its waits
  // and what it restores.
  int32_t Emit(const Reading& r) {
    const int32_t id = NewTask(r.task);
    for (int32_t in : r.inputs) {
      if (where_[in] == Where::kOnHost) {
        lists_.Add(InOrderLists::kWaits, in);
        if (out_.first_need[in] == kNone) out_.first_need[in] = id;
        where_[in] = Where::kLive;
      } else if (where_[in] == Where::kTemp) {
        temp_last_reader_[in] = id;
      }
    }
    for (size_t i = r.restored_begin; i < r.restored_end; ++i) {
      const int32_t t = restored_[i];
      lists_.Add(InOrderLists::kAllocs, t);
      // A saved tensor lives until its last use; anything else (or a saved
      // tensor needed again after its last use) only for this chain.
      if (idx_.is_saved[t] && idx_.last_use[t] >= current_op_) {
        where_[t] = Where::kLive;
      } else {
        where_[t] = Where::kTemp;
        temp_last_reader_[t] = id;
        temps_.push_back(t);
      }
    }
    return id;
  }

  // Counts one more recompute task against the limit, and polls the stop
  // function now and then: chains can make the task list much longer than
  // the graph.
  absl::Status CountTask() {
    if (++recompute_tasks_ > limits_.max_recompute_tasks) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the plan's recompute chains need more than ",
          limits_.max_recompute_tasks,
          " recompute tasks (rebuilding reaches back through long chains of "
          "dropped tensors)"));
    }
    return Poll();
  }

  absl::Status Poll() {
    if (poller_.Stop()) {
      return absl::CancelledError("lowering the plan stopped");
    }
    return absl::OkStatus();
  }

  // Inlined into Run with FlushFrees, as the compiler chose while the
  // inputs came from the Op: with the spans it stopped, and the reference
  // workloads' lowering cost 1.05x-1.08x of before, against 1.03x-1.06x
  // inlined (docs/PERFORMANCE.md, "Each op's lists packed in the index").
  ABSL_ATTRIBUTE_ALWAYS_INLINE absl::Status LowerOp(int32_t o) {
    SLACKSWAP_RETURN_IF_ERROR(Poll());
    const absl::Span<const int32_t> inputs = idx_.InputsOf(o);
    current_op_ = o;
    Task task;
    task.op = o;
    task.duration_ns = d_.op_ns[o];
    task.workspace_bytes = idx_.workspace_bytes[o];
    const int32_t group_begin = static_cast<int32_t>(out_.tasks.size());
    SLACKSWAP_ASSIGN_OR_RETURN(const int32_t id, EmitReading(inputs, task));
    out_.task_of_op[o] = id;

    for (int32_t in : inputs) {
      // An input listed twice is released once.
      if (last_reader_op_[in] == o) continue;
      last_reader_op_[in] = o;
      if (where_[in] == Where::kStatic) continue;
      if (idx_.last_use[in] == o) {
        group_frees_.push_back({id, in});
        where_[in] = Where::kDropped;
      } else if (idx_.is_saved[in] && idx_.last_fwd_use[in] == o) {
        ReleaseAfterForward(id, in);
      }
    }
    for (int32_t out : idx_.OutputsOf(o)) {
      lists_.Add(InOrderLists::kAllocs, out);
      where_[out] = Where::kLive;
      if (idx_.is_saved[out] && ActionOf(out) == Action::kSwap) {
        lists_.Add(InOrderLists::kSwapOuts, out);
      }
      if (idx_.last_use[out] == kNone) {
        group_frees_.push_back({id, out});
        where_[out] = Where::kDropped;
      } else if (idx_.is_saved[out] && idx_.last_fwd_use[out] == kNone) {
        ReleaseAfterForward(kNone, out);
        if (ActionOf(out) == Action::kRecompute) {
          group_frees_.push_back({id, out});
        }
      }
    }

    for (int32_t t : temps_) {
      group_frees_.push_back({temp_last_reader_[t], t});
      where_[t] = Where::kDropped;
    }
    temps_.clear();
    FlushFrees(group_begin);
    return absl::OkStatus();
  }

  // Frees are the one list not recorded in task order: a chain's temporary
  // is freed by its last reader, found only once the op's tasks are all
  // made. They all belong to the tasks made for one op, [group_begin, end):
  // each of those gets its frees in the order they were recorded.
  ABSL_ATTRIBUTE_ALWAYS_INLINE void FlushFrees(int32_t group_begin) {
    auto by_task = [](const TaskItem& x, const TaskItem& y) {
      return x.first < y.first;
    };
    // Nearly always in order already (one task, no chain).
    if (!std::is_sorted(group_frees_.begin(), group_frees_.end(), by_task)) {
      std::stable_sort(group_frees_.begin(), group_frees_.end(), by_task);
    }
    size_t i = 0;
    const int32_t end = static_cast<int32_t>(out_.tasks.size());
    for (int32_t task = group_begin; task < end; ++task) {
      frees_.OpenTask();
      for (; i < group_frees_.size() && group_frees_[i].first == task; ++i) {
        frees_.Add(group_frees_[i].second);
      }
    }
    group_frees_.clear();
  }

  // The forward pass is done with saved tensor t at task `id` (kNone: it had
  // no forward reader and the caller frees it).
  void ReleaseAfterForward(int32_t id, int32_t t) {
    switch (ActionOf(t)) {
      case Action::kKeep:
        break;
      case Action::kRecompute:
        if (id != kNone) group_frees_.push_back({id, t});
        where_[t] = Where::kDropped;
        break;
      case Action::kSwap:
        if (id != kNone) lists_.Add(InOrderLists::kForwardDone, t);
        where_[t] = Where::kOnHost;
        break;
    }
  }

  const Graph& g_;
  const GraphIndex& idx_;
  const Plan& plan_;
  const OpDurations& d_;
  const LoweringLimits& limits_;
  StopPoller poller_;

  Schedule out_;
  std::vector<Action> actions_;  // the plan's, by tensor
  std::vector<Where> where_;
  std::vector<int32_t> temp_last_reader_;
  std::vector<int32_t> temps_;
  std::vector<Reading> reading_stack_;
  std::vector<int32_t> restored_;  // see Reading
  int32_t current_op_ = 0;
  // Per tensor: the last op whose inputs released it (inputs listed twice).
  std::vector<int32_t> last_reader_op_;
  int64_t recompute_tasks_ = 0;
  InOrderLists lists_;
  ListBuilder frees_;
  std::vector<TaskItem> group_frees_;  // the current op's; see FlushFrees
};

}  // namespace

absl::StatusOr<Schedule> LowerPlan(const Graph& g, const Plan& plan,
                                   const OpDurations& durations,
                                   const LoweringLimits& limits) {
  SLACKSWAP_ASSIGN_OR_RETURN(
      Schedule s, LowerWithoutPrefetches(g, plan, durations, limits));
  SLACKSWAP_RETURN_IF_ERROR(IssuePrefetches(g, plan, s));
  return s;
}

absl::StatusOr<Schedule> LowerWithoutPrefetches(const Graph& g,
                                                const Plan& plan,
                                                const OpDurations& durations,
                                                const LoweringLimits& limits) {
  return Lowerer(g, plan, durations, limits).Run();
}

absl::Status IssuePrefetches(const Graph& g, const Plan& plan,
                             Schedule& schedule) {
  if (plan.decisions.size() != g.tensors.size() ||
      schedule.first_need.size() != g.tensors.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan has ", plan.decisions.size(),
                     " decisions and the schedule ", schedule.first_need.size(),
                     " tensors for a graph of ", g.tensors.size(), " tensors"));
  }
  std::vector<TaskItem> prefetches;  // (task, tensor)
  for (size_t i = 0; i < plan.decisions.size(); ++i) {
    const int32_t t = static_cast<int32_t>(i);
    const Decision& d = plan.decisions[t];
    if (d.action != Action::kSwap) continue;
    SLACKSWAP_RETURN_IF_ERROR(CheckPrefetchPoint(g, t, d));
    const int32_t issue = schedule.task_of_op[d.prefetch_after_op];
    const int32_t need = schedule.first_need[t];
    if (need == kNone || issue >= need) {
      return absl::InvalidArgumentError(absl::StrCat(
          "decision for ", g.TensorLabel(t), ": prefetch_after_op ",
          g.OpLabel(d.prefetch_after_op),
          " must start before the tensor's first backward need at ",
          g.OpLabel(need == kNone ? kNone : schedule.tasks[need].op)));
    }
    prefetches.push_back({issue, t});
  }
  // Prefetches issued together queue in the order they are first needed (a
  // recompute chain may need one before its first backward use).
  std::sort(
      prefetches.begin(), prefetches.end(),
      [&](const TaskItem& x, const TaskItem& y) {
        return std::tuple(x.first, schedule.first_need[x.second], x.second) <
               std::tuple(y.first, schedule.first_need[y.second], y.second);
      });
  schedule.prefetches =
      BuildLists(prefetches, static_cast<int32_t>(schedule.tasks.size()));
  return absl::OkStatus();
}

std::vector<int32_t> FirstNeedOps(const Schedule& schedule) {
  std::vector<int32_t> need(schedule.first_need.size(), kNone);
  for (size_t t = 0; t < need.size(); ++t) {
    int32_t task = schedule.first_need[t];
    if (task == kNone) continue;
    // A chain's task needs it before the op the chain runs for.
    while (schedule.tasks[task].recompute) ++task;
    need[t] = schedule.tasks[task].op;
  }
  return need;
}

}  // namespace slackswap
