#include "sim/schedule.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace slackswap {
namespace {

using ::testing::ElementsAre;

Op MakeOp(const char* name, Phase phase, std::vector<int32_t> in,
          std::vector<int32_t> out) {
  Op op;
  op.name = name;
  op.phase = phase;
  op.inputs.assign(in.begin(), in.end());
  op.outputs.assign(out.begin(), out.end());
  op.cost.duration_ns = 10;
  return op;
}

// x (kept) -> f1 -> y (transient) -> f2 -> z (saved); m: a mask made by f0
// and rebuilt from the RNG seed; s: swapped.
struct Fixture {
  Graph g;
  int32_t x, y, z, m, s;
  OpDurations d;
  Fixture() {
    x = g.AddTensor({.name = "x", .bytes = 1});
    y = g.AddTensor({.name = "y", .bytes = 1});
    z = g.AddTensor({.name = "z", .bytes = 1});
    Tensor mask{.name = "m", .bytes = 1};
    mask.rebuild.emplace();
    m = g.AddTensor(mask);
    s = g.AddTensor({.name = "s", .bytes = 1});
    g.AddOp(MakeOp("f0", Phase::kForward, {}, {x, s, m}));  // 0
    g.AddOp(MakeOp("f1", Phase::kForward, {x}, {y}));       // 1
    g.AddOp(MakeOp("f2", Phase::kForward, {y}, {z}));       // 2
    g.AddOp(MakeOp("b2", Phase::kBackward, {z, m}, {}));    // 3
    g.AddOp(MakeOp("b1", Phase::kBackward, {x, s}, {}));    // 4
    EXPECT_TRUE(IndexGraph(g).ok());
    d.op_ns.assign(g.ops.size(), 10);
    d.rebuild_ns.assign(g.tensors.size(), 0);
    d.rebuild_ns[m] = 3;
  }
  // z and m recomputed, s swapped (with no prefetch point yet).
  Plan RecomputeZAndMSwapS() const {
    Plan plan = Plan::KeepAll(g);
    plan.decisions[z].action = Action::kRecompute;
    plan.decisions[m].action = Action::kRecompute;
    plan.decisions[s].action = Action::kSwap;
    return plan;
  }
};

TEST(LowerPlanTest, InsertsRecomputeChainsBeforeTheFirstNeed) {
  Fixture f;
  Plan plan = f.RecomputeZAndMSwapS();
  plan.decisions[f.s].prefetch_after_op = 3;
  absl::StatusOr<Schedule> s = LowerPlan(f.g, plan, f.d);
  ASSERT_TRUE(s.ok()) << s.status();
  // f0 f1 f2 | re-run f1 (y), re-run f2 (z), regenerate m | b2 b1
  std::vector<std::pair<int32_t, bool>> order;
  for (const Task& t : s->tasks) order.push_back({t.op, t.recompute});
  EXPECT_THAT(order, ElementsAre(std::pair{0, false}, std::pair{1, false},
                                 std::pair{2, false}, std::pair{1, true},
                                 std::pair{2, true}, std::pair{0, true},
                                 std::pair{3, false}, std::pair{4, false}));
  EXPECT_EQ(s->tasks[5].rebuild_of, f.m);
  EXPECT_EQ(s->tasks[5].duration_ns, 3);
  // The temporary y is freed by the last task of the chain that read it.
  EXPECT_THAT(s->frees.Of(4), ElementsAre(f.y));
  EXPECT_THAT(s->allocs.Of(4), ElementsAre(f.z));
  // s: swapped out after f0, released after its last forward use... it has
  // none, so only its copy counts; prefetched when b2 starts.
  EXPECT_THAT(s->swap_outs.Of(0), ElementsAre(f.s));
  EXPECT_THAT(s->prefetches.Of(6), ElementsAre(f.s));
  EXPECT_THAT(s->waits.Of(7), ElementsAre(f.s));
  EXPECT_EQ(s->first_need[f.s], 7);
  EXPECT_EQ(s->task_of_op[3], 6);
  EXPECT_EQ(s->swapped_tensors, 1);
  EXPECT_EQ(s->recomputed_tensors, 2);
}

TEST(LowerPlanTest, KeepAllIsTheGraphItself) {
  Fixture f;
  absl::StatusOr<Schedule> s = LowerPlan(f.g, Plan::KeepAll(f.g), f.d);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->tasks.size(), f.g.ops.size());
  EXPECT_THAT(s->frees.Of(1), ElementsAre());     // x is saved
  EXPECT_THAT(s->frees.Of(2), ElementsAre(f.y));  // y's last use
  EXPECT_THAT(s->frees.Of(4), ElementsAre(f.x, f.s));
}

