#include "io/convert.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "common/format.h"
#include "common/status_macros.h"
#include "model/efficiency.h"

namespace slackswap {
namespace {

// Indices are int32 inside the core.
constexpr int64_t kMaxEntities = std::numeric_limits<int32_t>::max() / 2;

// Messages name the op or tensor they are about. The name is made only for
// a message, not for every op and tensor converted (two strings built per
// element of a graph of millions).
using Where = absl::FunctionRef<std::string()>;

std::string OpWhere(const v1::Op& op, int i) {
  return absl::StrCat(
      "op ", op.id(), " (", op.name().empty() ? "ops[" : "",
      op.name().empty() ? absl::StrCat(i, "]") : ShortName(op.name()), ")");
}

absl::StatusOr<OpKind> OpKindFromProto(v1::OpKind k, Where where) {
  switch (k) {
    case v1::OP_KIND_UNSPECIFIED:
    case v1::OP_KIND_MEMORY_BOUND:
      return OpKind::kMemoryBound;
    case v1::OP_KIND_MATMUL:
      return OpKind::kMatmul;
    case v1::OP_KIND_BATCHED_MATMUL:
      return OpKind::kBatchedMatmul;
    case v1::OP_KIND_FLASH_ATTENTION:
      return OpKind::kFlashAttention;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(where(), ": cost.kind has unknown value ", k));
  }
}

v1::OpKind OpKindToProto(OpKind k) {
  switch (k) {
    case OpKind::kMemoryBound:
      return v1::OP_KIND_MEMORY_BOUND;
    case OpKind::kMatmul:
      return v1::OP_KIND_MATMUL;
    case OpKind::kBatchedMatmul:
      return v1::OP_KIND_BATCHED_MATMUL;
    case OpKind::kFlashAttention:
      return v1::OP_KIND_FLASH_ATTENTION;
  }
  return v1::OP_KIND_UNSPECIFIED;
}

absl::StatusOr<OpCost> CostFromProto(const v1::OpCost& pb, Where where) {
  // Without a kind the FLOPs would cost nothing: say so rather than ignore
  // them.
  if (pb.kind() == v1::OP_KIND_UNSPECIFIED && pb.flops() > 0 &&
      !pb.has_duration_ns()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where(), ": cost.flops is ", pb.flops(),
        " but cost.kind is unset; set OP_KIND_MATMUL, "
        "OP_KIND_BATCHED_MATMUL or OP_KIND_FLASH_ATTENTION to cost the "
        "FLOPs, or OP_KIND_MEMORY_BOUND to cost the op by its bytes alone"));
  }
  OpCost c;
  c.flops = pb.flops();
  c.bytes_accessed = pb.bytes_accessed();
  c.kernels = pb.has_kernels() ? pb.kernels() : 1;
  if (pb.has_duration_ns()) c.duration_ns = pb.duration_ns();
  SLACKSWAP_ASSIGN_OR_RETURN(c.kind, OpKindFromProto(pb.kind(), where));
  if (pb.has_shape()) {
    const v1::KernelShape& s = pb.shape();
    for (auto [value, field] : {std::pair{s.m(), "m"}, std::pair{s.n(), "n"},
                                std::pair{s.k(), "k"}}) {
      if (value < 0 || value > std::numeric_limits<int32_t>::max()) {
        return absl::InvalidArgumentError(absl::StrCat(
            where(), ": cost.shape.", field, " must be in [0, ",
            std::numeric_limits<int32_t>::max(), "], got ", value));
      }
    }
    c.shape.m = static_cast<int32_t>(s.m());
    c.shape.n = static_cast<int32_t>(s.n());
    c.shape.k = static_cast<int32_t>(s.k());
    c.shape.causal = s.causal();
    if (!c.shape.known()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(),
                       ": cost.shape is present but all its "
                       "dimensions are 0; give them or leave it out"));
    }
  }
  return c;
}

void CostToProto(const OpCost& c, v1::OpCost* pb) {
  pb->set_flops(c.flops);
  pb->set_bytes_accessed(c.bytes_accessed);
  pb->set_kernels(c.kernels);
  if (c.duration_ns.has_value()) pb->set_duration_ns(*c.duration_ns);
  pb->set_kind(OpKindToProto(c.kind));
  if (c.shape.known()) {
    v1::KernelShape* s = pb->mutable_shape();
    s->set_m(c.shape.m);
    s->set_n(c.shape.n);
    s->set_k(c.shape.k);
    s->set_causal(c.shape.causal);
  }
}

absl::StatusOr<TensorKind> TensorKindFromProto(v1::TensorKind k, Where where) {
  switch (k) {
    case v1::TENSOR_KIND_UNSPECIFIED:
    case v1::TENSOR_KIND_ACTIVATION:
      return TensorKind::kActivation;
    case v1::TENSOR_KIND_PARAMETER:
      return TensorKind::kParameter;
    case v1::TENSOR_KIND_GRADIENT:
      return TensorKind::kGradient;
    case v1::TENSOR_KIND_OPTIMIZER_STATE:
      return TensorKind::kOptimizerState;
    case v1::TENSOR_KIND_INPUT:
      return TensorKind::kInput;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(where(), ": kind has unknown value ", k));
  }
}

v1::TensorKind TensorKindToProto(TensorKind k) {
  switch (k) {
    case TensorKind::kActivation:
      return v1::TENSOR_KIND_ACTIVATION;
    case TensorKind::kParameter:
      return v1::TENSOR_KIND_PARAMETER;
    case TensorKind::kGradient:
      return v1::TENSOR_KIND_GRADIENT;
    case TensorKind::kOptimizerState:
      return v1::TENSOR_KIND_OPTIMIZER_STATE;
    case TensorKind::kInput:
      return v1::TENSOR_KIND_INPUT;
  }
  return v1::TENSOR_KIND_UNSPECIFIED;
}

