#include "model/graph.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/format.h"

namespace slackswap {
namespace {

bool AddOverflows(int64_t a, int64_t b, int64_t* sum) {
  return __builtin_add_overflow(a, b, sum);
}

absl::Status CheckCost(const Graph& g, const OpCost& cost,
                       const std::string& where) {
  if (std::isnan(cost.flops) || std::isinf(cost.flops)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": cost.flops must be finite, got ", cost.flops));
  }
  if (cost.flops < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": cost.flops must be >= 0, got ", cost.flops));
  }
  if (cost.bytes_accessed < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": cost.bytes_accessed must be >= 0, got ",
                     cost.bytes_accessed));
  }
  if (cost.kernels < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": cost.kernels must be >= 0, got ", cost.kernels));
  }
  if (cost.duration_ns.has_value() && *cost.duration_ns < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": cost.duration_ns must be >= 0, got ", *cost.duration_ns));
  }
  return absl::OkStatus();
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

}  // namespace

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
  StopPoller poller(stop);
  const int32_t num_tensors = static_cast<int32_t>(g.tensors.size());
  const int32_t num_ops = static_cast<int32_t>(g.ops.size());
  if (num_ops == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("graph ", QuoteInput(g.name), " has no ops"));
  }

  int64_t total_bytes = 0;
  for (int32_t t = 0; t < num_tensors; ++t) {
    if (poller.Stop())
      return absl::CancelledError("indexing the graph stopped");
    const Tensor& tensor = g.tensors[t];
    if (tensor.bytes < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          g.TensorLabel(t), ": size_bytes must be >= 0, got ", tensor.bytes));
    }
    if (AddOverflows(total_bytes, tensor.bytes, &total_bytes) ||
        total_bytes > kMaxGraphBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          g.TensorLabel(t), ": size_bytes makes the graph's bytes exceed ",
          kMaxGraphBytes, " (2^60)"));
    }
    if (tensor.rebuild.has_value()) {
      const std::string where = absl::StrCat(g.TensorLabel(t), " rebuild");
      absl::Status s = CheckCost(g, tensor.rebuild->cost, where);
      if (!s.ok()) return s;
      for (int32_t in : tensor.rebuild->inputs) {
        if (in < 0 || in >= num_tensors) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": input tensor ", in, " does not exist"));
        }
      }
    }
  }

  GraphIndex& idx = g.index;
  idx = GraphIndex();
  idx.producer.assign(num_tensors, kNone);
  idx.last_fwd_use.assign(num_tensors, kNone);
  idx.first_bwd_use.assign(num_tensors, kNone);
  idx.last_use.assign(num_tensors, kNone);
  idx.is_saved.assign(num_tensors, false);

  // Producers first, so a read before production can be told from a read of
  // a tensor nobody produces (a static input).
  for (int32_t o = 0; o < num_ops; ++o) {
    if (poller.Stop())
      return absl::CancelledError("indexing the graph stopped");
    const Op& op = g.ops[o];
    absl::Status s = CheckCost(g, op.cost, g.OpLabel(o));
    if (!s.ok()) return s;
    if (op.workspace_bytes < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(g.OpLabel(o), ": workspace_bytes must be >= 0, got ",
                       op.workspace_bytes));
    }
    if (AddOverflows(total_bytes, op.workspace_bytes, &total_bytes) ||
        total_bytes > kMaxGraphBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          g.OpLabel(o), ": workspace_bytes makes the graph's bytes exceed ",
          kMaxGraphBytes, " (2^60)"));
    }
    for (int32_t out : op.outputs) {
      if (out < 0 || out >= num_tensors) {
        return absl::InvalidArgumentError(absl::StrCat(
            g.OpLabel(o), ": output tensor ", out, " does not exist"));
      }
      if (idx.producer[out] != kNone) {
        return absl::InvalidArgumentError(absl::StrCat(
            g.OpLabel(o), ": output ", g.TensorLabel(out),
            " is already produced by ", g.OpLabel(idx.producer[out])));
      }
      if (g.tensors[out].kind != TensorKind::kActivation &&
          g.tensors[out].kind != TensorKind::kGradient) {
        return absl::InvalidArgumentError(
            absl::StrCat(g.OpLabel(o), ": output ", g.TensorLabel(out),
                         " is static (parameter, optimizer state or input) "
                         "and cannot be produced by an op"));
      }
      idx.producer[out] = o;
    }
  }

  // A rebuild may only read what existed before the tensor was first made,
  // so rebuilding terminates.
  for (int32_t t = 0; t < num_tensors; ++t) {
    if (poller.Stop())
      return absl::CancelledError("indexing the graph stopped");
    if (!g.tensors[t].rebuild.has_value()) continue;
    for (int32_t in : g.tensors[t].rebuild->inputs) {
      const int32_t p = idx.producer[in];
      if (in == t ||
          (p != kNone && (idx.producer[t] == kNone || p >= idx.producer[t]))) {
        return absl::InvalidArgumentError(absl::StrCat(
            g.TensorLabel(t), " rebuild: input ", g.TensorLabel(in),
            " is not produced before the tensor it rebuilds"));
      }
    }
  }

  std::vector<int32_t> consumer_count(num_tensors, 0);
  for (int32_t o = 0; o < num_ops; ++o) {
    if (poller.Stop())
      return absl::CancelledError("indexing the graph stopped");
    const Op& op = g.ops[o];
    for (int32_t in : op.inputs) {
      if (in < 0 || in >= num_tensors) {
        return absl::InvalidArgumentError(absl::StrCat(
            g.OpLabel(o), ": input tensor ", in, " does not exist"));
      }
      const int32_t p = idx.producer[in];
      if (p == o) {
        return absl::InvalidArgumentError(
            absl::StrCat(g.OpLabel(o), ": reads its own output ",
                         g.TensorLabel(in), " (a self-loop)"));
      }
      if (p > o) {
        std::string cycle = DescribeCycle(g, idx.producer);
        if (!cycle.empty()) {
          return absl::InvalidArgumentError(
              absl::StrCat("the ops form a cycle: ", cycle));
        }
        return absl::InvalidArgumentError(
            absl::StrCat(g.OpLabel(o), ": reads ", g.TensorLabel(in),
                         " before it is produced by ", g.OpLabel(p),
                         " (ops must be listed in launch order)"));
      }
      if (p == kNone && (g.tensors[in].kind == TensorKind::kActivation ||
                         g.tensors[in].kind == TensorKind::kGradient)) {
        return absl::InvalidArgumentError(absl::StrCat(
            g.OpLabel(o), ": reads ", g.TensorLabel(in),
            " which no op produces (mark data inputs kind INPUT)"));
      }
      ++consumer_count[in];
      if (op.phase == Phase::kForward) idx.last_fwd_use[in] = o;
      if (op.phase == Phase::kBackward && idx.first_bwd_use[in] == kNone) {
        idx.first_bwd_use[in] = o;
      }
      idx.last_use[in] = o;
    }
    if (op.phase != Phase::kForward && idx.first_backward_op == kNone) {
      idx.first_backward_op = o;
    }
  }

  idx.consumer_offsets.assign(num_tensors + 1, 0);
  for (int32_t t = 0; t < num_tensors; ++t) {
    if (poller.Stop())
      return absl::CancelledError("indexing the graph stopped");
    idx.consumer_offsets[t + 1] = idx.consumer_offsets[t] + consumer_count[t];
  }
  idx.consumers.resize(idx.consumer_offsets[num_tensors]);
  std::vector<int32_t> fill(idx.consumer_offsets.begin(),
                            idx.consumer_offsets.end() - 1);
  for (int32_t o = 0; o < num_ops; ++o) {
    if (poller.Stop())
      return absl::CancelledError("indexing the graph stopped");
    for (int32_t in : g.ops[o].inputs) idx.consumers[fill[in]++] = o;
  }

  for (int32_t t = 0; t < num_tensors; ++t) {
    if (poller.Stop())
      return absl::CancelledError("indexing the graph stopped");
    const int32_t p = idx.producer[t];
    if (p == kNone) {
      idx.static_bytes += g.tensors[t].bytes;
      continue;
    }
    if (g.ops[p].phase == Phase::kForward && idx.first_bwd_use[t] != kNone) {
      idx.is_saved[t] = true;
      idx.saved_bytes += g.tensors[t].bytes;
    }
  }
  // Production order: by producer, then output position.
  for (int32_t o = 0; o < num_ops; ++o) {
    if (poller.Stop())
      return absl::CancelledError("indexing the graph stopped");
    for (int32_t out : g.ops[o].outputs) {
      if (idx.is_saved[out]) idx.saved.push_back(out);
    }
  }
  return absl::OkStatus();
}

}  // namespace slackswap
