// Tensor parallelism in the transformer generator (model/transformer.h):
// what each rank holds, computes and reduces, checked against the
// single-GPU graph and the arithmetic of Megatron-LM's split, and the
// groups of tensor x data parallel layouts.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/graph.h"
#include "model/transformer.h"
#include "model/workloads.h"
#include "testing/graph_builder.h"

namespace slackswap {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TransformerConfig Config(const std::string& name, int32_t layers,
                         int32_t tensor_parallel) {
  TransformerConfig c = *FindWorkload(name);
  c.layers = layers;
  c.tensor_parallel = tensor_parallel;
  return c;
}

Graph Build(const TransformerConfig& c) {
  absl::StatusOr<Graph> g = BuildTransformer(c);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : Graph{};
}

int32_t TensorNamed(const Graph& g, absl::string_view name) {
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    if (g.tensors[t].name.view() == name) return static_cast<int32_t>(t);
  }
  ADD_FAILURE() << "no tensor " << name;
  return kNone;
}

int32_t OpNamed(const Graph& g, absl::string_view name) {
  for (size_t o = 0; o < g.ops.size(); ++o) {
    if (g.ops[o].name.view() == name) return static_cast<int32_t>(o);
  }
  ADD_FAILURE() << "no op " << name;
  return kNone;
}

// Parameters that Megatron-LM replicates on every tensor-parallel rank:
// norms, position and token-type tables, the BERT MLM transform and NSP.
bool Replicated(absl::string_view name) {
  for (absl::string_view part :
       {"norm", "ln_", "layernorm", "embeddings.position",
        "embeddings.token_type", "mlm_transform", "nsp_"}) {
    if (absl::StrContains(name, part)) return true;
  }
  return false;
}

TEST(TransformerTensorParallelTest, EachRankHoldsItsSliceOfTheWeights) {
  for (const char* name : {"bert-large", "llama-7b"}) {
    for (int32_t tp : {2, 4, 8}) {
      SCOPED_TRACE(absl::StrCat(name, " tp=", tp));
      const TransformerConfig c = Config(name, 2, tp);
      const Graph single = Build(Config(name, 2, 1));
      const Graph split = Build(c);
      for (const Tensor& p : single.tensors) {
        if (p.kind != TensorKind::kParameter) continue;
        const std::string pname(p.name.view());
        const int64_t bytes = split.tensors[TensorNamed(split, pname)].bytes;
        if (Replicated(pname)) {
          EXPECT_EQ(bytes, p.bytes) << pname;
        } else if (pname == "embeddings.word") {
          // Split by vocabulary, the last slice padded as Megatron pads.
          EXPECT_EQ(bytes, (c.vocab + tp - 1) / tp * c.hidden * c.dtype_bytes);
        } else {
          EXPECT_EQ(bytes * tp, p.bytes) << pname;
        }
      }
      EXPECT_THAT(split.description,
                  HasSubstr(absl::StrCat("tensor parallel over ", tp,
                                         " ranks (Megatron)")));
    }
  }
}

TEST(TransformerTensorParallelTest, AttentionAndMlpComputeTheirShare) {
  const int32_t tp = 4;
  const TransformerConfig c = Config("llama-7b", 2, tp);
  const Graph single = Build(Config("llama-7b", 2, 1));
  const Graph split = Build(c);
  const int64_t tokens = c.batch * c.seq;
  for (const char* op :
       {"L1.qkv_proj", "L1.flash_attn", "L1.o_proj", "L1.gate_up_proj",
        "L1.silu", "L1.swiglu_mul", "L1.down_proj", "L1.rope", "lm_head",
        "L1.qkv_proj.bwd", "L1.flash_attn.bwd", "L1.down_proj.bwd"}) {
    SCOPED_TRACE(op);
    EXPECT_DOUBLE_EQ(split.ops[OpNamed(split, op)].cost.flops * tp,
                     single.ops[OpNamed(single, op)].cost.flops);
  }
  // The norms and residual adds run on the whole [tokens, hidden] tensor.
  for (const char* op : {"L1.attn_norm", "L1.attn_residual_add", "final_norm",
                         "L1.mlp_norm.bwd"}) {
    SCOPED_TRACE(op);
    EXPECT_DOUBLE_EQ(split.ops[OpNamed(split, op)].cost.flops,
                     single.ops[OpNamed(single, op)].cost.flops);
  }
  for (const char* t : {"L1.q", "L1.k_r", "L1.o", "L1.gate", "L1.hmul"}) {
    EXPECT_EQ(split.tensors[TensorNamed(split, t)].bytes * tp,
              single.tensors[TensorNamed(single, t)].bytes)
        << t;
  }
  EXPECT_EQ(split.tensors[TensorNamed(split, "L1.lse")].bytes * tp,
            single.tensors[TensorNamed(single, "L1.lse")].bytes);
  EXPECT_EQ(split.tensors[TensorNamed(split, "L1.r1")].bytes,
            tokens * c.hidden * c.dtype_bytes);
  EXPECT_EQ(split.tensors[TensorNamed(split, "probs")].bytes,
            tokens * c.vocab / tp * c.dtype_bytes);
}