absl::StatusOr<Phase> PhaseFromProto(v1::Phase p, Where where) {
  switch (p) {
    case v1::PHASE_FORWARD:
      return Phase::kForward;
    case v1::PHASE_BACKWARD:
      return Phase::kBackward;
    case v1::PHASE_OPTIMIZER:
      return Phase::kOptimizer;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          where(),
          ": phase must be PHASE_FORWARD, PHASE_BACKWARD or "
          "PHASE_OPTIMIZER, got ",
          v1::Phase_Name(p).empty() ? std::to_string(p) : v1::Phase_Name(p)));
  }
}

v1::Phase PhaseToProto(Phase p) {
  switch (p) {
    case Phase::kForward:
      return v1::PHASE_FORWARD;
    case Phase::kBackward:
      return v1::PHASE_BACKWARD;
    case Phase::kOptimizer:
      return v1::PHASE_OPTIMIZER;
  }
  return v1::PHASE_UNSPECIFIED;
}

absl::StatusOr<CollectiveKind> CollectiveKindFromProto(v1::CollectiveKind k,
                                                       Where where) {
  switch (k) {
    case v1::COLLECTIVE_KIND_ALL_GATHER:
      return CollectiveKind::kAllGather;
    case v1::COLLECTIVE_KIND_REDUCE_SCATTER:
      return CollectiveKind::kReduceScatter;
    case v1::COLLECTIVE_KIND_ALL_REDUCE:
      return CollectiveKind::kAllReduce;
    case v1::COLLECTIVE_KIND_ALL_TO_ALL:
      return CollectiveKind::kAllToAll;
    case v1::COLLECTIVE_KIND_SEND_RECV:
      return CollectiveKind::kSendRecv;
    case v1::COLLECTIVE_KIND_UNSPECIFIED:
      // No kind to default to: each moves its bytes differently.
      return absl::InvalidArgumentError(absl::StrCat(
          where(),
          ": collective.kind is unset; set COLLECTIVE_KIND_ALL_GATHER, "
          "COLLECTIVE_KIND_REDUCE_SCATTER, COLLECTIVE_KIND_ALL_REDUCE, "
          "COLLECTIVE_KIND_ALL_TO_ALL or COLLECTIVE_KIND_SEND_RECV"));
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(where(), ": collective.kind has unknown value ", k));
  }
}

v1::CollectiveKind CollectiveKindToProto(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllGather:
      return v1::COLLECTIVE_KIND_ALL_GATHER;
    case CollectiveKind::kReduceScatter:
      return v1::COLLECTIVE_KIND_REDUCE_SCATTER;
    case CollectiveKind::kAllReduce:
      return v1::COLLECTIVE_KIND_ALL_REDUCE;
    case CollectiveKind::kAllToAll:
      return v1::COLLECTIVE_KIND_ALL_TO_ALL;
    case CollectiveKind::kSendRecv:
      return v1::COLLECTIVE_KIND_SEND_RECV;
  }
  return v1::COLLECTIVE_KIND_UNSPECIFIED;
}

absl::StatusOr<CollectiveAlgorithm> CollectiveAlgorithmFromProto(
    v1::CollectiveAlgorithm a, Where where) {
  switch (a) {
    case v1::COLLECTIVE_ALGORITHM_UNSPECIFIED:
    case v1::COLLECTIVE_ALGORITHM_RING:
      return CollectiveAlgorithm::kRing;
    case v1::COLLECTIVE_ALGORITHM_TREE:
      return CollectiveAlgorithm::kTree;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          where(), ": collective.algorithm has unknown value ", a));
  }
}

v1::CollectiveAlgorithm CollectiveAlgorithmToProto(CollectiveAlgorithm a) {
  switch (a) {
    case CollectiveAlgorithm::kRing:
      return v1::COLLECTIVE_ALGORITHM_RING;
    case CollectiveAlgorithm::kTree:
      return v1::COLLECTIVE_ALGORITHM_TREE;
  }
  return v1::COLLECTIVE_ALGORITHM_UNSPECIFIED;
}

// The enums only: IndexGraph checks the bytes and the group (with messages
// naming the op's collective fields).
absl::StatusOr<Collective> CollectiveFromProto(const v1::Collective& pb,
                                               Where where) {
  Collective c;
  SLACKSWAP_ASSIGN_OR_RETURN(c.kind, CollectiveKindFromProto(pb.kind(), where));
  SLACKSWAP_ASSIGN_OR_RETURN(
      c.algorithm, CollectiveAlgorithmFromProto(pb.algorithm(), where));
  c.bytes = pb.bytes();
  c.group.assign(pb.group().begin(), pb.group().end());
  return c;
}

absl::StatusOr<Duplex> DuplexFromProto(v1::Duplex d, const std::string& name) {
  switch (d) {
    case v1::DUPLEX_UNSPECIFIED:
    case v1::DUPLEX_FULL:
      return Duplex::kFull;
    case v1::DUPLEX_HALF:
      return Duplex::kHalf;
    case v1::DUPLEX_PARTIAL:
      return Duplex::kPartial;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("hardware ", name, ": duplex has unknown value ", d));
  }
}

v1::Duplex DuplexToProto(Duplex d) {
  switch (d) {
    case Duplex::kFull:
      return v1::DUPLEX_FULL;
    case Duplex::kHalf:
      return v1::DUPLEX_HALF;
    case Duplex::kPartial:
      return v1::DUPLEX_PARTIAL;
  }
  return v1::DUPLEX_UNSPECIFIED;
}

