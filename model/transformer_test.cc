#include "model/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "gtest/gtest.h"
#include "model/graph.h"
#include "model/workloads.h"
#include "testing/graph_builder.h"
#include "testing/reference.h"

namespace slackswap {
namespace {

using ::google::protobuf::ListValue;
using ::google::protobuf::Struct;
using ::google::protobuf::Value;
using ::slackswap::testutil::At;
using ::slackswap::testutil::Number;
using ::slackswap::testutil::Reference;
using ::testing::HasSubstr;

constexpr double kTolerance = 0.02;

// |got - want| <= 2% of want (exact when want is 0).
::testing::AssertionResult Within2Pct(double got, double want) {
  if (std::fabs(got - want) <= kTolerance * std::fabs(want)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "got " << got << ", want " << want << " (off by "
         << (want == 0 ? 0 : 100 * (got - want) / want) << "%)";
}

const Struct& Variant(const std::string& model, const std::string& att) {
  return At(Reference(), {"models", model, "attention", att}).struct_value();
}

const ListValue& Ops(const Struct& variant, const std::string& section) {
  return variant.fields().at(section).list_value();
}

double Field(const Struct& s, const std::string& key) {
  return s.fields().at(key).number_value();
}

std::string Str(const Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  return it == s.fields().end() ? "" : it->second.string_value();
}

Graph BuildIndexed(const std::string& model, const std::string& att) {
  absl::StatusOr<TransformerConfig> c = FindWorkload(model);
  EXPECT_TRUE(c.ok()) << c.status();
  absl::StatusOr<Attention> a = ParseAttention(att);
  EXPECT_TRUE(a.ok()) << a.status();
  c->attention = *a;
  absl::StatusOr<Graph> g = BuildTransformer(*c);
  EXPECT_TRUE(g.ok()) << g.status();
  absl::Status s = IndexGraph(*g);
  EXPECT_TRUE(s.ok()) << s;
  return *std::move(g);
}

Graph BuildIndexed(const TransformerConfig& c) {
  absl::StatusOr<Graph> g = BuildTransformer(c);
  EXPECT_TRUE(g.ok()) << g.status();
  absl::Status s = IndexGraph(*g);
  EXPECT_TRUE(s.ok()) << s;
  return *std::move(g);
}

double Flops(const Graph& g, Phase phase, int32_t layer = -2) {
  double sum = 0;
  for (const Op& op : g.ops) {
    if (op.phase == phase && (layer == -2 || op.layer == layer)) {
      sum += op.cost.flops;
    }
  }
  return sum;
}

// Distinct saved activations read by the backward ops of `layer`.
int64_t SavedBytesOfLayer(const Graph& g, int32_t layer) {
  std::set<int32_t> saved;
  for (const Op& op : g.ops) {
    if (op.phase != Phase::kBackward || op.layer != layer) continue;
    for (int32_t t : op.inputs) {
      if (g.index.is_saved[t]) saved.insert(t);
    }
  }
  int64_t sum = 0;
  for (int32_t t : saved) sum += g.tensors[t].bytes;
  return sum;
}

std::map<std::string, int32_t> OpsByName(const Graph& g) {
  std::map<std::string, int32_t> m;
  for (int32_t i = 0; i < static_cast<int32_t>(g.ops.size()); ++i) {
    EXPECT_TRUE(m.emplace(g.ops[i].name, i).second)
        << "duplicate op name " << g.ops[i].name;
  }
  return m;
}

OpKind KindOf(const std::string& ref_kind) {
  if (ref_kind == "matmul") return OpKind::kMatmul;
  if (ref_kind == "batched_matmul") return OpKind::kBatchedMatmul;
  if (ref_kind == "flash_attention") return OpKind::kFlashAttention;
  return OpKind::kMemoryBound;
}

struct Case {
  std::string model;
  std::string attention;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.model << "/" << c.attention;
}

class TransformerReferenceTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    SLACKSWAP_SKIP_WITHOUT_REFERENCE();
    g_ = BuildIndexed(GetParam().model, GetParam().attention);
    layers_ = static_cast<int32_t>(
        Number(Reference(), {"models", GetParam().model, "config", "L"}));
  }
  const Struct& variant() const {
    return Variant(GetParam().model, GetParam().attention);
  }
  double Total(const std::string& key) const {
    return Field(variant().fields().at("totals").struct_value(), key);
  }

