// docs/FIDELITY.md's golden test: every row's simulated figure is what the
// cost model and the simulator give for that row's configuration now, its
// error is simulated against measured, and its status says whether that
// error is inside the target (5% for host-link copies, 10% for the rest) or
// gives the reason it is not. Every row of the doc has its configuration
// here and every configuration here has its row.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "model/cost_model.h"
#include "model/graph.h"
#include "model/hardware.h"
#include "model/node.h"
#include "model/plan.h"
#include "model/transformer.h"
#include "model/workloads.h"
#include "sim/node_simulator.h"
#include "sim/schedule.h"
#include "sim/simulator.h"
#include "testing/doc_tables.h"
#include "testing/reference.h"

namespace slackswap {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

Hardware Profile(const std::string& name) {
  absl::StatusOr<Hardware> hw = FindHardware(name);
  EXPECT_TRUE(hw.ok()) << hw.status();
  return hw.ok() ? *hw : Hardware{};
}

// --- Host link: a 1 GiB pinned copy, its latency included. -----------------

double CopyGbps(const std::string& profile, Direction dir, bool both_busy) {
  const Hardware hw = Profile(profile);
  return static_cast<double>(kGiB) /
         static_cast<double>(hw.TransferNs(kGiB, dir, both_busy));
}

// --- Kernels: one op, no launch, its FLOPs over its time. -------------------

double OpTflops(const Hardware& hw, OpKind kind, const KernelShape& shape,
                Phase phase) {
  OpCost c;
  c.kind = kind;
  c.flops = 1e13;
  c.bytes_accessed = 1;
  c.kernels = 0;
  c.shape = shape;
  absl::StatusOr<int64_t> ns = CostNs(c, phase, hw);
  EXPECT_TRUE(ns.ok()) << ns.status();
  return ns.ok() ? c.flops / static_cast<double>(*ns) / 1e3 : 0;
}

// FlashAttention's forward+backward rate as its benchmark counts it:
// 3.5 x the forward FLOPs over the forward and backward times.
double AttentionBothTflops(const std::string& profile,
                           const KernelShape& shape) {
  const Hardware hw = Profile(profile);
  const double fwd =
      OpTflops(hw, OpKind::kFlashAttention, shape, Phase::kForward);
  const double bwd =
      OpTflops(hw, OpKind::kFlashAttention, shape, Phase::kBackward);
  return 3.5 / (1 / fwd + 2.5 / bwd);
}

double AttentionTflops(const std::string& profile, const KernelShape& shape,
                       Phase phase) {
  return OpTflops(Profile(profile), OpKind::kFlashAttention, shape, phase);
}

double GemmTflops(const std::string& profile, int32_t m, int32_t n, int32_t k) {
  return OpTflops(Profile(profile), OpKind::kMatmul, {m, n, k, false},
                  Phase::kForward);
}

// --- Memory: a memory-bound op over 1 GiB, no launch. -----------------------

double HbmGbps(const std::string& profile) {
  OpCost c;
  c.bytes_accessed = kGiB;
  c.kernels = 0;
  absl::StatusOr<int64_t> ns = CostNs(c, Phase::kForward, Profile(profile));
  EXPECT_TRUE(ns.ok()) << ns.status();
  return ns.ok() ? static_cast<double>(kGiB) / static_cast<double>(*ns) : 0;
}

// --- Training runs: the step with every activation kept. --------------------

// The step time of `c` on one GPU of `profile`, or, with `node`, on all of
// the node's GPUs (the layout's collectives on its links), in seconds.
double StepSeconds(const TransformerConfig& c, const std::string& profile,
                   const std::string& node_name = "") {
  absl::StatusOr<Graph> g = BuildTransformer(c);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok() || !IndexGraph(*g).ok()) return 0;
  if (node_name.empty()) {
    absl::StatusOr<SimResult> r =
        Simulate(*g, Profile(profile), Plan::KeepAll(*g), SimOptions{});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? static_cast<double>(r->step_ns) / 1e9 : 0;
  }
  absl::StatusOr<Node> node = FindNode(node_name);
  EXPECT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->gpu.name, profile);
  absl::StatusOr<OpDurations> d = ComputeDurations(*g, node->gpu);
  EXPECT_TRUE(d.ok()) << d.status();
  absl::StatusOr<Schedule> s = LowerPlan(*g, Plan::KeepAll(*g), *d);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!d.ok() || !s.ok()) return 0;
  std::vector<RankStep> ranks;
  for (int32_t gpu = 0; gpu < LayoutRanks(c); ++gpu) {
    ranks.push_back(
        {.gpu = gpu, .graph = &*g, .durations = &*d, .schedule = &*s});
  }
  absl::StatusOr<NodeSimResult> r = SimulateNode(*node, ranks, SimOptions{});
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? static_cast<double>(r->step_ns) / 1e9 : 0;
}

