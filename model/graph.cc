#include "model/graph.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/format.h"
#include "common/status_macros.h"

namespace slackswap {
namespace {

bool AddOverflows(int64_t a, int64_t b, int64_t* sum) {
  return __builtin_add_overflow(a, b, sum);
}

// A shape names every dimension its kind's table reads, and only GEMMs and
// fused attention carry one (the tables cost nothing else).
absl::Status CheckKernelShape(const OpCost& cost,
                              absl::FunctionRef<std::string()> where) {
  const KernelShape& s = cost.shape;
  if (!s.known()) return absl::OkStatus();
  if (s.m < 0 || s.n < 0 || s.k < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        where(), ": cost.shape dimensions must be >= 0, got m=", s.m,
        " n=", s.n, " k=", s.k));
  }
  switch (cost.kind) {
    case OpKind::kMatmul:
    case OpKind::kBatchedMatmul:
      if (s.m == 0 || s.n == 0 || s.k == 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            where(), ": cost.shape of a GEMM needs m, n and k all > 0, got m=",
            s.m, " n=", s.n, " k=", s.k));
      }
      if (s.causal) {
        return absl::InvalidArgumentError(
            absl::StrCat(where(),
                         ": cost.shape.causal is for attention, not a "
                         "GEMM"));
      }
      return absl::OkStatus();
    case OpKind::kFlashAttention:
      if (s.n == 0 || s.k == 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            where(),
            ": cost.shape of attention needs n (keys per sequence) and k "
            "(head dimension) > 0, got n=",
            s.n, " k=", s.k));
      }
      return absl::OkStatus();
    case OpKind::kMemoryBound:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      where(),
      ": cost.shape is only for GEMMs and fused attention (the efficiency "
      "tables cost nothing else); this op's kind is memory bound"));
}

// `where()` names the op or recipe whose cost it is: made only for an error
// (an op's label is a string built from its name, on every op of a graph).
absl::Status CheckCost(const OpCost& cost,
                       absl::FunctionRef<std::string()> where) {
  if (std::isnan(cost.flops) || std::isinf(cost.flops)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where(), ": cost.flops must be finite, got ", cost.flops));
  }
  if (cost.flops < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where(), ": cost.flops must be >= 0, got ", cost.flops));
  }
  if (cost.bytes_accessed < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where(), ": cost.bytes_accessed must be >= 0, got ",
                     cost.bytes_accessed));
  }
  if (cost.kernels < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        where(), ": cost.kernels must be >= 0, got ", cost.kernels));
  }
  if (cost.duration_ns.has_value() && *cost.duration_ns < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        where(), ": cost.duration_ns must be >= 0, got ", *cost.duration_ns));
  }
  return CheckKernelShape(cost, where);
}

// Finds a cycle in the dataflow (op -> op through tensors), ignoring launch
// order, and describes it; empty if the ops are merely out of order.
std::string DescribeCycle(const Graph& g,
                          const std::vector<int32_t>& producer) {
  const int32_t n = static_cast<int32_t>(g.ops.size());
  // Iterative DFS over "op depends on producer of its input".
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on stack, 2 done
  std::vector<int32_t> parent(n, kNone);
  for (int32_t root = 0; root < n; ++root) {
    if (color[root] != 0) continue;
    std::vector<std::pair<int32_t, size_t>> stack = {{root, 0}};
    color[root] = 1;
    while (!stack.empty()) {
      auto& [op, next] = stack.back();
      const TensorIds& in = g.ops[op].inputs;
      if (next == in.size()) {
        color[op] = 2;
        stack.pop_back();
        continue;
      }
      const int32_t dep = producer[in[next++]];
      if (dep == kNone) continue;
      if (color[dep] == 1) {
        // The cycle may be as long as the graph: name a few ops of it.
        constexpr size_t kShown = 8;
        std::vector<std::string> names;
        size_t length = 1;
        for (int32_t at = op; at != dep && at != kNone; at = parent[at]) {
          if (names.size() < kShown) names.push_back(g.OpLabel(at));
          ++length;
        }
        const bool cut = length > kShown + 1;
        std::string text =
            absl::StrCat(g.OpLabel(dep), cut ? " <- ... <- " : " <- ",
                         absl::StrJoin(names.rbegin(), names.rend(), " <- "));
        if (cut) absl::StrAppend(&text, " (", length, " ops in all)");
        return text;
      }
      if (color[dep] == 0) {
        color[dep] = 1;
        parent[dep] = op;
        stack.push_back({dep, 0});
      }
    }
  }
  return "";
}