// Resolves wire ids to indices; `where` names the referring field.
absl::Status ResolveIds(const google::protobuf::RepeatedField<int64_t>& ids,
                        const GraphConverter::IdIndex& index, Where where,
                        const char* field, TensorIds* out) {
  out->reserve(ids.size());
  for (int64_t id : ids) {
    const int32_t i = index.Find(id);
    if (i < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          where(), ": ", field, " tensor ", id, " does not exist"));
    }
    out->push_back(i);
  }
  return absl::OkStatus();
}

int64_t UsToNs(double us) {
  return static_cast<int64_t>(std::llround(us * 1e3));
}

}  // namespace

namespace {

absl::Status ConversionStopped() {
  return absl::CancelledError("converting the graph stopped");
}

std::string TensorWhere(const v1::Tensor& t) {
  return absl::StrCat("tensor ", t.id(), " (", ShortName(t.name()), ")");
}

// Names are packed into the pool's blocks; dtypes and shapes, which a graph
// repeats across all its tensors, are held once each.
absl::StatusOr<Tensor> TensorFromProto(const v1::Tensor& t, TextPool& text) {
  Tensor tensor;
  const auto where = [&] { return TensorWhere(t); };
  SLACKSWAP_ASSIGN_OR_RETURN(tensor.kind, TensorKindFromProto(t.kind(), where));
  if (!v1::RecomputeClass_IsValid(t.recompute_class())) {
    return absl::InvalidArgumentError(absl::StrCat(
        where(), ": recompute_class has unknown value ", t.recompute_class()));
  }
  tensor.recompute_class = static_cast<RecomputeClass>(t.recompute_class());
  tensor.name = text.Add(t.name());
  tensor.bytes = t.size_bytes();
  tensor.dtype = text.Intern(t.dtype());
  tensor.shape = text.Intern(t.shape());
  tensor.external_id = t.id();
  return tensor;
}

}  // namespace

void GraphConverter::IdIndex::Reserve(int64_t n) { reserve_ = n; }

bool GraphConverter::IdIndex::Add(int64_t id, int32_t* used) {
  if (run_) {
    // Unsigned: a hostile id far from the first does not overflow.
    if (size_ == 0) first_ = id;
    if (static_cast<uint64_t>(id) - static_cast<uint64_t>(first_) ==
        static_cast<uint64_t>(size_)) {
      ++size_;
      return true;
    }
    // Out of the run: the ids so far go to the table.
    run_ = false;
    map_.reserve(static_cast<size_t>(reserve_));
    for (int32_t i = 0; i < size_; ++i) {
      map_.emplace(static_cast<int64_t>(static_cast<uint64_t>(first_) + i), i);
    }
  }
  auto [it, inserted] = map_.emplace(id, size_);
  if (!inserted) {
    *used = it->second;
    return false;
  }
  ++size_;
  return true;
}

int32_t GraphConverter::IdIndex::Find(int64_t id) const {
  if (run_) {
    const uint64_t i =
        static_cast<uint64_t>(id) - static_cast<uint64_t>(first_);
    return i < static_cast<uint64_t>(size_) ? static_cast<int32_t>(i) : -1;
  }
  auto it = map_.find(id);
  return it == map_.end() ? -1 : it->second;
}

GraphConverter::GraphConverter(const StopFn& stop)
    : poller_(stop), stop_(stop) {}

void GraphConverter::Reserve(int64_t tensors, int64_t ops) {
  g_.tensors.reserve(static_cast<size_t>(tensors));
  g_.ops.reserve(static_cast<size_t>(ops));
  tensor_index_.Reserve(tensors);
  op_index_.Reserve(ops);
}

void GraphConverter::SetNames(std::string name, std::string description) {
  g_.name = std::move(name);
  g_.description = std::move(description);
}

absl::Status GraphConverter::AddTensor(const v1::Tensor& t) {
  if (poller_.Stop()) return ConversionStopped();
  const int32_t i = static_cast<int32_t>(g_.tensors.size());
  int32_t used = 0;
  if (!tensor_index_.Add(t.id(), &used)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensors[", i, "]: id ", t.id(), " is already used by tensors[", used,
        "] (", ShortName(g_.tensors[used].name), ")"));
  }
  SLACKSWAP_ASSIGN_OR_RETURN(Tensor tensor, TensorFromProto(t, text_));
  g_.tensors.push_back(std::move(tensor));
  if (t.has_rebuild()) rebuilds_.emplace_back(i, t.rebuild());
  return absl::OkStatus();
}

// Rebuild inputs refer to tensors, so they resolve once all are known.
absl::Status GraphConverter::ResolveRebuilds() {
  rebuilds_resolved_ = true;
  for (const auto& [i, pb] : rebuilds_) {
    if (poller_.Stop()) return ConversionStopped();
    const Tensor& t = g_.tensors[i];
    const auto where = [&] {
      return absl::StrCat("tensor ", t.external_id, " (", ShortName(t.name),
                          ") rebuild");
    };
    Rebuild r;
    SLACKSWAP_RETURN_IF_ERROR(
        ResolveIds(pb.input_ids(), tensor_index_, where, "input", &r.inputs));
    SLACKSWAP_ASSIGN_OR_RETURN(r.cost, CostFromProto(pb.cost(), where));
    g_.tensors[i].rebuild = std::move(r);
  }
  rebuilds_.clear();
  rebuilds_.shrink_to_fit();
  return absl::OkStatus();
}

