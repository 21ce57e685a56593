// The domain model of one training step: tensors and ops in launch order,
// with index-based ids, plus what every planner and the simulator derive from
// it (producers, consumers, saved activations, first and last uses).
//
//   Graph g;
//   g.name = "tiny";
//   int32_t x = g.AddTensor({.name = "x", .bytes = 1024});
//   g.AddOp({.name = "f", .phase = Phase::kForward, .outputs = {x}});
//   g.AddOp({.name = "f.bwd", .phase = Phase::kBackward, .inputs = {x}});
//   absl::Status s = IndexGraph(g);   // validates; fills g.index
//   bool saved = g.index.is_saved[x];  // true
//
// Sizes are int64 bytes; costs are turned into int64 nanoseconds by the cost
// model (cost_model.h) for a given hardware profile.
#ifndef SLACKSWAP_MODEL_GRAPH_H_
#define SLACKSWAP_MODEL_GRAPH_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/boxed.h"
#include "common/stop.h"
#include "common/text.h"

namespace slackswap {

enum class TensorKind : uint8_t {
  kActivation,
  kParameter,
  kGradient,
  kOptimizerState,
  kInput,
};

enum class Phase : uint8_t { kForward, kBackward, kOptimizer };

// Selects which efficiency the cost model applies to FLOPs.
enum class OpKind : uint8_t {
  kMemoryBound,
  kMatmul,
  kBatchedMatmul,
  kFlashAttention,
};

// Mirrors reference.json's recompute_class; informational (reasons, reports).
enum class RecomputeClass : uint8_t {
  kUnspecified,
  kTiny,
  kRngMask,
  kCheapElementwise,
  kNormOutput,
  kAttnS2,
  kGemmInput,
  kGemmOutput,
  kResidualStream,
  kAttnOutput,
  kLoss,
};

const char* RecomputeClassName(RecomputeClass c);

// The most ranks a collective's group may name (a node step's ranks).
inline constexpr int32_t kMaxCollectiveRanks = 64;

// A collective's kind; `bytes` counts its buffer as PyTorch and NCCL do
// (all-reduce: the tensor; all-gather: the gathered output; reduce-scatter:
// the input before scattering; all-to-all: each rank's send buffer;
// send/receive: the message).
enum class CollectiveKind : uint8_t {
  kAllGather,
  kReduceScatter,
  kAllReduce,
  kAllToAll,
  kSendRecv,
};

const char* CollectiveKindName(CollectiveKind k);

// NCCL's algorithms; trees for all-reduce only (other kinds run as rings).
enum class CollectiveAlgorithm : uint8_t { kRing, kTree };

// What makes an op a collective: it runs on the rank's communication
// stream, beside compute and the copies, once every rank of its group has
// reached it (docs/SIMULATOR.md, "Collectives in the step").
struct Collective {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing;
  int64_t bytes = 0;
  // The ranks taking part (indices of the node step's ranks), in ring
  // order; this rank among them. Send/receive: {sender, receiver}.
  std::vector<int32_t> group;
};

// The tensors an op reads or writes, by index. Most ops have a handful:
// kept inline, so a graph of a million ops is not millions of allocations
// to make and free.
inline constexpr size_t kInlineTensorIds = 4;
using TensorIds = absl::InlinedVector<int32_t, kInlineTensorIds>;

// The dimensions the cost model's efficiency tables are looked up by
// (model/efficiency.h). A GEMM [m, k] x [k, n] (one matrix of a batched
// GEMM); fused attention: m queries against n keys per sequence, head
// dimension k, causal or not. All zero: unknown, and the profile's constant
// efficiencies apply.
struct KernelShape {
  int32_t m = 0;
  int32_t n = 0;
  int32_t k = 0;
  bool causal = false;