// IndexGraph in two halves: validation, which finds each tensor's producer
// as it checks the ops' outputs (the checks of the inputs need them), then
// indexing. Both poll one stop function through one poller, and Poll() is
// the one place that says so.
class Indexer {
 public:
  Indexer(Graph& g, const StopFn& stop)
      : g_(g),
        idx_(g.index),
        num_tensors_(static_cast<int32_t>(g.tensors.size())),
        num_ops_(static_cast<int32_t>(g.ops.size())),
        poller_(stop) {}

  // Every check; on success idx_.producer is set and the rest of idx_ empty.
  absl::Status Validate() {
    if (num_ops_ == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph ", QuoteInput(g_.name), " has no ops"));
    }
    int64_t total_bytes = 0;
    SLACKSWAP_RETURN_IF_ERROR(CheckTensors(total_bytes));
    idx_ = GraphIndex();
    idx_.producer.assign(num_tensors_, kNone);
    SLACKSWAP_RETURN_IF_ERROR(CheckOps(total_bytes));
    SLACKSWAP_RETURN_IF_ERROR(CheckRebuildOrder());
    return CheckInputs();
  }

  // The rest of the index. REQUIRES: Validate() succeeded.
  absl::Status Index() {
    idx_.last_fwd_use.assign(num_tensors_, kNone);
    idx_.first_bwd_use.assign(num_tensors_, kNone);
    idx_.last_use.assign(num_tensors_, kNone);
    idx_.is_saved.assign(num_tensors_, false);
    std::vector<int32_t> consumer_count(num_tensors_, 0);
    SLACKSWAP_RETURN_IF_ERROR(IndexUses(consumer_count));
    SLACKSWAP_RETURN_IF_ERROR(IndexConsumers(consumer_count));
    SLACKSWAP_RETURN_IF_ERROR(IndexOpTensors());
    return IndexSaved();
  }

 private:
  absl::Status Poll() {
    if (poller_.Stop())
      return absl::CancelledError("indexing the graph stopped");
    return absl::OkStatus();
  }