TEST(TransformerTensorParallelTest, AllReducesWhereMegatronPutsThem) {
  for (const char* name : {"bert-large", "llama-7b"}) {
    SCOPED_TRACE(name);
    const int32_t tp = 2, layers = 3;
    const TransformerConfig c = Config(name, layers, tp);
    const Graph g = Build(c);
    const int64_t activation = c.batch * c.seq * c.hidden * c.dtype_bytes;
    int forward = 0, backward = 0, stats = 0;
    for (int32_t o : testutil::CollectiveOps(g)) {
      const Op& op = g.ops[o];
      SCOPED_TRACE(op.name.view());
      EXPECT_EQ(op.collective->kind, CollectiveKind::kAllReduce);
      EXPECT_EQ(op.collective->algorithm, CollectiveAlgorithm::kRing);
      EXPECT_THAT(op.collective->group, ElementsAre(0, 1));
      ASSERT_EQ(op.inputs.size(), 1u);
      ASSERT_EQ(op.outputs.size(), 1u);
      const Tensor& in = g.tensors[op.inputs[0]];
      const Tensor& out = g.tensors[op.outputs[0]];
      if (absl::EndsWith(op.name.view(), ".stats")) {
        // Max, sum of exponentials and target logit per row, fp32.
        ++stats;
        EXPECT_EQ(out.bytes, op.collective->bytes);
        EXPECT_EQ(op.collective->bytes % (3 * 4), 0);
        // The loss waits for them.
        EXPECT_EQ(g.index.last_use[op.outputs[0]], o + 1);
        continue;
      }
      // BERT's MLM head runs on the masked positions only.
      const bool mlm = absl::StrContains(op.name.view(), "mlm_decoder");
      EXPECT_EQ(op.collective->bytes,
                mlm ? c.max_pred_per_seq * c.batch * c.hidden * c.dtype_bytes
                    : activation);
      EXPECT_EQ(in.bytes, op.collective->bytes);
      EXPECT_EQ(out.bytes, op.collective->bytes);
      if (op.phase == Phase::kForward) {
        // A row-parallel projection's (or the embedding lookup's) partial
        // sum, read by nothing else.
        ++forward;
        EXPECT_TRUE(absl::EndsWith(in.name.view(), "_partial"));
        EXPECT_EQ(g.index.producer[op.inputs[0]], o - 1);
        EXPECT_EQ(g.index.last_use[op.inputs[0]], o);
      } else {
        // A column-parallel projection's input gradient: the next op (the
        // norm's backward, or the last backward of the MLM head) reads the
        // reduced one, never the partial.
        ++backward;
        EXPECT_EQ(in.kind, TensorKind::kGradient);
        EXPECT_EQ(g.index.producer[op.inputs[0]], o - 1);
        EXPECT_EQ(g.index.last_use[op.inputs[0]], o);
        EXPECT_GT(g.index.last_use[op.outputs[0]], o);
      }
    }
    // Per layer: after the attention and the MLP, in forward (g) and in
    // backward (f); the embeddings' lookup (forward) and the head's input
    // gradient (backward); one statistics reduction per loss.
    EXPECT_EQ(forward, 2 * layers + 1);
    EXPECT_EQ(backward, 2 * layers + 1);
    EXPECT_EQ(stats, 1);
    // The residual add reads the reduced sum.
    const std::string proj =
        c.arch == Arch::kEncoderPostNorm ? "attn_out_proj" : "o_proj";
    const int32_t reduce = OpNamed(g, absl::StrCat("tp.all_reduce.L1.", proj));
    const int32_t add = OpNamed(g, "L1.attn_residual_add");
    const int32_t reduced = g.ops[reduce].outputs[0];
    // BERT drops out the reduced sum first.
    EXPECT_TRUE(g.index.last_use[reduced] == add ||
                g.ops[g.index.last_use[reduced]].name.view() ==
                    "L1.attn_resid_dropout");
  }
}

TEST(TransformerTensorParallelTest, SavedActivationsShrinkOnlyInsideTheSplit) {
  const Graph single = Build(Config("llama-7b", 2, 1));
  const Graph split = Build(Config("llama-7b", 2, 8));
  EXPECT_LT(split.index.saved_bytes, single.index.saved_bytes);
  // The residual stream and the norms' inputs stay whole.
  int64_t whole = 0, whole_single = 0;
  for (int32_t t : single.index.saved) {
    const std::string name(single.tensors[t].name.view());
    if (absl::EndsWith(name, ".r1") || absl::EndsWith(name, ".xn") ||
        absl::EndsWith(name, ".xn2")) {
      whole_single += single.tensors[t].bytes;
      whole += split.tensors[TensorNamed(split, name)].bytes;
    }
  }
  EXPECT_GT(whole, 0);
  EXPECT_EQ(whole, whole_single);
}