  Graph g_;
  int32_t layers_ = 0;
};

TEST_P(TransformerReferenceTest, ConfigMatchesReference) {
  const std::string& m = GetParam().model;
  absl::StatusOr<TransformerConfig> c = FindWorkload(m);
  ASSERT_TRUE(c.ok());
  const Struct& ref = Reference();
  EXPECT_EQ(c->layers, Number(ref, {"models", m, "config", "L"}));
  EXPECT_EQ(c->hidden, Number(ref, {"models", m, "config", "h"}));
  EXPECT_EQ(c->heads, Number(ref, {"models", m, "config", "a"}));
  EXPECT_EQ(c->ffn, Number(ref, {"models", m, "config", "f"}));
  EXPECT_EQ(c->vocab, Number(ref, {"models", m, "config", "V"}));
  EXPECT_EQ(c->seq, Number(ref, {"models", m, "config", "s"}));
  EXPECT_EQ(c->batch, Number(ref, {"models", m, "config", "b"}));
  EXPECT_EQ(c->dropout, Number(ref, {"models", m, "config", "dropout"}) > 0);
  EXPECT_EQ(c->attention, Attention::kFlash);
  EXPECT_EQ(At(ref, {"models", m, "reference_attention"}).string_value(),
            "flash");
}

TEST_P(TransformerReferenceTest, TotalsWithin2Percent) {
  EXPECT_TRUE(Within2Pct(Flops(g_, Phase::kForward), Total("fwd_flops")));
  EXPECT_TRUE(Within2Pct(Flops(g_, Phase::kBackward), Total("bwd_flops")));
  const int32_t mid = layers_ / 2;
  EXPECT_TRUE(
      Within2Pct(Flops(g_, Phase::kForward, mid), Total("layer_fwd_flops")));
  EXPECT_TRUE(Within2Pct(static_cast<double>(SavedBytesOfLayer(g_, mid)),
                         Total("saved_bytes_per_layer")));
  const double all = Total("saved_bytes_all_layers") +
                     Total("saved_bytes_pre_ops") +
                     Total("saved_bytes_post_ops");
  EXPECT_TRUE(Within2Pct(static_cast<double>(g_.index.saved_bytes), all));
  EXPECT_TRUE(Within2Pct(static_cast<double>(g_.index.saved_bytes),
                         Total("unconstrained_activation_peak_bytes")));
  // The only difference is the int64 token ids, which are static inputs here.
  double ids = 0;
  for (const Value& op : Ops(variant(), "pre_ops").values()) {
    for (const Value& s :
         op.struct_value().fields().at("saved").list_value().values()) {
      if (Str(s.struct_value(), "dtype") == "int64") {
        ids += Field(s.struct_value(), "bytes");
      }
    }
  }
  EXPECT_EQ(
      g_.index.saved_bytes,
      static_cast<int64_t>(Total("unconstrained_activation_peak_bytes") - ids));
}

TEST_P(TransformerReferenceTest, OpsMatchReference) {
  std::map<std::string, int32_t> by_name = OpsByName(g_);
  const int32_t n = static_cast<int32_t>(g_.ops.size());
  int32_t expected_fwd_ops = 0;
  for (const std::string section : {"pre_ops", "layer_ops", "post_ops"}) {
    const bool in_layer = section == "layer_ops";
    const ListValue& ops = Ops(variant(), section);
    expected_fwd_ops += ops.values_size() * (in_layer ? layers_ : 1);
    for (const Value& v : ops.values()) {
      const Struct& ref = v.struct_value();
      const std::string name = Str(ref, "name");
      for (int32_t l : in_layer ? std::vector<int32_t>{0, layers_ - 1}
                                : std::vector<int32_t>{-1}) {
        const std::string full =
            l < 0 ? name : "L" + std::to_string(l) + "." + name;
        SCOPED_TRACE(full);
        auto it = by_name.find(full);
        ASSERT_NE(it, by_name.end()) << "no op " << full;
        const Op& fwd = g_.ops[it->second];
        const int32_t bwd_index = n - 1 - it->second;
        const Op& bwd = g_.ops[bwd_index];
        EXPECT_EQ(bwd.name, full + ".bwd");
        EXPECT_EQ(fwd.phase, Phase::kForward);
        EXPECT_EQ(bwd.phase, Phase::kBackward);
        EXPECT_EQ(fwd.layer, l);
        EXPECT_EQ(bwd.layer, l);
        EXPECT_EQ(fwd.cost.kind, KindOf(Str(ref, "kind")));
        EXPECT_EQ(bwd.cost.kind, KindOf(Str(ref, "kind")));
        EXPECT_TRUE(Within2Pct(fwd.cost.flops, Field(ref, "fwd_flops")));
        EXPECT_TRUE(Within2Pct(bwd.cost.flops, Field(ref, "bwd_flops")));
        EXPECT_TRUE(Within2Pct(static_cast<double>(fwd.cost.bytes_accessed),
                               Field(ref, "fwd_hbm_bytes")));
        EXPECT_TRUE(Within2Pct(static_cast<double>(bwd.cost.bytes_accessed),
                               Field(ref, "bwd_hbm_bytes")));
        EXPECT_EQ(fwd.cost.kernels, Field(ref, "fwd_kernels"));
        EXPECT_EQ(bwd.cost.kernels, Field(ref, "bwd_kernels"));

        // Saved tensors: classes and bytes (aliases resolved, token ids are
        // static inputs).
        std::vector<std::string> want_classes;
        double want_bytes = 0;
        for (const Value& sv : ref.fields().at("saved").list_value().values()) {
          const Struct* s = &sv.struct_value();
          if (Str(*s, "dtype") == "int64") continue;
          const std::string alias = Str(*s, "alias_of");
          const std::string tensor = Str(*s, "tensor");
          if (!alias.empty()) {
            std::vector<std::string> parts = absl::StrSplit(alias, '.');
            ASSERT_EQ(parts.size(), 2u);
            const Struct* found = nullptr;
            for (const Value& o : ops.values()) {
              if (Str(o.struct_value(), "name") != parts[0]) continue;
              for (const Value& s2 : o.struct_value()
                                         .fields()
                                         .at("saved")
                                         .list_value()
                                         .values()) {
                if (Str(s2.struct_value(), "tensor") == parts[1]) {
                  found = &s2.struct_value();
                }
              }
            }
            ASSERT_NE(found, nullptr) << alias;
            s = found;
          }
          std::vector<std::string> names = absl::StrSplit(tensor, ',');
          for (size_t i = 0; i < names.size(); ++i) {
            want_classes.push_back(Str(*s, "recompute_class"));
          }
          want_bytes += Field(*s, "bytes");
        }
        std::vector<std::string> got_classes;
        double got_bytes = 0;
        for (int32_t t : bwd.inputs) {
          if (!g_.index.is_saved[t]) continue;
          got_classes.push_back(
              RecomputeClassName(g_.tensors[t].recompute_class));
          got_bytes += g_.tensors[t].bytes;
        }
        std::sort(want_classes.begin(), want_classes.end());
        std::sort(got_classes.begin(), got_classes.end());
        EXPECT_EQ(got_classes, want_classes);
        EXPECT_TRUE(Within2Pct(got_bytes, want_bytes));
      }
    }
  }
  EXPECT_EQ(n, 2 * expected_fwd_ops);
}

TEST_P(TransformerReferenceTest, BackwardMirrorsForward) {
  const int32_t n = static_cast<int32_t>(g_.ops.size());
  ASSERT_EQ(n % 2, 0);
  EXPECT_EQ(g_.index.first_backward_op, n / 2);
  for (int32_t i = 0; i < n / 2; ++i) {
    EXPECT_EQ(g_.ops[i].phase, Phase::kForward);
    EXPECT_EQ(g_.ops[n - 1 - i].name,
              absl::StrCat(g_.ops[i].name.view(), ".bwd"));
  }
}

TEST_P(TransformerReferenceTest, GradientsAndMasks) {
  for (int32_t t = 0; t < static_cast<int32_t>(g_.tensors.size()); ++t) {
    const Tensor& tensor = g_.tensors[t];
    if (tensor.kind == TensorKind::kGradient) {
      // Produced in backward and consumed in backward.
      ASSERT_NE(g_.index.producer[t], kNone) << tensor.name;
      EXPECT_EQ(g_.ops[g_.index.producer[t]].phase, Phase::kBackward);
      EXPECT_NE(g_.index.last_use[t], kNone) << tensor.name;
    }
    if (tensor.dtype == "uint8") {
      EXPECT_EQ(tensor.recompute_class, RecomputeClass::kRngMask);
      ASSERT_TRUE(tensor.rebuild.has_value()) << tensor.name;
      EXPECT_TRUE(tensor.rebuild->inputs.empty());
      EXPECT_EQ(tensor.rebuild->cost.bytes_accessed, tensor.bytes);
      EXPECT_EQ(tensor.rebuild->cost.kernels, 1);
    } else {
      EXPECT_FALSE(tensor.rebuild.has_value()) << tensor.name;
    }
    if (g_.index.is_saved[t]) {
      EXPECT_NE(tensor.recompute_class, RecomputeClass::kUnspecified)
          << tensor.name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Presets, TransformerReferenceTest,
    ::testing::Values(Case{"bert-large", "flash"},
                      Case{"bert-large", "unfused"}, Case{"gpt2-xl", "flash"},
                      Case{"gpt2-xl", "unfused"}, Case{"llama-7b", "flash"},
                      Case{"llama-7b", "unfused"}),
    [](const ::testing::TestParamInfo<Case>& info) {
      std::string s = info.param.model + "_" + info.param.attention;
      std::replace(s.begin(), s.end(), '-', '_');
      return s;
    });

int32_t Find(const Graph& g, const std::string& name) {
  for (int32_t i = 0; i < static_cast<int32_t>(g.tensors.size()); ++i) {
    if (g.tensors[i].name == name) return i;
  }
  return kNone;
}

TEST(TransformerGraphTest, ResidualBranchReceivesTwoGradients) {
  absl::StatusOr<TransformerConfig> c = FindWorkload("gpt2-xl");
  ASSERT_TRUE(c.ok());
  c->layers = 2;
  Graph g = BuildIndexed(*c);
  // L0's output r2 feeds L1.ln_1 and L1.attn_residual_add.
  const int32_t r2 = Find(g, "L0.r2");
  ASSERT_NE(r2, kNone);
  EXPECT_TRUE(g.index.is_saved[r2]);
  EXPECT_EQ(g.tensors[r2].recompute_class, RecomputeClass::kResidualStream);
  const Op& add_bwd = g.ops[g.index.producer[r2]];
  ASSERT_EQ(add_bwd.name, "L0.mlp_residual_add");
  int32_t bwd = kNone;
  for (int32_t i = 0; i < static_cast<int32_t>(g.ops.size()); ++i) {
    if (g.ops[i].name == "L0.mlp_residual_add.bwd") bwd = i;
  }
  ASSERT_NE(bwd, kNone);
  int grads = 0;
  for (int32_t t : g.ops[bwd].inputs) {
    if (g.tensors[t].kind == TensorKind::kGradient) {
      ++grads;
      EXPECT_THAT(g.tensors[t].name, HasSubstr("L0.r2.grad"));
    }
  }
  EXPECT_EQ(grads, 2);
  // It writes the gradients of its two inputs.
  EXPECT_EQ(g.ops[bwd].outputs.size(), 2u);
}

TEST(TransformerGraphTest, SeparateTensorsAsSaved) {
  absl::StatusOr<TransformerConfig> c = FindWorkload("llama-7b");
  ASSERT_TRUE(c.ok());
  c->layers = 1;
  Graph g = BuildIndexed(*c);
  const int64_t thd = c->batch * c->seq * c->hidden * 2;
  for (const char* name : {"L0.q", "L0.k", "L0.v", "L0.q_r", "L0.k_r"}) {
    const int32_t t = Find(g, name);
    ASSERT_NE(t, kNone) << name;
    EXPECT_EQ(g.tensors[t].bytes, thd) << name;
  }
  // RoPE's inputs are not saved; its outputs and v are.
  EXPECT_FALSE(g.index.is_saved[Find(g, "L0.q")]);
  EXPECT_FALSE(g.index.is_saved[Find(g, "L0.k")]);
  EXPECT_TRUE(g.index.is_saved[Find(g, "L0.q_r")]);
  EXPECT_TRUE(g.index.is_saved[Find(g, "L0.v")]);
  const int32_t lse = Find(g, "L0.lse");
  ASSERT_NE(lse, kNone);
  EXPECT_EQ(g.tensors[lse].bytes, c->batch * c->heads * c->seq * 4);
  EXPECT_EQ(g.tensors[Find(g, "L0.attn_norm.stats")].bytes,
            c->batch * c->seq * 4);
  // Token ids are static inputs; parameters are static.
  const int32_t ids = Find(g, "input_ids");
  ASSERT_NE(ids, kNone);
  EXPECT_EQ(g.tensors[ids].kind, TensorKind::kInput);
  EXPECT_FALSE(g.index.is_saved[ids]);
  const int32_t w = Find(g, "L0.qkv_proj.weight");
  ASSERT_NE(w, kNone);
  EXPECT_EQ(g.tensors[w].kind, TensorKind::kParameter);
  EXPECT_EQ(g.tensors[w].bytes, 3 * c->hidden * c->hidden * 2);
  EXPECT_GT(g.index.static_bytes, 0);
}

TEST(TransformerGraphTest, BertHeads) {
  absl::StatusOr<TransformerConfig> c = FindWorkload("bert-large");
  ASSERT_TRUE(c.ok());
  c->layers = 1;
  Graph g = BuildIndexed(*c);
  const int32_t hm = Find(g, "hm");
  const int32_t cls = Find(g, "cls");
  ASSERT_NE(hm, kNone);
  ASSERT_NE(cls, kNone);
  EXPECT_EQ(g.tensors[hm].bytes, 80 * c->batch * c->hidden * 2);
  EXPECT_EQ(g.tensors[cls].bytes, c->batch * c->hidden * 2);
  EXPECT_EQ(g.index.producer[hm], g.index.producer[cls]);
  EXPECT_TRUE(g.index.is_saved[cls]);
  const int32_t probs = Find(g, "mlm_probs");
  ASSERT_NE(probs, kNone);
  EXPECT_EQ(g.tensors[probs].dtype, "fp32");
  EXPECT_EQ(g.tensors[probs].recompute_class, RecomputeClass::kLoss);
}

TEST(TransformerOverrideTest, LayersScaleTotals) {
  SLACKSWAP_SKIP_WITHOUT_REFERENCE();
  for (const std::string& name : WorkloadNames()) {
    SCOPED_TRACE(name);
    absl::StatusOr<TransformerConfig> c = FindWorkload(name);
    ASSERT_TRUE(c.ok());
    const std::string& m = name;
    c->layers = 2;
    Graph g2 = BuildIndexed(*c);
    c->layers = 3;
    Graph g3 = BuildIndexed(*c);
    const Struct& totals =
        Variant(m, "flash").fields().at("totals").struct_value();
    EXPECT_TRUE(Within2Pct(
        static_cast<double>(g3.index.saved_bytes - g2.index.saved_bytes),
        Field(totals, "saved_bytes_per_layer")));
    EXPECT_TRUE(
        Within2Pct(Flops(g3, Phase::kForward) - Flops(g2, Phase::kForward),
                   Field(totals, "layer_fwd_flops")));
    EXPECT_EQ(g3.ops.size() - g2.ops.size(),
              2 * Ops(Variant(m, "flash"), "layer_ops").values_size());
  }
}

TEST(TransformerOverrideTest, BatchScalesLinearly) {
  absl::StatusOr<TransformerConfig> c = FindWorkload("gpt2-xl");
  ASSERT_TRUE(c.ok());
  c->layers = 2;
  Graph g1 = BuildIndexed(*c);
  c->batch *= 2;
  Graph g2 = BuildIndexed(*c);
  EXPECT_EQ(g2.index.saved_bytes, 2 * g1.index.saved_bytes);
  EXPECT_DOUBLE_EQ(Flops(g2, Phase::kForward), 2 * Flops(g1, Phase::kForward));
  // Parameters do not depend on the batch.
  EXPECT_EQ(g2.index.static_bytes - g1.index.static_bytes,
            c->batch / 2 * c->seq * 8);  // only the token ids grow
}

TEST(TransformerOverrideTest, SeqAndAttention) {
  absl::StatusOr<TransformerConfig> c = FindWorkload("gpt2-xl");
  ASSERT_TRUE(c.ok());
  c->layers = 1;
  c->attention = Attention::kUnfused;
  Graph g1 = BuildIndexed(*c);
  const int64_t probs = g1.tensors[Find(g1, "L0.probs")].bytes;
  EXPECT_EQ(probs, c->batch * c->heads * c->seq * c->seq * 2);
  c->seq /= 2;
  Graph g2 = BuildIndexed(*c);
  EXPECT_EQ(g2.tensors[Find(g2, "L0.probs")].bytes, probs / 4);
  c->attention = Attention::kFlash;
  Graph g3 = BuildIndexed(*c);
  EXPECT_EQ(Find(g3, "L0.probs"), kNone);
  EXPECT_LT(g3.index.saved_bytes, g2.index.saved_bytes);
}

TEST(TransformerOverrideTest, DtypeAndDropout) {
  absl::StatusOr<TransformerConfig> c = FindWorkload("gpt2-xl");
  ASSERT_TRUE(c.ok());
  c->layers = 1;
  Graph g2 = BuildIndexed(*c);
  c->dtype_bytes = 4;
  Graph g4 = BuildIndexed(*c);
  EXPECT_EQ(g4.tensors[Find(g4, "L0.u")].bytes,
            2 * g2.tensors[Find(g2, "L0.u")].bytes);
  EXPECT_EQ(g4.tensors[Find(g4, "L0.u")].dtype, "fp32");
  // Masks stay 1 byte per element.
  EXPECT_EQ(g4.tensors[Find(g4, "L0.attn_resid_dropout.mask")].bytes,
            g2.tensors[Find(g2, "L0.attn_resid_dropout.mask")].bytes);
  c->dtype_bytes = 2;
  c->dropout = false;
  Graph g = BuildIndexed(*c);
  for (const Tensor& t : g.tensors) EXPECT_NE(t.dtype, "uint8") << t.name;
  EXPECT_EQ(g.ops.size() + 2 * 3, g2.ops.size());  // 3 dropouts fewer
}

TEST(TransformerOverrideTest, SmallCustomModelsIndex) {
  for (Arch arch : {Arch::kEncoderPostNorm, Arch::kDecoderPreNorm}) {
    for (Attention att : {Attention::kFlash, Attention::kUnfused}) {
      for (bool dropout : {false, true}) {
        for (bool llama_style : {false, true}) {
          TransformerConfig c;
          c.name = "tiny";
          c.arch = arch;
          c.layers = 2;
          c.hidden = 8;
          c.heads = 2;
          c.ffn = 16;
          c.vocab = 11;
          c.seq = 4;
          c.batch = 3;
          c.dropout = dropout;
          c.attention = att;
          c.max_pred_per_seq = 2;
          if (llama_style) {
            c.activation = Activation::kSwiGlu;
            c.norm = Norm::kRmsNorm;
            c.rope = true;
          }
          absl::StatusOr<Graph> g = BuildTransformer(c);
          ASSERT_TRUE(g.ok()) << g.status();
          absl::Status s = IndexGraph(*g);
          EXPECT_TRUE(s.ok()) << s;
          EXPECT_GT(g->index.saved_bytes, 0);
        }
      }
    }
  }
}

void ExpectInvalid(const TransformerConfig& c, const std::string& field) {
  absl::Status s = ValidateTransformerConfig(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << field;
  EXPECT_THAT(std::string(s.message()), HasSubstr(field));
  EXPECT_EQ(BuildTransformer(c).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TransformerValidateTest, RejectsBadConfigs) {
  const TransformerConfig base = *FindWorkload("gpt2-xl");
  EXPECT_TRUE(ValidateTransformerConfig(base).ok());
  TransformerConfig c = base;
  c.layers = 0;
  ExpectInvalid(c, "layers must be > 0, got 0");
  c = base;
  c.layers = 1000000;
  ExpectInvalid(c, "layers");
  c = base;
  c.hidden = -5;
  ExpectInvalid(c, "hidden must be > 0, got -5");
  c = base;
  c.heads = 0;
  ExpectInvalid(c, "heads");
  c = base;
  c.heads = 7;
  ExpectInvalid(c, "divisible by heads");
  c = base;
  c.ffn = 0;
  ExpectInvalid(c, "ffn");
  c = base;
  c.vocab = -1;
  ExpectInvalid(c, "vocab");
  c = base;
  c.seq = 0;
  ExpectInvalid(c, "seq");
  c = base;
  c.batch = 0;
  ExpectInvalid(c, "batch");
  c = base;
  c.dtype_bytes = 0;
  ExpectInvalid(c, "dtype_bytes");
  c = base;
  c.seq = int64_t{1} << 40;
  ExpectInvalid(c, "seq");
  c = base;
  c.batch = int64_t{1} << 50;
  ExpectInvalid(c, "batch");
  c = base;
  c.vocab = int64_t{1} << 55;
  ExpectInvalid(c, "vocab");
  c = *FindWorkload("bert-large");
  c.max_pred_per_seq = 0;
  ExpectInvalid(c, "max_pred_per_seq");
  c.max_pred_per_seq = c.seq + 1;
  ExpectInvalid(c, "max_pred_per_seq");
  c = base;
  c.data_parallel = 0;
  ExpectInvalid(c, "data_parallel must be in [1, 64] ranks, got 0");
  c.data_parallel = 65;
  ExpectInvalid(c, "data_parallel must be in [1, 64] ranks, got 65");
}

// --- data parallel (DDP) ---------------------------------------------------

TransformerConfig Small(const std::string& name, int32_t layers,
                        int32_t data_parallel) {
  TransformerConfig c = *FindWorkload(name);
  c.layers = layers;
  c.data_parallel = data_parallel;
  return c;
}

// Everything the generator sets on a graph, as text.
std::string Dump(const Graph& g) {
  std::string out = absl::StrCat(g.name, "|", g.description, "\n");
  for (const Tensor& t : g.tensors) {
    absl::StrAppend(
        &out, t.name.view(), " ", t.bytes, " ", static_cast<int>(t.kind), " ",
        static_cast<int>(t.recompute_class), " ", t.dtype.view(), " ",
        t.shape.view(), " ", t.external_id, " ", t.rebuild.has_value(), "\n");
  }
  for (const Op& o : g.ops) {
    absl::StrAppend(&out, o.name.view(), " ", static_cast<int>(o.phase), " ",
                    o.layer, " [", absl::StrJoin(o.inputs, ","), "] [",
                    absl::StrJoin(o.outputs, ","), "] ", o.workspace_bytes, " ",
                    o.cost.flops, " ", o.cost.bytes_accessed, " ",
                    o.cost.kernels, " ", static_cast<int>(o.cost.kind), " ",
                    o.external_id, " ", o.collective.has_value(), "\n");
  }
  return out;
}

TEST(TransformerDataParallelTest, OneRankIsTheSingleGpuGraph) {
  for (const std::string& name : WorkloadNames()) {
    SCOPED_TRACE(name);
    TransformerConfig unset = *FindWorkload(name);
    unset.layers = 2;
    absl::StatusOr<Graph> before = BuildTransformer(unset);
    absl::StatusOr<Graph> one = BuildTransformer(Small(name, 2, 1));
    ASSERT_TRUE(before.ok() && one.ok());
    EXPECT_EQ(Dump(*one), Dump(*before));
    EXPECT_TRUE(testutil::CollectiveOps(*one).empty());
    // More ranks add the all-reduces and nothing else.
    absl::StatusOr<Graph> eight = BuildTransformer(Small(name, 2, 8));
    ASSERT_TRUE(eight.ok()) << eight.status();
    EXPECT_FALSE(testutil::CollectiveOps(*eight).empty());
    Graph stripped = *eight;
    stripped.ops.clear();
    for (Op o : eight->ops) {
      if (o.collective.has_value()) continue;
      o.external_id = 0;  // numbered again, as the ops are now
      stripped.AddOp(std::move(o));
    }
    stripped.description = before->description;
    EXPECT_EQ(Dump(stripped), Dump(*before));
    EXPECT_THAT(eight->description,
                HasSubstr("data parallel over 8 ranks (DDP)"));
    EXPECT_EQ(eight->index.saved_bytes, before->index.saved_bytes);
    EXPECT_EQ(eight->index.static_bytes, before->index.static_bytes);
  }
}

TEST(TransformerDataParallelTest, BucketCapIsDdpDefault) {
  EXPECT_EQ(kDdpBucketCapBytes, 25 * 1024 * 1024);  // bucket_cap_mb=25
  EXPECT_EQ(kMaxDataParallel, 64);
}

// The buckets as transformer.h describes them, found from the graph's index
// rather than the generator: each parameter's gradient is complete at the
// backward of its first forward consumer; parameters enter buckets in the
// reverse of that order (and of their order among the op's inputs).
struct ExpectedBucket {
  int64_t bytes = 0;
  std::string after;  // the backward op it follows
};

std::vector<ExpectedBucket> ExpectedBuckets(const Graph& g) {
  struct Param {
    int32_t first_use;
    int32_t place;
    int64_t bytes;
  };
  std::vector<Param> params;
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    if (g.tensors[t].kind != TensorKind::kParameter) continue;
    const int32_t first = g.index.consumers[g.index.consumer_offsets[t]];
    EXPECT_EQ(g.ops[first].phase, Phase::kForward);
    const TensorIds& in = g.ops[first].inputs;
    const int32_t place = static_cast<int32_t>(
        std::find(in.begin(), in.end(), static_cast<int32_t>(t)) - in.begin());
    params.push_back({first, place, g.tensors[t].bytes});
  }
  std::sort(params.begin(), params.end(), [](const Param& a, const Param& b) {
    return std::tie(a.first_use, a.place) > std::tie(b.first_use, b.place);
  });
  std::vector<ExpectedBucket> buckets;
  ExpectedBucket open;
  for (size_t i = 0; i < params.size(); ++i) {
    open.bytes += params[i].bytes;
    open.after = absl::StrCat(g.ops[params[i].first_use].name.view(), ".bwd");
    if (open.bytes >= kDdpBucketCapBytes || i + 1 == params.size()) {
      buckets.push_back(open);
      open = ExpectedBucket();
    }
  }
  return buckets;
}

TEST(TransformerDataParallelTest,
     AllReducesBucketEveryGradientInBackwardOrder) {
  for (const std::string& name : WorkloadNames()) {
    SCOPED_TRACE(name);
    for (int32_t layers : {1, 4}) {
      absl::StatusOr<Graph> g = BuildTransformer(Small(name, layers, 8));
      ASSERT_TRUE(g.ok()) << g.status();
      int64_t param_bytes = 0;
      for (const Tensor& t : g->tensors) {
        if (t.kind == TensorKind::kParameter) param_bytes += t.bytes;
      }
      const std::vector<int32_t> ars = testutil::CollectiveOps(*g);
      const std::vector<ExpectedBucket> expected = ExpectedBuckets(*g);
      ASSERT_EQ(ars.size(), expected.size());
      int64_t bucket_bytes = 0;
      for (size_t k = 0; k < ars.size(); ++k) {
        SCOPED_TRACE(absl::StrCat("bucket ", k));
        const Op& op = g->ops[ars[k]];
        EXPECT_EQ(op.name.view(), absl::StrCat("ddp.all_reduce.bucket", k));
        EXPECT_EQ(op.phase, Phase::kBackward);
        EXPECT_TRUE(op.inputs.empty() && op.outputs.empty());
        EXPECT_EQ(op.collective->kind, CollectiveKind::kAllReduce);
        EXPECT_EQ(op.collective->algorithm, CollectiveAlgorithm::kRing);
        EXPECT_THAT(op.collective->group,
                    ::testing::ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
        EXPECT_EQ(op.collective->bytes, expected[k].bytes);
        if (k + 1 < ars.size()) {
          EXPECT_GE(op.collective->bytes, kDdpBucketCapBytes);
        }
        bucket_bytes += op.collective->bytes;
        // Right after the backward op that completes its last gradient
        // (behind the buckets that op completed before it).
        int32_t before = ars[k] - 1;
        while (g->ops[before].collective.has_value()) --before;
        EXPECT_EQ(g->ops[before].name.view(), expected[k].after);
        EXPECT_EQ(g->ops[before].phase, Phase::kBackward);
      }
      // The all-reduces carry every parameter's gradient once (a tied
      // embedding too): the model's parameter bytes.
      EXPECT_EQ(bucket_bytes, param_bytes);
      EXPECT_GT(ars.size(), 1u);
    }
  }
}

TEST(TransformerDataParallelTest, WorkloadOverrideIsCheckedBeforeNarrowing) {
  WorkloadOverrides o;
  o.layers = 1;
  o.data_parallel = 4;
  absl::StatusOr<Graph> g = BuildWorkload("llama-7b", o);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_FALSE(testutil::CollectiveOps(*g).empty());
  EXPECT_EQ(g->ops[testutil::CollectiveOps(*g)[0]].collective->group.size(),
            4u);
  for (int64_t bad : {int64_t{0}, int64_t{65}, (int64_t{1} << 32) + 2}) {
    o.data_parallel = bad;
    absl::StatusOr<Graph> refused = BuildWorkload("llama-7b", o);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(refused.status().message()),
                HasSubstr(absl::StrCat(
                    "data_parallel must be in [1, 64] ranks, got ", bad)));
  }
}

// --- fully sharded data parallel (FSDP) --------------------------------------

TransformerConfig Sharded(const std::string& name, int32_t layers,
                          int32_t ranks) {
  TransformerConfig c = *FindWorkload(name);
  c.layers = layers;
  c.fully_sharded = ranks;
  return c;
}

// What the single-GPU graph says of the FSDP units (transformer.h): each
// parameter's unit is the layer of the first forward op reading it (the
// root, -1, outside the layers), and a unit's bytes are its parameters'.
struct Units {
  std::map<int32_t, int64_t> bytes;  // by layer
  int64_t total = 0;
  int64_t sharded = 0;  // sum of ceil(bytes / ranks)
};

Units UnitsOf(const Graph& single, int64_t ranks) {
  Units u;
  std::set<int32_t> seen;
  for (const Op& op : single.ops) {
    if (op.phase != Phase::kForward) continue;
    for (int32_t t : op.inputs) {
      const Tensor& tensor = single.tensors[t];
      if (tensor.kind != TensorKind::kParameter || !seen.insert(t).second) {
        continue;
      }
      u.bytes[op.layer] += tensor.bytes;
      u.total += tensor.bytes;
      u.sharded += (tensor.bytes + ranks - 1) / ranks;
    }
  }
  return u;
}

int64_t InputBytes(const Graph& g) {
  int64_t bytes = 0;
  for (const Tensor& t : g.tensors) {
    if (t.kind == TensorKind::kInput) bytes += t.bytes;
  }
  return bytes;
}

std::string UnitName(int32_t layer) {
  return layer < 0 ? "root" : absl::StrCat("L", layer);
}

TEST(TransformerFullyShardedTest, OneRankIsTheSingleGpuGraph) {
  for (const std::string& name : WorkloadNames()) {
    SCOPED_TRACE(name);
    TransformerConfig unset = *FindWorkload(name);
    unset.layers = 2;
    absl::StatusOr<Graph> before = BuildTransformer(unset);
    absl::StatusOr<Graph> one = BuildTransformer(Sharded(name, 2, 1));
    ASSERT_TRUE(before.ok() && one.ok());
    EXPECT_EQ(Dump(*one), Dump(*before));
    EXPECT_TRUE(testutil::CollectiveOps(*one).empty());
  }
}

// The memory FSDP asks of a rank: its shards of every parameter, plus the
// gathered parameters of the units in flight, the largest one unit's.
TEST(TransformerFullyShardedTest, ShardsGatheredUnitsAndCollectiveBytes) {
  for (const std::string name : {"gpt2-xl", "llama-7b"}) {
    for (int32_t ranks : {3, 8}) {
      SCOPED_TRACE(absl::StrCat(name, " over ", ranks));
      const int32_t layers = 3;
      absl::StatusOr<Graph> single = BuildTransformer(Sharded(name, layers, 1));
      absl::StatusOr<Graph> g = BuildTransformer(Sharded(name, layers, ranks));
      ASSERT_TRUE(single.ok() && g.ok()) << g.status();
      const Units units = UnitsOf(*single, ranks);
      ASSERT_EQ(units.bytes.size(), static_cast<size_t>(layers) + 1);
      EXPECT_THAT(g->description,
                  HasSubstr(absl::StrCat("fully sharded over ", ranks,
                                         " ranks (FSDP)")));

      // Static memory: the shards and the inputs, as before.
      EXPECT_EQ(g->index.static_bytes, units.sharded + InputBytes(*single));
      EXPECT_EQ(single->index.static_bytes, units.total + InputBytes(*single));
      // Activations: what the single GPU saves.
      EXPECT_EQ(g->index.saved_bytes, single->index.saved_bytes);

      // The collectives, unit by unit.
      std::map<std::string, int64_t> gathers, scatters;
      int64_t gathered_bytes = 0, scattered_bytes = 0, largest_gathered = 0;
      for (size_t o = 0; o < g->ops.size(); ++o) {
        const Op& op = g->ops[o];
        if (!op.collective.has_value()) {
          // No compute op reads a shard: only the gathered parameters.
          for (int32_t t : op.inputs) {
            if (g->tensors[t].kind == TensorKind::kParameter) {
              EXPECT_NE(g->index.producer[t], kNone) << g->OpLabel(o);
            }
          }
          continue;
        }
        const Collective& c = *op.collective;
        EXPECT_EQ(c.algorithm, CollectiveAlgorithm::kRing);
        std::vector<int32_t> group(ranks);
        for (int32_t r = 0; r < ranks; ++r) group[r] = r;
        EXPECT_EQ(c.group, group);
        const std::string unit = UnitName(op.layer);
        const int64_t unit_bytes = units.bytes.at(op.layer);
        EXPECT_EQ(c.bytes, unit_bytes) << op.name.view();
        // The next op (after a gather) or the one before (a reduce-scatter)
        // is the unit's.
        if (c.kind == CollectiveKind::kAllGather) {
          const bool fwd = op.phase == Phase::kForward;
          EXPECT_EQ(op.name.view(), absl::StrCat("fsdp.all_gather.", unit,
                                                 fwd ? ".fwd" : ".bwd"));
          gathers[unit] += 1;
          gathered_bytes += c.bytes;
          ASSERT_EQ(op.outputs.size(), 1u);
          const int32_t out = op.outputs[0];
          const Tensor& t = g->tensors[out];
          EXPECT_EQ(t.kind, TensorKind::kParameter);
          EXPECT_EQ(t.bytes, unit_bytes);
          EXPECT_EQ(t.name.view(), absl::StrCat("fsdp.", unit, ".params.",
                                                fwd ? "fwd" : "bwd"));
          largest_gathered = std::max(largest_gathered, t.bytes);
          // It reads the unit's shards.
          int64_t shards = 0;
          for (int32_t in : op.inputs) {
            EXPECT_EQ(g->index.producer[in], kNone);
            shards += g->tensors[in].bytes;
          }
          EXPECT_GE(shards * ranks, unit_bytes);
          EXPECT_LT(
              shards * ranks,
              unit_bytes + static_cast<int64_t>(op.inputs.size()) * ranks);
          ASSERT_LT(o + 1, g->ops.size());
          EXPECT_EQ(g->ops[o + 1].layer, op.layer);
          EXPECT_EQ(g->ops[o + 1].phase, op.phase);
          // Freed after its last reader: forward's, for forward's copy
          // (the resharding), and no reader is of the other phase.
          const int32_t last = g->index.last_use[out];
          ASSERT_NE(last, kNone);
          EXPECT_EQ(g->ops[last].phase, op.phase);
          EXPECT_EQ(g->ops[last].layer, op.layer);
          EXPECT_FALSE(g->index.is_saved[out]);
        } else {
          ASSERT_EQ(c.kind, CollectiveKind::kReduceScatter);
          EXPECT_EQ(op.name.view(), absl::StrCat("fsdp.reduce_scatter.", unit));
          EXPECT_EQ(op.phase, Phase::kBackward);
          EXPECT_TRUE(op.inputs.empty() && op.outputs.empty());
          scatters[unit] += 1;
          scattered_bytes += c.bytes;
          // After the unit's last backward op.
          for (size_t later = o + 1; later < g->ops.size(); ++later) {
            EXPECT_NE(g->ops[later].layer, op.layer) << g->OpLabel(later);
          }
        }
      }
      int64_t largest_unit = 0;
      for (const auto& [layer, bytes] : units.bytes) {
        largest_unit = std::max(largest_unit, bytes);
        EXPECT_EQ(gathers[UnitName(layer)], 2) << UnitName(layer);
        EXPECT_EQ(scatters[UnitName(layer)], 1) << UnitName(layer);
      }
      EXPECT_EQ(largest_gathered, largest_unit);
      EXPECT_EQ(gathered_bytes, 2 * units.total);
      EXPECT_EQ(scattered_bytes, units.total);
      EXPECT_EQ(g->ops.size(), single->ops.size() + 3 * units.bytes.size());
    }
  }
}

// Recompute with the parameters gathered for backward (transformer.h).
TEST(TransformerFullyShardedTest, SavedActivationsRebuildFromBackwardGather) {
  for (const std::string name : {"gpt2-xl", "llama-7b"}) {
    SCOPED_TRACE(name);
    absl::StatusOr<Graph> g = BuildTransformer(Sharded(name, 2, 8));
    ASSERT_TRUE(g.ok()) << g.status();
    // The backward copy of each forward-gathered tensor, and its gather.
    std::map<int32_t, int32_t> bwd_of;
    std::map<int32_t, int32_t> gather_of;
    std::map<int32_t, int32_t> fwd_gathered_of_layer;
    for (size_t o = 0; o < g->ops.size(); ++o) {
      const Op& op = g->ops[o];
      if (!op.collective.has_value() ||
          op.collective->kind != CollectiveKind::kAllGather) {
        continue;
      }
      gather_of[op.outputs[0]] = static_cast<int32_t>(o);
      if (op.phase == Phase::kForward) {
        fwd_gathered_of_layer[op.layer] = op.outputs[0];
      }
    }
    for (const Op& op : g->ops) {
      if (op.collective.has_value() && op.phase == Phase::kBackward &&
          op.collective->kind == CollectiveKind::kAllGather) {
        bwd_of[fwd_gathered_of_layer.at(op.layer)] = op.outputs[0];
      }
    }
    int32_t recipes = 0;
    for (int32_t t : g->index.saved) {
      const Op& producer = g->ops[g->index.producer[t]];
      const Tensor& tensor = g->tensors[t];
      int32_t fwd = kNone;
      for (int32_t in : producer.inputs) {
        if (bwd_of.contains(in)) fwd = in;
      }
      if (fwd == kNone) continue;
      SCOPED_TRACE(g->TensorLabel(t));
      ASSERT_TRUE(tensor.rebuild.has_value());
      ++recipes;
      TensorIds expected = producer.inputs;
      std::replace(expected.begin(), expected.end(), fwd, bwd_of.at(fwd));
      EXPECT_EQ(tensor.rebuild->inputs, expected);
      EXPECT_EQ(tensor.rebuild->cost.flops, producer.cost.flops);
      EXPECT_EQ(tensor.rebuild->cost.bytes_accessed,
                producer.cost.bytes_accessed);
      EXPECT_EQ(tensor.rebuild->cost.kernels, producer.cost.kernels);
      EXPECT_EQ(tensor.rebuild->cost.kind, producer.cost.kind);
      // First needed once the backward copy exists.
      EXPECT_GT(g->index.first_bwd_use[t], gather_of.at(bwd_of.at(fwd)));
    }
    // Per layer: the norms' outputs and statistics, the GEMMs' outputs.
    EXPECT_GE(recipes, 2 * 4);
  }
  // A dropout mask keeps its own recipe, which reads nothing.
  absl::StatusOr<Graph> gpt = BuildTransformer(Sharded("gpt2-xl", 1, 8));
  ASSERT_TRUE(gpt.ok()) << gpt.status();
  const Tensor& mask = gpt->tensors[Find(*gpt, "L0.attn_resid_dropout.mask")];
  ASSERT_TRUE(mask.rebuild.has_value());
  EXPECT_TRUE(mask.rebuild->inputs.empty());
}

TEST(TransformerFullyShardedTest, RefusesBadRanksHybridAndPostNorm) {
  TransformerConfig c = Sharded("gpt2-xl", 2, 0);
  ExpectInvalid(c, "fully_sharded must be in [1, 64] ranks, got 0");
  c.fully_sharded = 65;
  ExpectInvalid(c, "fully_sharded must be in [1, 64] ranks, got 65");
  c.fully_sharded = 8;
  c.data_parallel = 2;
  ExpectInvalid(c,
                "data_parallel (2) and fully_sharded (8) cannot both be > 1");
  // Either alone is fine.
  c.data_parallel = 1;
  EXPECT_TRUE(BuildTransformer(c).ok());
  // A post-norm encoder's layer output is made with its layer's norm and
  // first needed by the next layer's backward, before its layer's
  // parameters are gathered again: it could not be recomputed.
  absl::StatusOr<Graph> bert = BuildTransformer(Sharded("bert-large", 2, 8));
  EXPECT_EQ(bert.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bert.status().message()),
              HasSubstr("fully_sharded: tensor"));
  EXPECT_THAT(std::string(bert.status().message()),
              HasSubstr("(L0.y), made with FSDP unit L0's parameters"));
  EXPECT_TRUE(BuildTransformer(Sharded("bert-large", 2, 1)).ok());

  WorkloadOverrides o;
  o.layers = 1;
  o.fully_sharded = 4;
  absl::StatusOr<Graph> g = BuildWorkload("llama-7b", o);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->ops[testutil::CollectiveOps(*g)[0]].collective->group.size(),
            4u);
  for (int64_t bad : {int64_t{0}, int64_t{65}, (int64_t{1} << 32) + 2}) {
    o.fully_sharded = bad;
    absl::StatusOr<Graph> refused = BuildWorkload("llama-7b", o);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(refused.status().message()),
                HasSubstr(absl::StrCat(
                    "fully_sharded must be in [1, 64] ranks, got ", bad)));
  }
  o.fully_sharded = 2;
  o.data_parallel = 2;
  absl::StatusOr<Graph> hybrid = BuildWorkload("llama-7b", o);
  EXPECT_THAT(std::string(hybrid.status().message()),
              HasSubstr("data_parallel (2) and fully_sharded (2)"));
}

TEST(TransformerPresetTest, NamesAndLookup) {
  EXPECT_THAT(WorkloadNames(),
              ::testing::ElementsAre("bert-large", "gpt2-xl", "llama-7b"));
  for (const std::string& name : WorkloadNames()) {
    absl::StatusOr<TransformerConfig> c = FindWorkload(name);
    ASSERT_TRUE(c.ok()) << name;
    EXPECT_EQ(c->name, name);
    EXPECT_TRUE(ValidateTransformerConfig(*c).ok());
  }
  absl::StatusOr<TransformerConfig> bad = FindWorkload("gpt5");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("bert-large, gpt2-xl, llama-7b"));
}

TEST(TransformerPresetTest, ParseAttention) {
  EXPECT_EQ(*ParseAttention("flash"), Attention::kFlash);
  EXPECT_EQ(*ParseAttention("unfused"), Attention::kUnfused);
  absl::StatusOr<Attention> bad = ParseAttention("sparse");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("attention"));
}

}  // namespace
}  // namespace slackswap