  // Adds `bytes`, the `field` of what `label()` names, to the graph's
  // total: none negative, the total within kMaxGraphBytes. The label is
  // made only for an error.
  template <typename Label>
  static absl::Status CountBytes(const Label& label, const char* field,
                                 int64_t bytes, int64_t& total_bytes) {
    if (bytes < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(label(), ": ", field, " must be >= 0, got ", bytes));
    }
    if (AddOverflows(total_bytes, bytes, &total_bytes) ||
        total_bytes > kMaxGraphBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(label(), ": ", field, " makes the graph's bytes exceed ",
                       kMaxGraphBytes, " (2^60)"));
    }
    return absl::OkStatus();
  }

  absl::Status CheckTensors(int64_t& total_bytes) {
    for (int32_t t = 0; t < num_tensors_; ++t) {
      SLACKSWAP_RETURN_IF_ERROR(Poll());
      const Tensor& tensor = g_.tensors[t];
      SLACKSWAP_RETURN_IF_ERROR(CountBytes([&] { return g_.TensorLabel(t); },
                                           "size_bytes", tensor.bytes,
                                           total_bytes));
      if (!tensor.rebuild.has_value()) continue;
      const auto where = [&] {
        return absl::StrCat(g_.TensorLabel(t), " rebuild");
      };
      SLACKSWAP_RETURN_IF_ERROR(CheckCost(tensor.rebuild->cost, where));
      for (int32_t in : tensor.rebuild->inputs) {
        if (in < 0 || in >= num_tensors_) {
          return absl::InvalidArgumentError(
              absl::StrCat(where(), ": input tensor ", in, " does not exist"));
        }
      }
    }
    return absl::OkStatus();
  }

  // Producers first, so a read before production can be told from a read of
  // a tensor nobody produces (a static input).
  absl::Status CheckOps(int64_t& total_bytes) {
    for (int32_t o = 0; o < num_ops_; ++o) {
      SLACKSWAP_RETURN_IF_ERROR(Poll());
      const Op& op = g_.ops[o];
      SLACKSWAP_RETURN_IF_ERROR(
          CheckCost(op.cost, [&] { return g_.OpLabel(o); }));
      SLACKSWAP_RETURN_IF_ERROR(CountBytes([&] { return g_.OpLabel(o); },
                                           "workspace_bytes",
                                           op.workspace_bytes, total_bytes));
      for (int32_t out : op.outputs) {
        SLACKSWAP_RETURN_IF_ERROR(CheckOutput(o, out));
        idx_.producer[out] = o;
      }
      if (op.collective.has_value()) {
        SLACKSWAP_RETURN_IF_ERROR(CheckCollective(o, *op.collective));
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckCollective(int32_t o, const Collective& c) const {
    const auto where = [&] {
      return absl::StrCat(g_.OpLabel(o), ": collective");
    };
    if (g_.ops[o].workspace_bytes != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(g_.OpLabel(o),
                       ": a collective takes no workspace (workspace_bytes "
                       "must be 0, got ",
                       g_.ops[o].workspace_bytes, ")"));
    }
    if (c.bytes < 0 || c.bytes > kMaxGraphBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(), ".bytes must be in [0, ", kMaxGraphBytes,
                       "], got ", c.bytes));
    }
    if (c.group.empty() ||
        static_cast<int64_t>(c.group.size()) > kMaxCollectiveRanks) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(), ".group must name 1 to ", kMaxCollectiveRanks,
                       " ranks, got ", c.group.size()));
    }
    if (c.kind == CollectiveKind::kSendRecv && c.group.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(),
                       ".group of a send/receive must be {sender, "
                       "receiver}, got ",
                       c.group.size(), " ranks"));
    }
    std::vector<bool> seen(kMaxCollectiveRanks, false);
    for (size_t i = 0; i < c.group.size(); ++i) {
      const int32_t r = c.group[i];
      if (r < 0 || r >= kMaxCollectiveRanks) {
        return absl::InvalidArgumentError(
            absl::StrCat(where(), ".group[", i, "]: rank ", r,
                         " is outside [0, ", kMaxCollectiveRanks, ")"));
      }
      if (seen[r]) {
        return absl::InvalidArgumentError(absl::StrCat(
            where(), ".group[", i, "]: rank ", r, " appears twice"));
      }
      seen[r] = true;
    }
    return absl::OkStatus();
  }

  absl::Status CheckOutput(int32_t o, int32_t out) const {
    if (out < 0 || out >= num_tensors_) {
      return absl::InvalidArgumentError(absl::StrCat(
          g_.OpLabel(o), ": output tensor ", out, " does not exist"));
    }
    if (idx_.producer[out] != kNone) {
      return absl::InvalidArgumentError(absl::StrCat(
          g_.OpLabel(o), ": output ", g_.TensorLabel(out),
          " is already produced by ", g_.OpLabel(idx_.producer[out])));
    }
    // A collective may write a parameter: FSDP's all-gathers assemble the
    // full parameters from the ranks' shards (model/transformer.h).
    const TensorKind kind = g_.tensors[out].kind;
    if (kind != TensorKind::kActivation && kind != TensorKind::kGradient &&
        !(kind == TensorKind::kParameter && g_.ops[o].collective.has_value())) {
      return absl::InvalidArgumentError(
          absl::StrCat(g_.OpLabel(o), ": output ", g_.TensorLabel(out),
                       " is static (parameter, optimizer state or input) "
                       "and cannot be produced by an op"));
    }
    return absl::OkStatus();
  }

  // A rebuild may only read what existed before the tensor was first made,
  // so rebuilding terminates; or a collective's output without a recipe of
  // its own, which no chain rebuilds (sim/schedule.cc refuses it), so a
  // chain ends there too. The lowering refuses a rebuild run before such
  // an input exists. FSDP's recomputes read the parameters gathered for
  // backward, after the tensor was made (model/transformer.h).
  absl::Status CheckRebuildOrder() {
    for (int32_t t = 0; t < num_tensors_; ++t) {
      SLACKSWAP_RETURN_IF_ERROR(Poll());
      if (!g_.tensors[t].rebuild.has_value()) continue;
      for (int32_t in : g_.tensors[t].rebuild->inputs) {
        const int32_t p = idx_.producer[in];
        const bool chain_end = p != kNone && g_.ops[p].collective.has_value() &&
                               !g_.tensors[in].rebuild.has_value();
        if (in == t || (p != kNone && !chain_end &&
                        (idx_.producer[t] == kNone || p >= idx_.producer[t]))) {
          return absl::InvalidArgumentError(absl::StrCat(
              g_.TensorLabel(t), " rebuild: input ", g_.TensorLabel(in),
              " is not produced before the tensor it rebuilds"));
        }
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckInputs() {
    for (int32_t o = 0; o < num_ops_; ++o) {
      SLACKSWAP_RETURN_IF_ERROR(Poll());
      for (int32_t in : g_.ops[o].inputs) {
        SLACKSWAP_RETURN_IF_ERROR(CheckInput(o, in));
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckInput(int32_t o, int32_t in) const {
    if (in < 0 || in >= num_tensors_) {
      return absl::InvalidArgumentError(absl::StrCat(
          g_.OpLabel(o), ": input tensor ", in, " does not exist"));
    }
    const int32_t p = idx_.producer[in];
    if (p == o) {
      return absl::InvalidArgumentError(
          absl::StrCat(g_.OpLabel(o), ": reads its own output ",
                       g_.TensorLabel(in), " (a self-loop)"));
    }
    if (p > o) {
      std::string cycle = DescribeCycle(g_, idx_.producer);
      if (!cycle.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("the ops form a cycle: ", cycle));
      }
      return absl::InvalidArgumentError(
          absl::StrCat(g_.OpLabel(o), ": reads ", g_.TensorLabel(in),
                       " before it is produced by ", g_.OpLabel(p),
                       " (ops must be listed in launch order)"));
    }
    if (p == kNone && (g_.tensors[in].kind == TensorKind::kActivation ||
                       g_.tensors[in].kind == TensorKind::kGradient)) {
      return absl::InvalidArgumentError(
          absl::StrCat(g_.OpLabel(o), ": reads ", g_.TensorLabel(in),
                       " which no op produces (mark data inputs kind INPUT)"));
    }
    return absl::OkStatus();
  }

  absl::Status IndexUses(std::vector<int32_t>& consumer_count) {
    for (int32_t o = 0; o < num_ops_; ++o) {
      SLACKSWAP_RETURN_IF_ERROR(Poll());
      const Op& op = g_.ops[o];
      for (int32_t in : op.inputs) {
        ++consumer_count[in];
        if (op.phase == Phase::kForward) idx_.last_fwd_use[in] = o;
        if (op.phase == Phase::kBackward && idx_.first_bwd_use[in] == kNone) {
          idx_.first_bwd_use[in] = o;
        }
        idx_.last_use[in] = o;
      }
      if (op.phase != Phase::kForward && idx_.first_backward_op == kNone) {
        idx_.first_backward_op = o;
      }
    }
    return absl::OkStatus();
  }

  absl::Status IndexConsumers(const std::vector<int32_t>& consumer_count) {
    idx_.consumer_offsets.assign(num_tensors_ + 1, 0);
    for (int32_t t = 0; t < num_tensors_; ++t) {
      SLACKSWAP_RETURN_IF_ERROR(Poll());
      idx_.consumer_offsets[t + 1] =
          idx_.consumer_offsets[t] + consumer_count[t];
    }
    idx_.consumers.resize(idx_.consumer_offsets[num_tensors_]);
    std::vector<int32_t> fill(idx_.consumer_offsets.begin(),
                              idx_.consumer_offsets.end() - 1);
    for (int32_t o = 0; o < num_ops_; ++o) {
      SLACKSWAP_RETURN_IF_ERROR(Poll());
      for (int32_t in : g_.ops[o].inputs) idx_.consumers[fill[in]++] = o;
    }
    return absl::OkStatus();
  }

  absl::Status IndexOpTensors() {
    int64_t total = 0;
    for (const Op& op : g_.ops) {
      SLACKSWAP_RETURN_IF_ERROR(Poll());
      total += static_cast<int64_t>(op.inputs.size() + op.outputs.size());
    }
    // The offsets are int32, as tensor ids are.
    if (total > std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph ", QuoteInput(g_.name), " lists ", total,
                       " op inputs and outputs; at most ",
                       std::numeric_limits<int32_t>::max(), " are planned"));
    }
    idx_.op_tensor_offsets.reserve(2 * static_cast<size_t>(num_ops_) + 1);
    idx_.op_tensors.reserve(static_cast<size_t>(total));
    idx_.workspace_bytes.resize(num_ops_);
    idx_.op_tensor_offsets.push_back(0);
    for (int32_t o = 0; o < num_ops_; ++o) {
      SLACKSWAP_RETURN_IF_ERROR(Poll());
      const Op& op = g_.ops[o];
      idx_.op_tensors.insert(idx_.op_tensors.end(), op.inputs.begin(),
                             op.inputs.end());
      idx_.op_tensor_offsets.push_back(
          static_cast<int32_t>(idx_.op_tensors.size()));
      idx_.op_tensors.insert(idx_.op_tensors.end(), op.outputs.begin(),
                             op.outputs.end());
      idx_.op_tensor_offsets.push_back(
          static_cast<int32_t>(idx_.op_tensors.size()));
      idx_.workspace_bytes[o] = op.workspace_bytes;
    }
    return absl::OkStatus();
  }

  absl::Status IndexSaved() {
    idx_.bytes.resize(num_tensors_);
    idx_.has_recipe.assign(num_tensors_, false);
    idx_.collective_output.assign(num_tensors_, false);
    for (int32_t t = 0; t < num_tensors_; ++t) {
      SLACKSWAP_RETURN_IF_ERROR(Poll());
      idx_.bytes[t] = g_.tensors[t].bytes;
      idx_.has_recipe[t] = g_.tensors[t].rebuild.has_value();
      const int32_t p = idx_.producer[t];
      if (p == kNone) {
        idx_.static_bytes += idx_.bytes[t];
        continue;
      }
      if (g_.ops[p].phase == Phase::kForward &&
          idx_.first_bwd_use[t] != kNone) {
        idx_.is_saved[t] = true;
        idx_.saved_bytes += idx_.bytes[t];
      }
    }
    // Production order: by producer, then output position.
    for (int32_t o = 0; o < num_ops_; ++o) {
      SLACKSWAP_RETURN_IF_ERROR(Poll());
      const bool collective = g_.ops[o].collective.has_value();
      idx_.collective_ops += collective ? 1 : 0;
      for (int32_t out : g_.ops[o].outputs) {
        if (idx_.is_saved[out]) idx_.saved.push_back(out);
        if (collective) idx_.collective_output[out] = true;
      }
    }
    idx_.reads_collective_output.assign(num_ops_, false);
    if (idx_.collective_ops == 0) return absl::OkStatus();
    for (int32_t o = 0; o < num_ops_; ++o) {
      SLACKSWAP_RETURN_IF_ERROR(Poll());
      const TensorIds& inputs = g_.ops[o].inputs;
      idx_.reads_collective_output[o] = std::any_of(
          inputs.begin(), inputs.end(),
          [this](int32_t in) { return idx_.collective_output[in] != 0; });
    }
    return absl::OkStatus();
  }

  Graph& g_;
  GraphIndex& idx_;
  const int32_t num_tensors_;
  const int32_t num_ops_;
  StopPoller poller_;
};

}  // namespace

const char* CollectiveKindName(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kAllReduce:
      return "all_reduce";
    case CollectiveKind::kAllToAll:
      return "all_to_all";
    case CollectiveKind::kSendRecv:
      return "send_recv";
  }
  return "unknown";
}