TransformerConfig Workload(const std::string& name) {
  absl::StatusOr<TransformerConfig> c = FindWorkload(name);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : TransformerConfig{};
}

// A GPT-style decoder (pre-LayerNorm, GELU MLP of 4h, learned positions)
// as the FlashAttention and MosaicML training scripts define theirs.
TransformerConfig Decoder(const std::string& name, int32_t layers,
                          int64_t hidden, int64_t heads, int64_t vocab,
                          int64_t seq, int64_t batch) {
  TransformerConfig c;
  c.name = name;
  c.arch = Arch::kDecoderPreNorm;
  c.layers = layers;
  c.hidden = hidden;
  c.heads = heads;
  c.ffn = 4 * hidden;
  c.vocab = vocab;
  c.seq = seq;
  c.batch = batch;
  c.activation = Activation::kGelu;
  c.norm = Norm::kLayerNorm;
  c.dropout = false;
  c.attention = Attention::kFlash;
  return c;
}

TransformerConfig Sharded(TransformerConfig c, int32_t ranks) {
  c.fully_sharded = ranks;
  return c;
}
TransformerConfig Replicated(TransformerConfig c, int32_t ranks) {
  c.data_parallel = ranks;
  return c;
}

double SeqPerS(const TransformerConfig& c, const std::string& profile) {
  return static_cast<double>(c.batch) / StepSeconds(c, profile);
}

double TokensPerGpuPerS(const TransformerConfig& c, const std::string& profile,
                        const std::string& node) {
  return static_cast<double>(c.batch * c.seq) / StepSeconds(c, profile, node);
}

// FlashAttention's training README counts model FLOPs per token as
// Megatron's formula x 3/4: 72 l h^2 (1 + s / 6h + V / 16 l h).
double FlashReadmeTflopsPerGpu(const TransformerConfig& c,
                               const std::string& profile,
                               const std::string& node) {
  const double l = c.layers, h = c.hidden, s = c.seq, v = c.vocab;
  const double per_token =
      72 * l * h * h * (1 + s / (6 * h) + v / (16 * l * h));
  return TokensPerGpuPerS(c, profile, node) * per_token / 1e12;
}

// The FlashAttention-2 paper's count per sequence: 6 s N + 12 l h s^2 (N the
// parameters, attention not halved for causal).
double Fa2PaperTflopsPerGpu(const TransformerConfig& c, double params,
                            const std::string& profile,
                            const std::string& node) {
  const double s = c.seq;
  const double per_seq = 6 * s * params + 12.0 * c.layers * c.hidden * s * s;
  return TokensPerGpuPerS(c, profile, node) / s * per_seq / 1e12;
}