// A planner lowers once, reads the first needs, chooses prefetch points and
// issues them: the schedule LowerPlan makes.
TEST(LowerWithoutPrefetchesTest, ThenIssuePrefetchesIsLowerPlan) {
  Fixture f;
  Plan plan = f.RecomputeZAndMSwapS();
  absl::StatusOr<Schedule> lowered = LowerWithoutPrefetches(f.g, plan, f.d);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  EXPECT_TRUE(lowered->prefetches.items.empty());
  ASSERT_EQ(lowered->prefetches.offsets.size(), lowered->tasks.size() + 1);
  const std::vector<int32_t> need = FirstNeedOps(*lowered);
  EXPECT_EQ(need[f.s], 4);  // b1 reads it
  EXPECT_EQ(need[f.z], kNone);

  plan.decisions[f.s].prefetch_after_op = 3;
  ASSERT_TRUE(IssuePrefetches(f.g, plan, *lowered).ok());
  absl::StatusOr<Schedule> whole = LowerPlan(f.g, plan, f.d);
  ASSERT_TRUE(whole.ok()) << whole.status();
  std::vector<std::pair<int32_t, bool>> a, b;
  for (const Task& t : lowered->tasks) a.push_back({t.op, t.recompute});
  for (const Task& t : whole->tasks) b.push_back({t.op, t.recompute});
  EXPECT_EQ(a, b);
  for (auto list :
       {&Schedule::waits, &Schedule::allocs, &Schedule::frees,
        &Schedule::swap_outs, &Schedule::forward_done, &Schedule::prefetches}) {
    EXPECT_EQ(((*lowered).*list).offsets, ((*whole).*list).offsets);
    EXPECT_EQ(((*lowered).*list).items, ((*whole).*list).items);
  }
  EXPECT_THAT(lowered->prefetches.Of(6), ElementsAre(f.s));
  EXPECT_EQ(lowered->first_need, whole->first_need);
  EXPECT_EQ(lowered->task_of_op, whole->task_of_op);
}

TEST(LowerWithoutPrefetchesTest, AnInvalidPrefetchPointLeavesTheSchedule) {
  Fixture f;
  Plan plan = Plan::KeepAll(f.g);
  plan.decisions[f.s].action = Action::kSwap;
  absl::StatusOr<Schedule> lowered = LowerWithoutPrefetches(f.g, plan, f.d);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  // At its own need (b1), and before its producer is done (f0).
  for (int32_t at : {4, 0}) {
    plan.decisions[f.s].prefetch_after_op = at;
    const absl::Status issued = IssuePrefetches(f.g, plan, *lowered);
    EXPECT_EQ(issued.code(), absl::StatusCode::kInvalidArgument) << at;
    EXPECT_THAT(std::string(issued.message()),
                ::testing::HasSubstr("prefetch_after_op"));
    EXPECT_TRUE(lowered->prefetches.items.empty()) << at;
  }
}

// FSDP's recipes (model/transformer.h): z is rebuilt from x and w, which a
// collective in backward writes. Needed after w exists, the rebuild reads
// it; needed before, the lowering refuses rather than read nothing.
struct LateInputFixture {
  Graph g;
  int32_t x, z, w;
  OpDurations d;
  explicit LateInputFixture(bool z_needed_before_w) {
    x = g.AddTensor({.name = "x", .bytes = 1});
    Tensor zt{.name = "z", .bytes = 1};
    z = g.AddTensor(zt);
    w = g.AddTensor({.name = "w", .bytes = 1, .kind = TensorKind::kParameter});
    Rebuild& r = g.tensors[z].rebuild.emplace();
    r.inputs = {x, w};
    g.AddOp(MakeOp("f0", Phase::kForward, {}, {x}));   // 0
    g.AddOp(MakeOp("f1", Phase::kForward, {x}, {z}));  // 1
    if (z_needed_before_w) {
      g.AddOp(MakeOp("b_early", Phase::kBackward, {z}, {}));  // 2
    }
    Op gather = MakeOp("gather", Phase::kBackward, {}, {w});
    gather.cost.duration_ns.reset();
    Collective& c = gather.collective.emplace();
    c.kind = CollectiveKind::kAllGather;
    c.bytes = 1;
    c.group = {0};
    g.AddOp(std::move(gather));
    g.AddOp(MakeOp("b", Phase::kBackward, {x, z, w}, {}));
    const absl::Status indexed = IndexGraph(g);
    EXPECT_TRUE(indexed.ok()) << indexed;
    d.op_ns.assign(g.ops.size(), 10);
    d.rebuild_ns.assign(g.tensors.size(), 4);
  }
  Plan RecomputeZ() const {
    Plan plan = Plan::KeepAll(g);
    plan.decisions[z].action = Action::kRecompute;
    return plan;
  }
};

TEST(LowerPlanTest, ARecipeReadsATensorMadeAfterItsTensor) {
  LateInputFixture f(/*z_needed_before_w=*/false);
  absl::StatusOr<Schedule> s = LowerPlan(f.g, f.RecomputeZ(), f.d);
  ASSERT_TRUE(s.ok()) << s.status();
  // f0 f1 | gather | rebuild z from x and w | b
  ASSERT_EQ(s->tasks.size(), 5u);
  EXPECT_EQ(s->tasks[3].rebuild_of, f.z);
  EXPECT_EQ(s->tasks[3].duration_ns, 4);
  EXPECT_EQ(s->task_of_op[3], 4);
}

TEST(LowerPlanTest, ARebuildBeforeItsInputExistsIsRefused) {
  LateInputFixture f(/*z_needed_before_w=*/true);
  absl::StatusOr<Schedule> s = LowerPlan(f.g, f.RecomputeZ(), f.d);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(),
              ::testing::HasSubstr("rebuilding tensor 1 (z) for op 2 "
                                   "(b_early) reads tensor 2 (w), which op 3 "
                                   "(gather) has not produced yet"));
  // Kept, z needs no rebuild: the same graph lowers.
  EXPECT_TRUE(LowerPlan(f.g, Plan::KeepAll(f.g), f.d).ok());
}

}  // namespace
}  // namespace slackswap