const char* RecomputeClassName(RecomputeClass c) {
  switch (c) {
    case RecomputeClass::kUnspecified:
      return "unspecified";
    case RecomputeClass::kTiny:
      return "tiny";
    case RecomputeClass::kRngMask:
      return "rng_mask";
    case RecomputeClass::kCheapElementwise:
      return "cheap_elementwise";
    case RecomputeClass::kNormOutput:
      return "norm_output";
    case RecomputeClass::kAttnS2:
      return "attn_s2";
    case RecomputeClass::kGemmInput:
      return "gemm_input";
    case RecomputeClass::kGemmOutput:
      return "gemm_output";
    case RecomputeClass::kResidualStream:
      return "residual_stream";
    case RecomputeClass::kAttnOutput:
      return "attn_output";
    case RecomputeClass::kLoss:
      return "loss";
  }
  return "unknown";
}

int32_t Graph::AddTensor(Tensor t) {
  const int32_t id = static_cast<int32_t>(tensors.size());
  if (t.external_id == 0) t.external_id = id;
  tensors.push_back(std::move(t));
  return id;
}

int32_t Graph::AddOp(Op op) {
  const int32_t id = static_cast<int32_t>(ops.size());
  if (op.external_id == 0) op.external_id = id;
  ops.push_back(std::move(op));
  return id;
}