absl::Status GraphConverter::AddOp(const v1::Op& o) {
  if (!rebuilds_resolved_) SLACKSWAP_RETURN_IF_ERROR(ResolveRebuilds());
  if (poller_.Stop()) return ConversionStopped();
  const int32_t i = static_cast<int32_t>(g_.ops.size());
  const auto where = [&] { return OpWhere(o, i); };
  int32_t used = 0;
  if (!op_index_.Add(o.id(), &used)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ops[", i, "]: id ", o.id(), " is already used by ops[",
                     used, "] (", ShortName(g_.ops[used].name), ")"));
  }
  Op op;
  SLACKSWAP_ASSIGN_OR_RETURN(op.phase, PhaseFromProto(o.phase(), where));
  SLACKSWAP_ASSIGN_OR_RETURN(op.cost, CostFromProto(o.cost(), where));
  SLACKSWAP_RETURN_IF_ERROR(
      ResolveIds(o.input_ids(), tensor_index_, where, "input", &op.inputs));
  SLACKSWAP_RETURN_IF_ERROR(
      ResolveIds(o.output_ids(), tensor_index_, where, "output", &op.outputs));
  op.name = text_.Add(o.name());
  op.external_id = o.id();
  op.layer = o.layer();
  op.workspace_bytes = o.workspace_bytes();
  if (o.has_collective()) {
    SLACKSWAP_ASSIGN_OR_RETURN(op.collective,
                               CollectiveFromProto(o.collective(), where));
  }
  g_.ops.push_back(std::move(op));
  return absl::OkStatus();
}

absl::StatusOr<Graph> GraphConverter::Finish() && {
  if (!rebuilds_resolved_) SLACKSWAP_RETURN_IF_ERROR(ResolveRebuilds());
  SLACKSWAP_RETURN_IF_ERROR(IndexGraph(g_, stop_));
  return std::move(g_);
}

absl::StatusOr<Graph> GraphFromProto(const v1::OperatorGraph& pb,
                                     const StopFn& stop) {
  if (pb.tensors_size() > kMaxEntities || pb.ops_size() > kMaxEntities) {
    return absl::InvalidArgumentError(absl::StrCat(
        "graph ", QuoteInput(pb.name()), " is too large: ", pb.tensors_size(),
        " tensors, ", pb.ops_size(), " ops"));
  }
  GraphConverter c(stop);
  c.SetNames(pb.name(), pb.description());
  c.Reserve(pb.tensors_size(), pb.ops_size());
  for (const v1::Tensor& t : pb.tensors()) {
    SLACKSWAP_RETURN_IF_ERROR(c.AddTensor(t));
  }
  for (const v1::Op& o : pb.ops()) SLACKSWAP_RETURN_IF_ERROR(c.AddOp(o));
  return std::move(c).Finish();
}

v1::OperatorGraph GraphToProto(const Graph& g) {
  v1::OperatorGraph pb;
  pb.set_name(g.name);
  pb.set_description(g.description);
  for (const Tensor& t : g.tensors) {
    v1::Tensor* out = pb.add_tensors();
    out->set_id(t.external_id);
    out->set_name(t.name.str());
    out->set_size_bytes(t.bytes);
    out->set_kind(TensorKindToProto(t.kind));
    out->set_recompute_class(
        static_cast<v1::RecomputeClass>(t.recompute_class));
    out->set_dtype(t.dtype.str());
    out->set_shape(t.shape.str());
    if (t.rebuild.has_value()) {
      v1::Rebuild* r = out->mutable_rebuild();
      for (int32_t in : t.rebuild->inputs) {
        r->add_input_ids(g.tensors[in].external_id);
      }
      CostToProto(t.rebuild->cost, r->mutable_cost());
    }
  }
  for (const Op& o : g.ops) {
    v1::Op* out = pb.add_ops();
    out->set_id(o.external_id);
    out->set_name(o.name.str());
    out->set_phase(PhaseToProto(o.phase));
    for (int32_t in : o.inputs) out->add_input_ids(g.tensors[in].external_id);
    for (int32_t t : o.outputs) out->add_output_ids(g.tensors[t].external_id);
    out->set_workspace_bytes(o.workspace_bytes);
    out->set_layer(o.layer);
    CostToProto(o.cost, out->mutable_cost());
    if (o.collective.has_value()) {
      v1::Collective* c = out->mutable_collective();
      c->set_kind(CollectiveKindToProto(o.collective->kind));
      c->set_algorithm(CollectiveAlgorithmToProto(o.collective->algorithm));
      c->set_bytes(o.collective->bytes);
      for (int32_t r : o.collective->group) c->add_group(r);
    }
  }
  return pb;
}