  bool known() const { return m > 0 || n > 0 || k > 0; }
};

struct OpCost {
  double flops = 0;
  int64_t bytes_accessed = 0;
  int32_t kernels = 1;
  OpKind kind = OpKind::kMemoryBound;
  // Measured duration; replaces the cost model when set.
  std::optional<int64_t> duration_ns;
  KernelShape shape;
};

// A cheaper rebuild than re-running the producer (a dropout mask regenerated
// from the RNG seed reads no tensor at all).
struct Rebuild {
  TensorIds inputs;
  OpCost cost;
};

// Names, dtypes and shapes are Texts (common/text.h): 16 bytes where a
// std::string is 32 plus a heap block for a long name, and a graph read
// from the wire or built packs its names into shared blocks and holds each
// distinct dtype and shape once. A 10^6-op graph has 1.7 million tensors,
// which every pass walks.
struct Tensor {
  Text name;
  int64_t bytes = 0;
  TensorKind kind = TensorKind::kActivation;
  RecomputeClass recompute_class = RecomputeClass::kUnspecified;
  // Boxed: 8 bytes where std::optional<Rebuild> takes 72. Few tensors have
  // one, and the passes that walk every tensor walk past this field.
  Boxed<Rebuild> rebuild;
  Text dtype;
  Text shape;
  // The id this tensor has in files and on the wire.
  int64_t external_id = 0;
};

struct Op {
  Text name;
  Phase phase = Phase::kForward;
  // Beside the phase, in its padding.
  int32_t layer = -1;
  TensorIds inputs;
  TensorIds outputs;
  int64_t workspace_bytes = 0;
  OpCost cost;
  int64_t external_id = 0;
  // Set on collectives only (boxed: most ops are not).
  Boxed<Collective> collective;
};

inline constexpr int32_t kNone = -1;

// The most bytes a graph's tensors and op workspaces may add up to (1 EiB,
// far past any device): memory sums of a few such totals stay in int64.
inline constexpr int64_t kMaxGraphBytes = int64_t{1} << 60;

// Derived by IndexGraph; indexed by tensor index unless named per op.
struct GraphIndex {
  std::vector<int32_t> producer;       // op index or kNone (static tensor)
  std::vector<int32_t> last_fwd_use;   // last forward consumer, or kNone
  std::vector<int32_t> first_bwd_use;  // first backward consumer, or kNone
  std::vector<int32_t> last_use;       // last consumer of any phase, or kNone
  // Produced by a forward op and read by a backward op. The per-tensor
  // flags are a byte each, not std::vector<bool>: the lowering and the
  // simulator read them for every tensor a task touches, and a bit costs a
  // shift and a mask on each read.
  std::vector<uint8_t> is_saved;
  // Saved activations in production order.
  std::vector<int32_t> saved;
  // Consumers of each tensor, in launch order (CSR layout).
  std::vector<int32_t> consumer_offsets;
  std::vector<int32_t> consumers;
  int32_t first_backward_op = kNone;
  // Packed per tensor, for the loops that every judged plan runs (the
  // lowering, the simulator): a Tensor is 80 bytes and an Op 152, so reading
  // these from them misses the cache on large graphs. Its bytes; whether it
  // has a rebuild recipe; whether a collective writes it.
  std::vector<int64_t> bytes;
  std::vector<uint8_t> has_recipe;
  std::vector<uint8_t> collective_output;
  // Per op: whether one of its inputs is a collective's output (the
  // simulator then checks, before it runs the op, that the collective has
  // completed; the ops of a step without collectives never wait).
  std::vector<uint8_t> reads_collective_output;
  // Per op, packed for the lowering, which reads every op's inputs,
  // outputs and workspace once per judged plan: it read them from the Ops,
  // 152 bytes each, a stream of cache misses on large graphs; these are
  // about 30 bytes per op. Op o's inputs are op_tensors[op_tensor_offsets[2o]
  // .. op_tensor_offsets[2o+1]) and its outputs [op_tensor_offsets[2o+1] ..
  // op_tensor_offsets[2o+2]), in the Op's order.
  std::vector<int32_t> op_tensor_offsets;
  std::vector<int32_t> op_tensors;
  std::vector<int64_t> workspace_bytes;
  absl::Span<const int32_t> InputsOf(int32_t o) const {
    return absl::MakeConstSpan(
        op_tensors.data() + op_tensor_offsets[2 * o],
        op_tensors.data() + op_tensor_offsets[2 * o + 1]);
  }
  absl::Span<const int32_t> OutputsOf(int32_t o) const {
    return absl::MakeConstSpan(
        op_tensors.data() + op_tensor_offsets[2 * o + 1],
        op_tensors.data() + op_tensor_offsets[2 * o + 2]);
  }
  // Ops that run a collective.
  int32_t collective_ops = 0;
  // Sum of saved activation bytes: the activation peak with no plan.
  int64_t saved_bytes = 0;
  // Parameters, gradients, optimizer state and inputs never produced.
  int64_t static_bytes = 0;
};

struct Graph {
  std::string name;
  std::string description;
  std::vector<Tensor> tensors;
  std::vector<Op> ops;
  GraphIndex index;

  // Appends and returns the new index; external_id defaults to the index.
  int32_t AddTensor(Tensor t);
  int32_t AddOp(Op op);

  // A name for messages: `op 12 (mlp_up)`, `tensor 7 (x)`, by external id.
  std::string OpLabel(int32_t op) const;
  std::string TensorLabel(int32_t tensor) const;
};

// The heap a graph holds, about: its structs, names (in whole blocks of
// TextPool's), spilled id lists, recipes, collectives and index (each
// vector by capacity; interned dtypes and shapes, shared by every tensor,
// not counted). What a cache of graphs
// charges for one (checked against malloc's count in graph_test).
int64_t ApproxHeldBytes(const Graph& g);

// Validates the graph and fills g.index. Rejects, naming the op or tensor and
// field: empty graphs, collectives whose bytes or group are out of range
// (a group of 1 to kMaxCollectiveRanks distinct ranks; send/receive: 2;
// no workspace),
// out-of-range tensor references, tensors produced twice
// or read before they are produced, static tensors produced by an op (a
// collective may write a parameter: FSDP's gathered parameters), rebuild
// recipes reading a tensor made after theirs (unless a collective's
// output, which ends a chain), an op reading its own output, negative
// sizes or costs, NaN/Inf FLOPs, byte totals that overflow int64, and cycles
// (reported as such, with the ops on the cycle). Never aborts. `stop` is
// polled: true ends it with CANCELLED.
absl::Status IndexGraph(Graph& g, const StopFn& stop = nullptr);

}  // namespace slackswap

#endif  // SLACKSWAP_MODEL_GRAPH_H_