std::string Graph::OpLabel(int32_t op) const {
  if (op < 0 || op >= static_cast<int32_t>(ops.size())) {
    return absl::StrCat("op #", op);
  }
  return absl::StrCat("op ", ops[op].external_id, " (", ShortName(ops[op].name),
                      ")");
}

std::string Graph::TensorLabel(int32_t tensor) const {
  if (tensor < 0 || tensor >= static_cast<int32_t>(tensors.size())) {
    return absl::StrCat("tensor #", tensor);
  }
  return absl::StrCat("tensor ", tensors[tensor].external_id, " (",
                      ShortName(tensors[tensor].name), ")");
}

absl::Status IndexGraph(Graph& g, const StopFn& stop) {
  Indexer indexer(g, stop);
  SLACKSWAP_RETURN_IF_ERROR(indexer.Validate());
  return indexer.Index();
}

namespace {

template <typename T>
int64_t CapacityBytes(const std::vector<T>& v) {
  return static_cast<int64_t>(v.capacity() * sizeof(T));
}

// An inline list's elements on the heap, once it outgrows its inline room.
int64_t SpilledBytes(const TensorIds& ids) {
  return ids.size() > kInlineTensorIds
             ? static_cast<int64_t>(ids.capacity() * sizeof(int32_t))
             : 0;
}

}  // namespace