absl::StatusOr<Hardware> HardwareFromProto(const v1::HardwareProfile& pb) {
  Hardware hw;
  hw.name = pb.name();
  hw.gpu = pb.gpu();
  hw.link = pb.link();
  hw.memory_gb = pb.memory_gb();
  hw.peak_tflops_bf16 = pb.peak_tflops_bf16();
  hw.peak_tflops_tf32 = pb.peak_tflops_tf32();
  hw.peak_tflops_fp32 = pb.peak_tflops_fp32();
  hw.hbm_gbps = pb.hbm_gbps();
  hw.hbm_efficiency = pb.hbm_efficiency();
  hw.matmul_efficiency = pb.matmul_efficiency();
  hw.attn_efficiency_fwd = pb.attn_efficiency_fwd();
  hw.attn_efficiency_bwd = pb.attn_efficiency_bwd();
  hw.link_theoretical_gbps_per_dir = pb.link_theoretical_gbps_per_dir();
  hw.h2d_gbps = pb.h2d_gbps();
  hw.d2h_gbps = pb.d2h_gbps();
  hw.bidir_h2d_gbps = pb.bidir_h2d_gbps();
  hw.bidir_d2h_gbps = pb.bidir_d2h_gbps();
  SLACKSWAP_ASSIGN_OR_RETURN(
      hw.duplex, DuplexFromProto(pb.duplex(), QuoteInput(pb.name())));
  hw.copy_engines = pb.copy_engines();
  for (auto [us, ns, field] :
       {std::tuple{pb.transfer_latency_us(), &hw.transfer_latency_ns,
                   "transfer_latency_us"},
        std::tuple{pb.kernel_launch_us(), &hw.kernel_launch_ns,
                   "kernel_launch_us"}}) {
    if (!std::isfinite(us) || us < 0 || us > 1e12) {
      return absl::InvalidArgumentError(absl::StrCat(
          "hardware ", QuoteInput(pb.name()), ": ", field,
          " must be a finite number of microseconds >= 0, got ", us));
    }
    *ns = UsToNs(us);
  }
  hw.pinned_host_memory_bytes = pb.pinned_host_memory_bytes();
  if (pb.has_framework_reserve_bytes()) {
    hw.framework_reserve_bytes = pb.framework_reserve_bytes();
  }
  // Bounded before copying: the validation below names the limits, but a
  // hostile profile must not make us copy millions of points first.
  if (pb.attention_efficiency_size() > kMaxEfficiencyCurves) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hardware ", QuoteInput(pb.name()), ": attention_efficiency has ",
        pb.attention_efficiency_size(), " curves; at most ",
        kMaxEfficiencyCurves));
  }
  for (const v1::AttentionEfficiencyCurve& c : pb.attention_efficiency()) {
    if (c.seq_len_size() > kMaxEfficiencyPoints ||
        c.fwd_size() > kMaxEfficiencyPoints ||
        c.bwd_size() > kMaxEfficiencyPoints) {
      return absl::InvalidArgumentError(
          absl::StrCat("hardware ", QuoteInput(pb.name()),
                       ": an attention_efficiency curve has more than ",
                       kMaxEfficiencyPoints, " points"));
    }
    AttentionEfficiencyCurve curve;
    curve.causal = c.causal();
    curve.head_dim = c.head_dim();
    curve.seq_len.assign(c.seq_len().begin(), c.seq_len().end());
    curve.fwd.assign(c.fwd().begin(), c.fwd().end());
    curve.bwd.assign(c.bwd().begin(), c.bwd().end());
    hw.attention_efficiency.push_back(std::move(curve));
  }
  if (pb.has_gemm_efficiency()) {
    const v1::GemmEfficiencyCurve& g = pb.gemm_efficiency();
    if (g.size_size() == 0 && g.efficiency_size() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "hardware ", QuoteInput(pb.name()),
          ": gemm_efficiency is present but empty; give at least one point "
          "or leave it out"));
    }
    if (g.size_size() > kMaxEfficiencyPoints ||
        g.efficiency_size() > kMaxEfficiencyPoints) {
      return absl::InvalidArgumentError(absl::StrCat(
          "hardware ", QuoteInput(pb.name()),
          ": gemm_efficiency has more than ", kMaxEfficiencyPoints, " points"));
    }
    hw.gemm_efficiency.size.assign(g.size().begin(), g.size().end());
    hw.gemm_efficiency.efficiency.assign(g.efficiency().begin(),
                                         g.efficiency().end());
  }
  SLACKSWAP_RETURN_IF_ERROR(ValidateHardware(hw));
  return hw;
}

v1::HardwareProfile HardwareToProto(const Hardware& hw) {
  v1::HardwareProfile pb;
  pb.set_name(hw.name);
  pb.set_gpu(hw.gpu);
  pb.set_link(hw.link);
  pb.set_memory_gb(hw.memory_gb);
  pb.set_peak_tflops_bf16(hw.peak_tflops_bf16);
  pb.set_peak_tflops_tf32(hw.peak_tflops_tf32);
  pb.set_peak_tflops_fp32(hw.peak_tflops_fp32);
  pb.set_hbm_gbps(hw.hbm_gbps);
  pb.set_hbm_efficiency(hw.hbm_efficiency);
  pb.set_matmul_efficiency(hw.matmul_efficiency);
  pb.set_attn_efficiency_fwd(hw.attn_efficiency_fwd);
  pb.set_attn_efficiency_bwd(hw.attn_efficiency_bwd);
  pb.set_link_theoretical_gbps_per_dir(hw.link_theoretical_gbps_per_dir);
  pb.set_h2d_gbps(hw.h2d_gbps);
  pb.set_d2h_gbps(hw.d2h_gbps);
  pb.set_duplex(DuplexToProto(hw.duplex));
  pb.set_bidir_h2d_gbps(hw.bidir_h2d_gbps);
  pb.set_bidir_d2h_gbps(hw.bidir_d2h_gbps);
  pb.set_copy_engines(hw.copy_engines);
  pb.set_transfer_latency_us(hw.transfer_latency_ns / 1e3);
  pb.set_kernel_launch_us(hw.kernel_launch_ns / 1e3);
  pb.set_pinned_host_memory_bytes(hw.pinned_host_memory_bytes);
  pb.set_framework_reserve_bytes(hw.framework_reserve_bytes);
  for (const AttentionEfficiencyCurve& c : hw.attention_efficiency) {
    v1::AttentionEfficiencyCurve* out = pb.add_attention_efficiency();
    out->set_causal(c.causal);
    out->set_head_dim(c.head_dim);
    for (int64_t s : c.seq_len) out->add_seq_len(s);
    for (double e : c.fwd) out->add_fwd(e);
    for (double e : c.bwd) out->add_bwd(e);
  }
  if (!hw.gemm_efficiency.empty()) {
    v1::GemmEfficiencyCurve* g = pb.mutable_gemm_efficiency();
    for (int64_t s : hw.gemm_efficiency.size) g->add_size(s);
    for (double e : hw.gemm_efficiency.efficiency) g->add_efficiency(e);
  }
  return pb;
}

