#include "model/graph.h"

#include <malloc.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/plan.h"
#include "model/workloads.h"

namespace slackswap {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Op MakeOp(const std::string& name, Phase phase, std::vector<int32_t> in,
          std::vector<int32_t> out) {
  Op op;
  op.name = name;
  op.phase = phase;
  op.inputs.assign(in.begin(), in.end());
  op.outputs.assign(out.begin(), out.end());
  return op;
}

std::string ErrorOf(Graph g) {
  absl::Status s = IndexGraph(g);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  return std::string(s.message());
}

// w (parameter) and x -> f -> y -> g -> z; backward reads x and z.
Graph Small() {
  Graph g;
  g.name = "small";
  int32_t w =
      g.AddTensor({.name = "w", .bytes = 8, .kind = TensorKind::kParameter});
  int32_t x = g.AddTensor({.name = "x", .bytes = 100});
  int32_t y = g.AddTensor({.name = "y", .bytes = 200});
  int32_t z = g.AddTensor({.name = "z", .bytes = 300});
  g.AddOp(MakeOp("f0", Phase::kForward, {}, {x}));
  g.AddOp(MakeOp("f", Phase::kForward, {x, w}, {y}));
  g.AddOp(MakeOp("g", Phase::kForward, {y}, {z}));
  g.AddOp(MakeOp("g.bwd", Phase::kBackward, {z}, {}));
  g.AddOp(MakeOp("f.bwd", Phase::kBackward, {x, w}, {}));
  return g;
}

TEST(IndexGraphTest, DerivesUsesAndSavedActivations) {
  Graph g = Small();
  ASSERT_TRUE(IndexGraph(g).ok());
  const GraphIndex& idx = g.index;
  EXPECT_THAT(idx.saved, ElementsAre(1, 3));  // x, z
  EXPECT_FALSE(idx.is_saved[2]);              // y: forward only
  EXPECT_EQ(idx.saved_bytes, 400);
  EXPECT_EQ(idx.static_bytes, 8);
  EXPECT_EQ(idx.producer[0], kNone);
  EXPECT_EQ(idx.last_fwd_use[1], 1);
  EXPECT_EQ(idx.first_bwd_use[1], 4);
  EXPECT_EQ(idx.last_use[2], 2);
  EXPECT_EQ(idx.first_backward_op, 3);
  EXPECT_EQ(g.OpLabel(1), "op 1 (f)");
  EXPECT_EQ(g.TensorLabel(3), "tensor 3 (z)");
}

// Op g (y -> z) made a collective: g.bwd reads its output, no other op
// does; without a collective no op is marked.
TEST(IndexGraphTest, MarksTheOpsThatReadACollectivesOutput) {
  Graph plain = Small();
  ASSERT_TRUE(IndexGraph(plain).ok());
  EXPECT_THAT(plain.index.collective_output, ElementsAre(0, 0, 0, 0));
  EXPECT_THAT(plain.index.reads_collective_output, ElementsAre(0, 0, 0, 0, 0));
  Graph g = Small();
  g.ops[2].collective = Collective{
      .kind = CollectiveKind::kAllReduce, .bytes = 300, .group = {0}};
  ASSERT_TRUE(IndexGraph(g).ok());
  EXPECT_EQ(g.index.collective_ops, 1);
  EXPECT_THAT(g.index.collective_output, ElementsAre(0, 0, 0, 1));
  EXPECT_THAT(g.index.reads_collective_output, ElementsAre(0, 0, 0, 1, 0));
}

// The index's copy of each op's inputs, outputs and workspace, which the
// lowering reads instead of the Op: on a built step, and on a graph whose
// ops read nothing, read more inputs than an op holds inline, read one
// tensor twice and make several outputs.
TEST(IndexGraphTest, CopiesEachOpsListsAndWorkspace) {
  const auto expect_copies = [](const Graph& g) {
    ASSERT_EQ(g.index.workspace_bytes.size(), g.ops.size());
    for (int32_t o = 0; o < static_cast<int32_t>(g.ops.size()); ++o) {
      SCOPED_TRACE(g.OpLabel(o));
      EXPECT_THAT(g.index.InputsOf(o),
                  ::testing::ElementsAreArray(g.ops[o].inputs));
      EXPECT_THAT(g.index.OutputsOf(o),
                  ::testing::ElementsAreArray(g.ops[o].outputs));
      EXPECT_EQ(g.index.workspace_bytes[o], g.ops[o].workspace_bytes);
    }
  };
  absl::StatusOr<Graph> built = BuildWorkload("gpt2-xl", {.layers = 2});
  ASSERT_TRUE(built.ok()) << built.status();
  expect_copies(*built);

  Graph g;
  g.name = "wide";
  std::vector<int32_t> made;
  for (int i = 0; i < 7; ++i) {
    made.push_back(g.AddTensor({.name = "t", .bytes = 8}));
  }
  g.AddOp(MakeOp("make", Phase::kForward, {}, made));
  std::vector<int32_t> reads = made;
  reads.push_back(made[0]);
  g.AddOp(MakeOp("read", Phase::kBackward, reads, {}));
  g.ops[0].workspace_bytes = 3;
  g.ops[1].workspace_bytes = 5;
  ASSERT_TRUE(IndexGraph(g).ok());
  expect_copies(g);
  EXPECT_EQ(g.index.InputsOf(1).size(), 8u);
  EXPECT_TRUE(g.index.InputsOf(0).empty());
  EXPECT_TRUE(g.index.OutputsOf(1).empty());
}

TEST(IndexGraphTest, RejectsEmptyGraphs) {
  Graph g;
  g.name = "nothing";
  EXPECT_THAT(ErrorOf(g), HasSubstr("graph \"nothing\" has no ops"));
}

TEST(IndexGraphTest, RejectsDanglingIds) {
  Graph g = Small();
  g.ops[2].inputs.push_back(987);
  EXPECT_THAT(ErrorOf(g),
              HasSubstr("op 2 (g): input tensor 987 does not exist"));
  g = Small();
  g.ops[0].outputs.push_back(-1);
  EXPECT_THAT(ErrorOf(g), HasSubstr("output tensor -1 does not exist"));
}

TEST(IndexGraphTest, RejectsTensorsProducedTwice) {
  Graph g = Small();
  g.ops[2].outputs.push_back(2);
  EXPECT_THAT(ErrorOf(g), HasSubstr("op 2 (g): output tensor 2 (y) is "
                                    "already produced by op 1 (f)"));
}

TEST(IndexGraphTest, RejectsUseBeforeProduction) {
  Graph g = Small();
  std::swap(g.ops[1], g.ops[2]);  // g now reads y before f makes it
  EXPECT_THAT(ErrorOf(g), HasSubstr("before it is produced"));
}

TEST(IndexGraphTest, ReportsCyclesAsCycles) {
  Graph g = Small();
  g.ops[1].inputs.push_back(3);  // f reads z, which g makes from f's y
  std::string msg = ErrorOf(g);
  EXPECT_THAT(msg, HasSubstr("cycle"));
  EXPECT_THAT(msg, HasSubstr("op 1 (f)"));
  EXPECT_THAT(msg, HasSubstr("op 2 (g)"));
}

TEST(IndexGraphTest, RejectsSelfLoops) {
  Graph g = Small();
  g.ops[2].inputs.push_back(3);
  EXPECT_THAT(ErrorOf(g), HasSubstr("op 2 (g): reads its own output"));
}

TEST(IndexGraphTest, RejectsActivationsNobodyProduces) {
  Graph g = Small();
  g.AddTensor({.name = "ghost", .bytes = 1});
  g.ops[2].inputs.push_back(4);
  EXPECT_THAT(ErrorOf(g), HasSubstr("no op produces"));
}

TEST(IndexGraphTest, RejectsNegativeAndNonFiniteCosts) {
  Graph g = Small();
  g.tensors[2].bytes = -5;
  EXPECT_THAT(ErrorOf(g), HasSubstr("tensor 2 (y): size_bytes must be >= 0"));
  g = Small();
  g.ops[1].cost.flops = std::nan("");
  EXPECT_THAT(ErrorOf(g), HasSubstr("op 1 (f): cost.flops must be finite"));
  g = Small();
  g.ops[1].cost.flops = std::numeric_limits<double>::infinity();
  EXPECT_THAT(ErrorOf(g), HasSubstr("must be finite"));
  g = Small();
  g.ops[1].cost.flops = -1;
  EXPECT_THAT(ErrorOf(g), HasSubstr("cost.flops must be >= 0"));
  g = Small();
  g.ops[1].cost.duration_ns = -1;
  EXPECT_THAT(ErrorOf(g), HasSubstr("cost.duration_ns must be >= 0"));
  g = Small();
  g.ops[1].workspace_bytes = -1;
  EXPECT_THAT(ErrorOf(g), HasSubstr("workspace_bytes must be >= 0"));
}

TEST(IndexGraphTest, RejectsByteTotalsPastTwoToTheSixty) {
  Graph g = Small();
  g.tensors[1].bytes = std::numeric_limits<int64_t>::max() - 10;
  EXPECT_THAT(ErrorOf(g), HasSubstr("size_bytes makes the graph's bytes "
                                    "exceed 1152921504606846976 (2^60)"));
  g = Small();
  g.tensors[1].bytes = kMaxGraphBytes / 2;
  g.tensors[2].bytes = kMaxGraphBytes / 2 + 1;
  EXPECT_THAT(ErrorOf(g), HasSubstr("size_bytes makes the graph's bytes"));
  // Workspaces count too: the simulator adds them to what tasks hold (a
  // fuzzed workspace of 2^63 - 1 overflowed there).
  g = Small();
  g.ops[1].workspace_bytes = std::numeric_limits<int64_t>::max();
  EXPECT_THAT(ErrorOf(g), HasSubstr("workspace_bytes makes the graph's bytes "
                                    "exceed"));
}

TEST(IndexGraphTest, RejectsProducingStaticTensors) {
  Graph g = Small();
  g.ops[0].outputs.push_back(0);
  EXPECT_THAT(ErrorOf(g), HasSubstr("tensor 0 (w) is static"));
}

TEST(IndexGraphTest, RebuildsMayOnlyReadEarlierTensors) {
  Graph g = Small();
  g.tensors[1].rebuild = Rebuild{.inputs = {3}};
  EXPECT_THAT(ErrorOf(g), HasSubstr("is not produced before"));
  g = Small();
  g.tensors[3].rebuild = Rebuild{.inputs = {1}};
  EXPECT_TRUE(IndexGraph(g).ok());
}

// A chain of 10,000 forward ops and one backward op reading every tensor:
// enough loop iterations for the stop function to be asked a few times.
Graph LongChain() {
  Graph g;
  g.name = "chain";
  int32_t prev = kNone;
  std::vector<int32_t> all;
  for (int i = 0; i < 10'000; ++i) {
    const int32_t t = g.AddTensor({.name = "t", .bytes = 8});
    g.AddOp(MakeOp(
        "f", Phase::kForward,
        prev == kNone ? std::vector<int32_t>{} : std::vector<int32_t>{prev},
        {t}));
    all.push_back(t);
    prev = t;
  }
  g.AddOp(MakeOp("b", Phase::kBackward, all, {}));
  return g;
}

// Validation and indexing share one poller and one error: whichever of its
// questions the stop function says yes to, indexing stops with it.
TEST(IndexGraphTest, StopsWithOneErrorWhereverTheStopFunctionSaysSo) {
  Graph g = LongChain();
  int asked = 0;
  ASSERT_TRUE(IndexGraph(g, [&] { return ++asked < 0; }).ok());
  ASSERT_GE(asked, 10);  // over both halves' loops
  for (int yes_at = 1; yes_at <= asked; ++yes_at) {
    SCOPED_TRACE(yes_at);
    int calls = 0;
    const absl::Status s = IndexGraph(g, [&] { return ++calls == yes_at; });
    EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
    EXPECT_EQ(s.message(), "indexing the graph stopped");
    EXPECT_EQ(calls, yes_at);  // not asked again once it said so
  }
}

// The sizes docs/PERFORMANCE.md ("A very large graph, file to answer")
// gives: every pass walks these, a million of each on a 10^6-op graph.
// (`Op` was 128 bytes there; its boxed collective adds 8.)
TEST(GraphLayoutTest, TensorsOpsAndDecisionsAreCompact) {
  EXPECT_EQ(sizeof(Tensor), 80u);
  // 16 of these bytes are the kernel shape the efficiency tables read
  // (model/efficiency.h).
  EXPECT_EQ(sizeof(Op), 152u);
  // What a search copies per tensor and candidate; the explained facts
  // live apart (DecisionFacts).
  EXPECT_EQ(sizeof(Decision), 8u);
  EXPECT_EQ(sizeof(DecisionFacts), 24u);
}

// A built graph's names, dtypes and shapes live in blocks it shares with
// its copies: a copy outlives the original.
TEST(GraphLayoutTest, ACopyOutlivesTheOriginal) {
  absl::StatusOr<Graph> g = BuildWorkload("bert-large", {.layers = 1});
  ASSERT_TRUE(g.ok()) << g.status();
  const std::string name = g->tensors.back().name.str();
  const std::string dtype = g->tensors.back().dtype.str();
  const std::string op = g->ops.back().name.str();
  Graph copy = *g;
  *g = Graph();
  EXPECT_EQ(copy.tensors.back().name, name);
  EXPECT_EQ(copy.tensors.back().dtype, dtype);
  EXPECT_EQ(copy.ops.back().name, op);
  EXPECT_FALSE(dtype.empty());
}

// A cache of graphs charges each ApproxHeldBytes: within a tenth of the
// heap malloc counts for it (in its arenas and mapped blocks), on built
// graphs of a few layers to a few hundred, with and without collectives
// (2.2% at most, docs/operations.md's --workload_graphs_mb). Under the
// sanitizers malloc is theirs, and counts nothing.
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
TEST(GraphLayoutTest, ApproxHeldBytesIsMallocsCount) {
  const auto in_use = [] {
    const struct mallinfo2 m = mallinfo2();
    return static_cast<double>(m.uordblks + m.hblkhd);
  };
  const auto check = [&](const std::string& name, const WorkloadOverrides& o) {
    // Once first, so that what building sets up once is not counted.
    ASSERT_TRUE(BuildWorkload(name, o).ok());
    const double before = in_use();
    absl::StatusOr<Graph> g = BuildWorkload(name, o);
    ASSERT_TRUE(g.ok()) << g.status();
    const double held = in_use() - before;
    const double approx = static_cast<double>(ApproxHeldBytes(*g));
    EXPECT_GT(approx, 0.9 * held) << name << ", " << g->ops.size() << " ops";
    EXPECT_LT(approx, 1.1 * held) << name << ", " << g->ops.size() << " ops";
  };
  for (const char* name : {"gpt2-xl", "llama-7b", "bert-large"}) {
    for (const WorkloadOverrides& o :
         {WorkloadOverrides{}, WorkloadOverrides{.layers = 4},
          WorkloadOverrides{.layers = 200},
          WorkloadOverrides{.data_parallel = 8}}) {
      check(name, o);
    }
  }
  // Collectives, and a rank's graph of tensor parallelism.
  check("llama-7b", {.fully_sharded = 8});
  check("llama-7b", {.tensor_parallel = 2, .rank = 1});
}
#endif

// docs/operations.md (--workload_graphs_mb): gpt2-xl's graph is charged
// about 0.6 MiB.
TEST(GraphLayoutTest, Gpt2XlIsChargedAboutSixTenthsOfAMebibyte) {
  absl::StatusOr<Graph> g = BuildWorkload("gpt2-xl", {});
  ASSERT_TRUE(g.ok()) << g.status();
  const double mib = static_cast<double>(ApproxHeldBytes(*g)) / (1 << 20);
  EXPECT_GE(mib, 0.55);
  EXPECT_LT(mib, 0.65);
}

}  // namespace
}  // namespace slackswap