int64_t ApproxHeldBytes(const Graph& g) {
  int64_t bytes =
      static_cast<int64_t>(g.name.capacity() + g.description.capacity()) +
      CapacityBytes(g.tensors) + CapacityBytes(g.ops);
  // Names are packed in a pool's blocks (TextPool), the last one part full.
  int64_t name_bytes = 0;
  for (const Tensor& t : g.tensors) {
    name_bytes += static_cast<int64_t>(t.name.size());
    if (t.rebuild) {
      bytes += static_cast<int64_t>(sizeof(Rebuild)) +
               SpilledBytes(t.rebuild->inputs);
    }
  }
  for (const Op& op : g.ops) {
    name_bytes += static_cast<int64_t>(op.name.size());
    bytes += SpilledBytes(op.inputs) + SpilledBytes(op.outputs);
    if (op.collective) {
      bytes += static_cast<int64_t>(sizeof(Collective)) +
               CapacityBytes(op.collective->group);
    }
  }
  constexpr int64_t kBlock = TextPool::kBlockBytes;
  bytes += (name_bytes + kBlock - 1) / kBlock * kBlock;
  const GraphIndex& x = g.index;
  for (const std::vector<int32_t>* v :
       {&x.producer, &x.last_fwd_use, &x.first_bwd_use, &x.last_use, &x.saved,
        &x.consumer_offsets, &x.consumers, &x.op_tensor_offsets,
        &x.op_tensors}) {
    bytes += CapacityBytes(*v);
  }
  for (const std::vector<uint8_t>* v :
       {&x.is_saved, &x.has_recipe, &x.collective_output,
        &x.reads_collective_output}) {
    bytes += CapacityBytes(*v);
  }
  return bytes + CapacityBytes(x.bytes) + CapacityBytes(x.workspace_bytes);
}

}  // namespace slackswap