namespace {

LinkRates LinkFromProto(const v1::LinkRates& pb) {
  return LinkRates{.h2d_gbps = pb.h2d_gbps(),
                   .d2h_gbps = pb.d2h_gbps(),
                   .bidir_h2d_gbps = pb.bidir_h2d_gbps(),
                   .bidir_d2h_gbps = pb.bidir_d2h_gbps()};
}

void LinkToProto(const LinkRates& r, v1::LinkRates* pb) {
  pb->set_h2d_gbps(r.h2d_gbps);
  pb->set_d2h_gbps(r.d2h_gbps);
  pb->set_bidir_h2d_gbps(r.bidir_h2d_gbps);
  pb->set_bidir_d2h_gbps(r.bidir_d2h_gbps);
}

}  // namespace

absl::StatusOr<Node> NodeFromProto(const v1::NodeProfile& pb) {
  const std::string head = absl::StrCat("node ", QuoteInput(pb.name()), ": ");
  Node node;
  node.name = pb.name();
  node.description = pb.description();
  switch (pb.gpu_case()) {
    case v1::NodeProfile::kGpuInline: {
      absl::StatusOr<Hardware> hw = HardwareFromProto(pb.gpu_inline());
      if (!hw.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(head, "gpu_inline: ", hw.status().message()));
      }
      node.gpu = *std::move(hw);
      break;
    }
    case v1::NodeProfile::kGpuName: {
      absl::StatusOr<Hardware> hw = FindHardware(pb.gpu_name());
      if (!hw.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(head, "gpu_name: ", hw.status().message()));
      }
      node.gpu = *std::move(hw);
      break;
    }
    case v1::NodeProfile::GPU_NOT_SET:
      return absl::InvalidArgumentError(
          absl::StrCat(head, "gpu: set gpu_inline or gpu_name"));
  }
  node.num_gpus = pb.num_gpus();
  // ValidateNode bounds the lists; copying them first costs no more than
  // the message already does.
  for (const v1::PcieSwitch& sw : pb.switches()) {
    node.switches.push_back(PcieSwitch{
        .name = sw.name(),
        .gpus = std::vector<int32_t>(sw.gpus().begin(), sw.gpus().end()),
        .socket = sw.socket(),
        .uplink = LinkFromProto(sw.uplink())});
  }
  for (const v1::Socket& socket : pb.sockets()) {
    node.sockets.push_back(
        Socket{.name = socket.name(),
               .memory = LinkFromProto(socket.memory()),
               .pinned_host_memory_bytes = socket.pinned_host_memory_bytes()});
  }
  node.nvlink_gbps = pb.nvlink_gbps();
  node.inter_socket_gbps = pb.inter_socket_gbps();
  for (const v1::Nic& nic : pb.nics()) {
    node.nics.push_back(Nic{.name = nic.name(),
                            .pcie_switch = nic.pcie_switch(),
                            .gbps = nic.gbps()});
  }
  node.sources.assign(pb.sources().begin(), pb.sources().end());
  node.collective_hop_latency_ns =
      node.nvlink_gbps > 0 ? kNcclNvlinkHopLatencyNs : kNcclPcieHopLatencyNs;
  for (auto [has, us, ns, field] :
       {std::tuple{pb.has_collective_base_latency_us(),
                   pb.collective_base_latency_us(),
                   &node.collective_base_latency_ns,
                   "collective_base_latency_us"},
        std::tuple{
            pb.has_collective_hop_latency_us(), pb.collective_hop_latency_us(),
            &node.collective_hop_latency_ns, "collective_hop_latency_us"}}) {
    if (!has) continue;
    if (!std::isfinite(us) || us < 0 || us > 1e6) {
      return absl::InvalidArgumentError(absl::StrCat(
          "node ", QuoteInput(pb.name()), ": ", field,
          " must be a number of microseconds in [0, 10^6], got ", us));
    }
    *ns = UsToNs(us);
  }
  SLACKSWAP_RETURN_IF_ERROR(ValidateNode(node));
  return node;
}

v1::NodeProfile NodeToProto(const Node& node) {
  v1::NodeProfile pb;
  pb.set_name(node.name);
  pb.set_description(node.description);
  *pb.mutable_gpu_inline() = HardwareToProto(node.gpu);
  pb.set_num_gpus(node.num_gpus);
  for (const PcieSwitch& sw : node.switches) {
    v1::PcieSwitch* out = pb.add_switches();
    out->set_name(sw.name);
    for (int32_t g : sw.gpus) out->add_gpus(g);
    out->set_socket(sw.socket);
    LinkToProto(sw.uplink, out->mutable_uplink());
  }
  for (const Socket& socket : node.sockets) {
    v1::Socket* out = pb.add_sockets();
    out->set_name(socket.name);
    LinkToProto(socket.memory, out->mutable_memory());
    out->set_pinned_host_memory_bytes(socket.pinned_host_memory_bytes);
  }
  pb.set_nvlink_gbps(node.nvlink_gbps);
  pb.set_inter_socket_gbps(node.inter_socket_gbps);
  for (const Nic& nic : node.nics) {
    v1::Nic* out = pb.add_nics();
    out->set_name(nic.name);
    out->set_pcie_switch(nic.pcie_switch);
    out->set_gbps(nic.gbps);
  }
  for (const std::string& source : node.sources) pb.add_sources(source);
  pb.set_collective_base_latency_us(node.collective_base_latency_ns / 1e3);
  pb.set_collective_hop_latency_us(node.collective_hop_latency_ns / 1e3);
  return pb;
}