// Each row's configuration, by its id in docs/FIDELITY.md.
const std::map<std::string, std::function<double()>>& Rows() {
  static const auto* rows = new std::map<std::string, std::function<double()>>{
      // Host link.
      {"H1",
       [] { return CopyGbps("a100-80gb-pcie4", Direction::kH2D, false); }},
      {"H2",
       [] { return CopyGbps("a100-80gb-pcie4", Direction::kD2H, false); }},
      {"H3", [] { return CopyGbps("a100-80gb-pcie4", Direction::kD2H, true); }},
      {"H4", [] { return CopyGbps("a100-80gb-pcie4", Direction::kH2D, true); }},
      {"H5",
       [] { return CopyGbps("a100-80gb-pcie4", Direction::kH2D, false); }},
      {"H6", [] { return CopyGbps("a100-80gb-pcie4", Direction::kH2D, true); }},
      {"H7", [] { return CopyGbps("a100-80gb-pcie4", Direction::kD2H, true); }},
      {"H8",
       [] { return CopyGbps("a100-40gb-pcie4", Direction::kH2D, false); }},
      {"H9", [] { return CopyGbps("h100-pcie5", Direction::kH2D, false); }},
      {"H10", [] { return CopyGbps("h100-pcie5", Direction::kD2H, false); }},
      {"H11",
       [] {
         return CopyGbps("h100-pcie5", Direction::kH2D, true) +
                CopyGbps("h100-pcie5", Direction::kD2H, true);
       }},
      {"H12", [] { return CopyGbps("h100-pcie5", Direction::kH2D, false); }},
      // Attention kernels (FlashAttention-2, hidden 2048).
      {"K1",
       [] {
         return AttentionBothTflops("a100-80gb-pcie4", {512, 512, 64, false});
       }},
      {"K2",
       [] {
         return AttentionBothTflops("a100-80gb-pcie4", {1024, 1024, 64, true});
       }},
      {"K3",
       [] {
         return AttentionBothTflops("a100-80gb-pcie4", {2048, 2048, 128, true});
       }},
      {"K4",
       [] {
         return AttentionTflops("gh200-c2c", {512, 512, 64, false},
                                Phase::kForward);
       }},
      {"K5",
       [] {
         return AttentionTflops("gh200-c2c", {2048, 2048, 64, false},
                                Phase::kForward);
       }},
      {"K6",
       [] {
         return AttentionTflops("gh200-c2c", {1024, 1024, 64, true},
                                Phase::kForward);
       }},
      {"K7",
       [] {
         return AttentionTflops("gh200-c2c", {2048, 2048, 128, false},
                                Phase::kForward);
       }},
      {"K8",
       [] {
         return AttentionTflops("gh200-c2c", {2048, 2048, 128, true},
                                Phase::kForward);
       }},
      {"K9",
       [] {
         return AttentionTflops("gh200-c2c", {16384, 16384, 128, true},
                                Phase::kForward);
       }},
      {"K10",
       [] {
         return AttentionTflops("gh200-c2c", {8192, 8192, 128, false},
                                Phase::kForward);
       }},
      {"K11",
       [] {
         return AttentionTflops("gh200-c2c", {8192, 8192, 128, false},
                                Phase::kBackward);
       }},
      {"K12",
       [] {
         return AttentionTflops("gh200-c2c", {8192, 8192, 128, true},
                                Phase::kBackward);
       }},
      // GEMMs.
      {"G1", [] { return GemmTflops("a100-80gb-pcie4", 1024, 5120, 10240); }},
      {"G2", [] { return GemmTflops("a100-80gb-pcie4", 2048, 6144, 5120); }},
      {"G3", [] { return GemmTflops("a100-40gb-pcie4", 4096, 4096, 4096); }},
      {"G4", [] { return GemmTflops("a100-80gb-pcie4", 8192, 8192, 8192); }},
      {"G5", [] { return GemmTflops("a100-80gb-pcie4", 2048, 2048, 2048); }},
      {"G6", [] { return GemmTflops("h100-pcie5", 4096, 4096, 4096); }},
      {"G7", [] { return GemmTflops("gh200-c2c", 2048, 13312, 2048); }},
      // Memory.
      {"M1", [] { return HbmGbps("a100-80gb-pcie4"); }},
      {"M2", [] { return HbmGbps("a100-80gb-pcie4"); }},
      {"M3", [] { return HbmGbps("a100-40gb-pcie4"); }},
      // Training runs.
      {"T1", [] { return SeqPerS(Workload("bert-large"), "a100-80gb-pcie4"); }},
      {"T2", [] { return SeqPerS(Workload("bert-large"), "a100-80gb-pcie4"); }},
      {"T3",
       [] {
         TransformerConfig c = Workload("bert-large");
         c.batch = 24;
         return SeqPerS(c, "a100-40gb-pcie4");
       }},
      {"T4",
       [] {
         return FlashReadmeTflopsPerGpu(Replicated(Workload("gpt2-xl"), 8),
                                        "a100-80gb-pcie4", "dgx-a100-80gb");
       }},
      {"T5",
       [] {
         return TokensPerGpuPerS(
             Replicated(Decoder("gpt3-1.3b", 24, 2048, 16, 50257, 2048, 8), 8),
             "a100-80gb-pcie4", "dgx-a100-80gb");
       }},
      {"T6",
       [] {
         return Fa2PaperTflopsPerGpu(
             Replicated(Decoder("gpt3-2.7b", 32, 2560, 32, 50257, 2048, 8), 8),
             2.7e9, "a100-80gb-pcie4", "dgx-a100-80gb");
       }},
      {"T7",
       [] {
         return TokensPerGpuPerS(
             Sharded(Decoder("mpt-1b", 24, 2048, 16, 50368, 1024, 18), 8),
             "a100-80gb-pcie4", "dgx-a100-80gb");
       }},
      {"T8",
       [] {
         return TokensPerGpuPerS(
             Sharded(Decoder("mpt-1b", 24, 2048, 16, 50368, 2048, 14), 8),
             "a100-80gb-pcie4", "dgx-a100-80gb");
       }},
      {"T9",
       [] {
         return TokensPerGpuPerS(
             Sharded(Decoder("mpt-7b", 32, 4096, 32, 50432, 2048, 6), 8),
             "a100-80gb-pcie4", "dgx-a100-80gb");
       }},
  };
  return *rows;
}