TEST(TransformerTensorParallelTest, LayoutGroupsPutTensorParallelInnermost) {
  TransformerConfig c = Config("llama-7b", 1, 2);
  c.data_parallel = 4;
  EXPECT_EQ(LayoutRanks(c), 8);
  EXPECT_TRUE(RanksDiffer(c));
  const LayoutGroups g5 = GroupsOf(c, 5);
  EXPECT_THAT(g5.tensor_parallel, ElementsAre(4, 5));
  EXPECT_THAT(g5.data_parallel, ElementsAre(1, 3, 5, 7));
  const LayoutGroups g0 = GroupsOf(c, 0);
  EXPECT_THAT(g0.tensor_parallel, ElementsAre(0, 1));
  EXPECT_THAT(g0.data_parallel, ElementsAre(0, 2, 4, 6));
  // Either alone: every rank runs rank 0's graph.
  c.tensor_parallel = 1;
  EXPECT_FALSE(RanksDiffer(c));
  c.tensor_parallel = 8;
  c.data_parallel = 1;
  EXPECT_FALSE(RanksDiffer(c));
  EXPECT_EQ(LayoutRanks(c), 8);
}

// Tensor x data parallel: every rank's graph is rank 0's but for its
// collectives' groups, which follow GroupsOf; DDP's buckets hold the rank's
// slice of the parameters.
TEST(TransformerTensorParallelTest, TimesDataParallelAndSharded) {
  for (bool sharded : {false, true}) {
    SCOPED_TRACE(sharded ? "fsdp" : "ddp");
    TransformerConfig c = Config("llama-7b", 2, 2);
    (sharded ? c.fully_sharded : c.data_parallel) = 4;
    std::vector<Graph> ranks;
    for (int32_t r = 0; r < 8; ++r) {
      c.rank = r;
      ranks.push_back(Build(c));
    }
    EXPECT_THAT(ranks[3].description, HasSubstr(": rank 3 of 8"));
    int64_t param_bytes = 0;
    for (const Tensor& t : ranks[0].tensors) {
      if (t.kind == TensorKind::kParameter &&
          !absl::StartsWith(t.name.view(), "fsdp.")) {
        param_bytes += t.bytes;
      }
    }
    for (int32_t r = 0; r < 8; ++r) {
      SCOPED_TRACE(absl::StrCat("rank ", r));
      const Graph& g = ranks[r];
      ASSERT_EQ(g.ops.size(), ranks[0].ops.size());
      ASSERT_EQ(g.tensors.size(), ranks[0].tensors.size());
      const LayoutGroups want = GroupsOf(c, r);
      int64_t reduced = 0, data_collectives = 0;
      for (size_t o = 0; o < g.ops.size(); ++o) {
        const Op& op = g.ops[o];
        EXPECT_EQ(op.name.view(), ranks[0].ops[o].name.view());
        EXPECT_EQ(op.inputs, ranks[0].ops[o].inputs);
        if (!op.collective.has_value()) continue;
        const bool tp = absl::StartsWith(op.name.view(), "tp.");
        EXPECT_EQ(op.collective->group,
                  tp ? want.tensor_parallel : want.data_parallel)
            << op.name.view();
        EXPECT_EQ(op.collective->bytes, ranks[0].ops[o].collective->bytes);
        if (tp) continue;
        ++data_collectives;
        if (op.collective->kind != CollectiveKind::kAllGather) {
          reduced += op.collective->bytes;
        }
      }
      EXPECT_GT(data_collectives, 0);
      if (!sharded) {
        // DDP all-reduces this rank's slice of every parameter's gradient.
        EXPECT_EQ(reduced, param_bytes);
      }
    }
    if (sharded) {
      // Each rank's slice sharded four ways: a layer's qkv weight.
      const TransformerConfig one = Config("llama-7b", 2, 1);
      const int64_t qkv = one.hidden * 3 * one.hidden * one.dtype_bytes;
      EXPECT_EQ(
          ranks[0].tensors[TensorNamed(ranks[0], "L0.qkv_proj.weight")].bytes,
          qkv / 2 / 4);
    }
  }
}

TEST(TransformerTensorParallelTest, RefusesLayoutsThatDoNotSplit) {
  TransformerConfig c = Config("gpt2-xl", 1, 0);
  auto expect_refused = [&](const std::string& what) {
    const absl::Status s = ValidateTransformerConfig(c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << what;
    EXPECT_THAT(std::string(s.message()), HasSubstr(what));
    EXPECT_FALSE(BuildTransformer(c).ok());
  };
  expect_refused("tensor_parallel must be in [1, 64] ranks, got 0");
  c.tensor_parallel = 65;
  expect_refused("tensor_parallel must be in [1, 64] ranks, got 65");
  // GPT-2 XL has 25 heads.
  c.tensor_parallel = 2;
  expect_refused("tensor_parallel (2) must divide heads (25) and ffn (6400)");
  c.tensor_parallel = 5;
  EXPECT_TRUE(ValidateTransformerConfig(c).ok());
  c.data_parallel = 13;
  expect_refused("tensor_parallel x data_parallel is 65 ranks; at most 64");
  c.data_parallel = 2;
  c.rank = 10;
  expect_refused("rank must be in [0, 10) (the layout's ranks), got 10");
  c.rank = -1;
  expect_refused("got -1");
  c.rank = 9;
  EXPECT_TRUE(BuildTransformer(c).ok());
}

}  // namespace
}  // namespace slackswap