absl::StatusOr<Plan> PlanFromProto(const v1::Plan& pb, const Graph& g) {
  absl::flat_hash_map<int64_t, int32_t> tensor_index, op_index;
  for (size_t i = 0; i < g.tensors.size(); ++i) {
    tensor_index[g.tensors[i].external_id] = static_cast<int32_t>(i);
  }
  for (size_t i = 0; i < g.ops.size(); ++i) {
    op_index[g.ops[i].external_id] = static_cast<int32_t>(i);
  }
  if (pb.budget_bytes() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan: budget_bytes must be >= 0, got ", pb.budget_bytes()));
  }
  Plan plan = Plan::KeepAll(g);
  plan.facts.resize(plan.decisions.size());
  plan.policy = pb.policy();
  plan.budget_bytes = pb.budget_bytes();
  std::vector<bool> seen(g.tensors.size(), false);
  for (int i = 0; i < pb.decisions_size(); ++i) {
    const v1::Decision& d = pb.decisions(i);
    auto it = tensor_index.find(d.tensor_id());
    if (it == tensor_index.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan decisions[", i, "]: tensor ", d.tensor_id(),
                       " does not exist in graph '", g.name, "'"));
    }
    const int32_t t = it->second;
    if (seen[t]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "plan decisions[", i, "]: a second decision for ", g.TensorLabel(t)));
    }
    seen[t] = true;
    Decision& out = plan.decisions[t];
    DecisionFacts& facts = plan.facts[t];
    facts.reason = d.reason();
    facts.transfer_ns = d.transfer_ns();
    facts.recompute_ns = d.recompute_ns();
    switch (d.action()) {
      case v1::ACTION_UNSPECIFIED:
      case v1::ACTION_KEEP:
        out.action = Action::kKeep;
        break;
      case v1::ACTION_RECOMPUTE:
        out.action = Action::kRecompute;
        break;
      case v1::ACTION_SWAP: {
        out.action = Action::kSwap;
        if (!d.has_prefetch_after_op_id()) {
          return absl::InvalidArgumentError(
              absl::StrCat("plan decisions[", i, "] (", g.TensorLabel(t),
                           "): swap needs prefetch_after_op_id"));
        }
        auto op = op_index.find(d.prefetch_after_op_id());
        if (op == op_index.end()) {
          return absl::InvalidArgumentError(
              absl::StrCat("plan decisions[", i, "] (", g.TensorLabel(t),
                           "): prefetch_after_op_id ", d.prefetch_after_op_id(),
                           " does not exist"));
        }
        out.prefetch_after_op = op->second;
        break;
      }
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("plan decisions[", i, "] (", g.TensorLabel(t),
                         "): action has unknown value ", d.action()));
    }
  }
  return plan;
}

v1::Plan PlanToProto(const Plan& plan, const Graph& g,
                     const std::string& hardware_name, bool include_kept) {
  v1::Plan pb;
  pb.set_graph_name(g.name);
  pb.set_hardware_name(hardware_name);
  pb.set_policy(plan.policy);
  pb.set_budget_bytes(plan.budget_bytes);
  for (int32_t t : g.index.saved) {
    const Decision& d = plan.decisions[t];
    if (d.action == Action::kKeep && !include_kept) continue;
    v1::Decision* out = pb.add_decisions();
    out->set_tensor_id(g.tensors[t].external_id);
    out->set_tensor_name(g.tensors[t].name.str());
    out->set_size_bytes(g.tensors[t].bytes);
    const DecisionFacts& facts = plan.FactsOf(t);
    out->set_reason(facts.reason.str());
    out->set_transfer_ns(facts.transfer_ns);
    out->set_recompute_ns(facts.recompute_ns);
    switch (d.action) {
      case Action::kKeep:
        out->set_action(v1::ACTION_KEEP);
        break;
      case Action::kRecompute:
        out->set_action(v1::ACTION_RECOMPUTE);
        break;
      case Action::kSwap:
        out->set_action(v1::ACTION_SWAP);
        out->set_prefetch_after_op_id(g.ops[d.prefetch_after_op].external_id);
        break;
    }
  }
  return pb;
}