// "25-26" (either dash) or one number, thousands separators allowed.
bool ParseMeasured(const std::string& cell, double* lo, double* hi) {
  std::string s = absl::StrReplaceAll(cell, {{",", ""}, {"–", "-"}});
  std::vector<std::string> parts = absl::StrSplit(s, '-');
  if (parts.size() == 1) {
    if (!absl::SimpleAtod(parts[0], lo)) return false;
    *hi = *lo;
    return true;
  }
  return parts.size() == 2 && absl::SimpleAtod(parts[0], lo) &&
         absl::SimpleAtod(parts[1], hi) && *lo <= *hi;
}

// Relative error against the nearest end of the measured range (0 inside).
double RelativeError(double simulated, double lo, double hi) {
  double error = 0;
  if (simulated < lo) error = simulated / lo - 1;
  if (simulated > hi) error = simulated / hi - 1;
  // Below the doc's 0.1% it is 0, not "-0.0%".
  return std::fabs(error) < 5e-4 ? 0 : error;
}

struct Section {
  const char* header;
  const char* summary;  // its row in the summary table
  double target;        // the largest |error| "within" may claim
};

TEST(FidelityDocTest, EverySimulatedFigureAndErrorIsTheModelsNow) {
  const std::string doc = testutil::SourceFile("docs/FIDELITY.md");
  std::map<std::string, bool> documented;
  std::map<std::string, std::vector<std::string>> summary;
  for (const std::vector<std::string>& row :
       testutil::MarkdownTable(doc, "| table | rows | within its target |")) {
    summary[row[0]] = row;
  }
  for (const Section& section :
       {Section{"| # | host link |", "host link (5%)", 0.05},
        Section{"| # | kernel |", "kernel (10%)", 0.10},
        Section{"| # | memory |", "memory (10%)", 0.10},
        Section{"| # | training run |", "training run (10%)", 0.10}}) {
    const std::vector<std::vector<std::string>> rows =
        testutil::MarkdownTable(doc, section.header);
    EXPECT_FALSE(rows.empty()) << section.header;
    int within_count = 0;
    for (const std::vector<std::string>& row : rows) {
      // #, what, hardware, conditions, source, unit, measured, profile,
      // simulated, error, status
      ASSERT_EQ(row.size(), 11u) << row[0];
      const std::string& id = row[0];
      SCOPED_TRACE(id);
      documented[id] = true;
      auto it = Rows().find(id);
      ASSERT_NE(it, Rows().end()) << "no configuration for row " << id;
      const double simulated = it->second();
      double lo = 0, hi = 0;
      ASSERT_TRUE(ParseMeasured(row[6], &lo, &hi)) << row[6];
      const double error = RelativeError(simulated, lo, hi);
      const std::string want_sim = absl::StrFormat("%.1f", simulated);
      const std::string want_err = absl::StrFormat("%+.1f%%", 100 * error);
      std::string got_sim = absl::StrReplaceAll(row[8], {{",", ""}});
      EXPECT_EQ(got_sim, want_sim)
          << "| " << id << " ... | " << want_sim << " | " << want_err << " |";
      EXPECT_EQ(row[9], want_err);
      const bool within = std::fabs(error) <= section.target + 5e-4;
      within_count += within ? 1 : 0;
      if (within) {
        EXPECT_TRUE(absl::StartsWith(row[10], "within"))
            << "error " << want_err << " is within the target: " << row[10];
      } else {
        EXPECT_TRUE(absl::StartsWith(row[10], "outside: ") &&
                    row[10].size() > std::string("outside: ").size())
            << "error " << want_err << " is outside the target; the row "
            << "must say why: " << row[10];
      }
    }
    EXPECT_EQ(
        summary[section.summary],
        std::vector<std::string>({section.summary, std::to_string(rows.size()),
                                  std::to_string(within_count)}))
        << "the summary table";
  }
  for (const auto& [id, unused] : Rows()) {
    EXPECT_TRUE(documented.count(id)) << "row " << id << " is not in the doc";
  }
}