v1::SimulationResult ResultToProto(const SimResult& r, const Graph& g) {
  v1::SimulationResult pb;
  pb.set_feasible(r.feasible);
  pb.set_infeasible_reason(r.infeasible_reason);
  pb.set_step_ns(r.step_ns);
  pb.set_ideal_step_ns(r.ideal_step_ns);
  pb.set_throughput_retained(r.throughput_retained);
  pb.set_peak_activation_bytes(r.peak_activation_bytes);
  pb.set_peak_activation_ns(r.peak_activation_ns);
  pb.set_peak_transient_bytes(r.peak_transient_bytes);
  pb.set_budget_bytes(r.budget_bytes);
  pb.set_d2h_bytes(r.d2h_bytes);
  pb.set_h2d_bytes(r.h2d_bytes);
  pb.set_recompute_ns(r.recompute_ns);
  pb.mutable_stalls()->set_prefetch_ns(r.stall_prefetch_ns);
  pb.mutable_stalls()->set_swap_out_ns(r.stall_swap_out_ns);
  pb.mutable_stalls()->set_memory_ns(r.stall_memory_ns);
  pb.mutable_stalls()->set_collective_ns(r.stall_collective_ns);
  for (const MemorySample& s : r.timeline) {
    v1::MemoryPoint* p = pb.add_memory_timeline();
    p->set_time_ns(s.time_ns);
    p->set_activation_bytes(s.activation_bytes);
    p->set_transient_bytes(s.transient_bytes);
    p->set_allocated_bytes(s.allocated_bytes);
    p->set_reserved_bytes(s.reserved_bytes);
  }
  for (const SimEvent& e : r.events) {
    v1::StreamEvent* out = pb.add_events();
    // Compute and collective events name an op; copies, a tensor.
    const bool compute =
        e.stream == StreamId::kCompute || e.stream == StreamId::kComm;
    switch (e.stream) {
      case StreamId::kCompute:
        out->set_stream(v1::STREAM_COMPUTE);
        break;
      case StreamId::kD2H:
        out->set_stream(v1::STREAM_D2H);
        break;
      case StreamId::kH2D:
        out->set_stream(v1::STREAM_H2D);
        break;
      case StreamId::kComm:
        out->set_stream(v1::STREAM_COMM);
        break;
    }
    switch (e.type) {
      case EventType::kOp:
        out->set_kind(v1::EVENT_KIND_OP);
        break;
      case EventType::kRecompute:
        out->set_kind(v1::EVENT_KIND_RECOMPUTE);
        break;
      case EventType::kSwapOut:
        out->set_kind(v1::EVENT_KIND_SWAP_OUT);
        break;
      case EventType::kPrefetch:
        out->set_kind(v1::EVENT_KIND_PREFETCH);
        break;
      case EventType::kCollective:
        out->set_kind(v1::EVENT_KIND_COLLECTIVE);
        break;
    }
    out->set_name(
        (compute ? g.ops[e.index].name : g.tensors[e.index].name).str());
    out->set_id(compute ? g.ops[e.index].external_id
                        : g.tensors[e.index].external_id);
    out->set_start_ns(e.start_ns);
    out->set_end_ns(e.end_ns);
    if (e.stream == StreamId::kD2H || e.stream == StreamId::kH2D) {
      out->set_bytes(g.tensors[e.index].bytes);
    }
  }
  pb.set_unconstrained_peak_bytes(r.unconstrained_peak_bytes);
  pb.set_static_bytes(r.static_bytes);
  pb.set_peak_pinned_host_bytes(r.peak_pinned_host_bytes);
  pb.set_swapped_tensors(r.swapped_tensors);
  pb.set_recomputed_tensors(r.recomputed_tensors);
  pb.set_events_processed(r.events_processed);
  pb.set_peak_transient_ns(r.peak_transient_ns);
  if (r.device.has_value()) *pb.mutable_device() = DeviceToProto(*r.device);
  return pb;
}

v1::DeviceMemory DeviceToProto(const DeviceReport& d) {
  v1::DeviceMemory pb;
  pb.set_capacity_bytes(d.capacity_bytes);
  pb.set_framework_reserve_bytes(d.reserve_bytes);
  pb.set_headroom_bytes(d.headroom_bytes);
  pb.set_peak_live_bytes(d.peak_live_bytes);
  pb.set_peak_live_ns(d.peak_live_ns);
  pb.set_peak_allocated_bytes(d.peak_allocated_bytes);
  pb.set_peak_allocated_ns(d.peak_allocated_ns);
  pb.set_peak_reserved_bytes(d.peak_reserved_bytes);
  pb.set_peak_reserved_ns(d.peak_reserved_ns);
  pb.set_peak_reserved_step(d.peak_reserved_step);
  pb.set_fragmentation_bytes(d.fragmentation_bytes);
  pb.set_segments(d.segments);
  pb.set_steps(d.steps);
  pb.set_expandable_segments(d.expandable_segments);
  pb.set_required_bytes(d.required_bytes);
  pb.set_fits_device(d.fits);
  return pb;
}

v1::NodeSimulation NodeResultToProto(const NodeSimResult& r, const Node& node,
                                     absl::Span<const RankStep> ranks) {
  v1::NodeSimulation pb;
  pb.set_node_name(node.name);
  pb.set_feasible(r.feasible);
  pb.set_infeasible_reason(r.infeasible_reason);
  pb.set_step_ns(r.step_ns);
  pb.set_ideal_step_ns(r.ideal_step_ns);
  pb.set_throughput_retained(r.throughput_retained);
  for (size_t i = 0; i < r.ranks.size() && i < ranks.size(); ++i) {
    v1::RankResult* out = pb.add_ranks();
    out->set_rank(static_cast<int32_t>(i));
    out->set_gpu(ranks[i].gpu);
    *out->mutable_result() = ResultToProto(r.ranks[i], *ranks[i].graph);
  }
  for (const LinkUsage& link : r.links) {
    v1::LinkUsage* out = pb.add_links();
    for (int32_t rank : link.ranks) out->add_ranks(rank);
    out->set_name(link.name);
    out->set_h2d_bytes(link.h2d_bytes);
    out->set_d2h_bytes(link.d2h_bytes);
    out->set_h2d_utilization(link.h2d_utilization);
    out->set_d2h_utilization(link.d2h_utilization);
    for (const LinkLoadPoint& p : link.load) {
      v1::LinkLoadPoint* point = out->add_load();
      point->set_time_ns(p.time_ns);
      point->set_h2d_bytes_per_ns(p.h2d_bytes_per_ns);
      point->set_d2h_bytes_per_ns(p.d2h_bytes_per_ns);
    }
  }
  for (size_t s = 0; s < node.sockets.size(); ++s) {
    v1::SocketUsage* out = pb.add_sockets();
    out->set_name(node.sockets[s].name);
    out->set_peak_pinned_bytes(s < r.peak_pinned_bytes_per_socket.size()
                                   ? r.peak_pinned_bytes_per_socket[s]
                                   : 0);
    out->set_pinned_capacity_bytes(node.sockets[s].pinned_host_memory_bytes);
  }
  pb.set_events_processed(r.events_processed);
  return pb;
}

}  // namespace slackswap