TEST(FidelityDocTest, WhatMovedIsTheFrozenModelAgainstTheTables) {
  const std::vector<std::vector<std::string>> rows = testutil::MarkdownTable(
      testutil::SourceFile("docs/FIDELITY.md"), "| workload | profile |");
  EXPECT_EQ(rows.size(), WorkloadNames().size() * HardwareNames().size());
  for (const std::vector<std::string>& row : rows) {
    ASSERT_EQ(row.size(), 5u);
    SCOPED_TRACE(row[0] + " on " + row[1]);
    absl::StatusOr<Graph> g = BuildWorkload(row[0], {});
    ASSERT_TRUE(g.ok()) << g.status();
    const Hardware hw = Profile(row[1]);
    absl::StatusOr<OpDurations> frozen =
        ComputeDurations(*g, testutil::FrozenCostModel(hw));
    absl::StatusOr<OpDurations> tables = ComputeDurations(*g, hw);
    ASSERT_TRUE(frozen.ok() && tables.ok());
    const double before = static_cast<double>(frozen->total_ns) / 1e6;
    const double after = static_cast<double>(tables->total_ns) / 1e6;
    const std::vector<std::string> want = {
        absl::StrFormat("%.1f", before), absl::StrFormat("%.1f", after),
        absl::StrFormat("%+.1f%%", 100 * (after / before - 1))};
    EXPECT_EQ(std::vector<std::string>(row.begin() + 2, row.end()), want)
        << "| " << row[0] << " | " << row[1] << " | " << want[0] << " | "
        << want[1] << " | " << want[2] << " |";
  }
}

}  // namespace
}  // namespace slackswap
