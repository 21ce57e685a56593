// The transformer workload generator: a training step (embedding, N layers,
// head and loss; forward then backward ops with FLOPs, HBM bytes, kernel
// counts and saved activations) generated from first principles. The named
// configurations (bert-large, gpt2-xl, llama-7b) are model/workloads.h.
//
//   absl::StatusOr<TransformerConfig> c = FindWorkload("gpt2-xl");
//   c->layers = 4;                        // an override
//   absl::StatusOr<Graph> g = BuildTransformer(*c);
//   c->data_parallel = 8;                 // DDP over 8 ranks: all-reduces
//   absl::StatusOr<Graph> ddp = BuildTransformer(*c);
//   c->data_parallel = 1;
//   c->fully_sharded = 8;                 // FSDP: all-gathers and
//   absl::StatusOr<Graph> fsdp = BuildTransformer(*c);  // reduce-scatters
//   c->fully_sharded = 1;
//   c->tensor_parallel = 2;               // Megatron TP over 2 ranks ...
//   c->data_parallel = 4;                 // ... times DDP over 4
//   c->rank = 3;                          // the graph of rank 3 of 8
//   absl::StatusOr<Graph> tp = BuildTransformer(*c);
#ifndef SLACKSWAP_MODEL_TRANSFORMER_H_
#define SLACKSWAP_MODEL_TRANSFORMER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/graph.h"

namespace slackswap {

enum class Attention : uint8_t { kFlash, kUnfused };
enum class Activation : uint8_t { kGelu, kSwiGlu };
enum class Norm : uint8_t { kLayerNorm, kRmsNorm };
// Encoder (BERT: post-LN, MLM + NSP heads) or decoder (GPT/Llama: pre-norm,
// causal attention, LM head).
enum class Arch : uint8_t { kEncoderPostNorm, kDecoderPreNorm };

struct TransformerConfig {
  std::string name;
  Arch arch = Arch::kDecoderPreNorm;
  int32_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t ffn = 0;
  int64_t vocab = 0;
  int64_t seq = 0;
  int64_t batch = 0;
  Activation activation = Activation::kGelu;
  Norm norm = Norm::kLayerNorm;
  bool dropout = false;
  bool rope = false;
  Attention attention = Attention::kFlash;
  // Bytes per element of activations (2 for bf16/fp16).
  int64_t dtype_bytes = 2;
  // Encoder MLM head: masked positions per sequence.
  int64_t max_pred_per_seq = 0;
  // Ranks training the model in data parallel, as PyTorch's
  // DistributedDataParallel does (below); in [1, kMaxDataParallel]. 1: no
  // collectives, the graph of a single GPU.
  int32_t data_parallel = 1;
  // Ranks the parameters are sharded over, as PyTorch's
  // FullyShardedDataParallel does (below); in [1, kMaxFullyShardedRanks].
  // 1: not sharded. Not with data_parallel > 1 (hybrid sharding is not
  // generated).
  int32_t fully_sharded = 1;
  // Ranks each layer's matrices are split over, as Megatron-LM's tensor
  // parallelism does (below); in [1, kMaxTensorParallel], dividing heads
  // and ffn. 1: not split. With data_parallel or fully_sharded > 1 the
  // layout has tensor_parallel x that many ranks (LayoutRanks).
  int32_t tensor_parallel = 1;
  // The rank whose step is generated, in [0, LayoutRanks(config)): the
  // ranks' steps differ only in their collectives' groups (LayoutGroups).
  int32_t rank = 0;
};

// The most ranks a layer's matrices may be split over.
inline constexpr int32_t kMaxTensorParallel = 64;

// The ranks of the config's parallel layout: tensor_parallel x
// data_parallel x fully_sharded (at most one of the last two is above 1).
int64_t LayoutRanks(const TransformerConfig& c);

// Whether the ranks of the layout run different graphs: their collectives'
// groups differ when tensor parallelism is combined with data parallelism
// or sharding. Otherwise rank 0's graph serves every rank.
bool RanksDiffer(const TransformerConfig& c);

// The groups of `rank` in the layout. Tensor parallelism is innermost, as
// Megatron-LM lays it out (so that a tensor-parallel group shares the
// fastest links): rank r is tensor-parallel rank r % T of group
// {T*(r/T), ..., T*(r/T) + T-1}, and its data-parallel (or sharding) group
// is {r % T, r % T + T, ..., r % T + (D-1)*T}.
struct LayoutGroups {
  std::vector<int32_t> tensor_parallel;
  std::vector<int32_t> data_parallel;
};
LayoutGroups GroupsOf(const TransformerConfig& c, int32_t rank);

// The most data-parallel ranks: a collective's largest group.
inline constexpr int32_t kMaxDataParallel = kMaxCollectiveRanks;

// DistributedDataParallel's gradient bucket cap (its bucket_cap_mb default,
// 25 MiB).
inline constexpr int64_t kDdpBucketCapBytes = int64_t{25} << 20;

// Data parallelism (data_parallel = N > 1) follows PyTorch's
// DistributedDataParallel with its defaults. Every rank runs the same step
// on its own share of the data (`batch` is the per-rank batch), so one
// graph serves every rank. DDP gathers the parameters' gradients into
// buckets and all-reduces a bucket as soon as backward has produced all of
// its gradients, overlapping the reduction with the rest of backward:
//  - the parameters go into buckets in the reverse of the order forward
//    first uses them, which is the order backward completes their
//    gradients (DDP assigns buckets in reverse parameter order and, after
//    the first iteration, re-buckets by the order gradients became ready);
//    a parameter used twice (a tied embedding) counts at its first use,
//    where its gradient completes;
//  - a bucket closes once it holds at least kDdpBucketCapBytes of
//    gradients (a parameter is never split, so one larger than the cap is
//    a bucket of its own); the last bucket holds whatever remains;
//  - gradients are in the parameters' dtype (dtype_bytes), so a bucket's
//    bytes are its parameters' bytes.
// DDP caps its first bucket at 1 MiB (so that the first reduction starts
// early); this generator does not: every bucket but the last holds at
// least the cap.
//
// Each bucket is one op named `ddp.all_reduce.bucketK` (K = 0 for the
// first reduced), in the backward phase, right after the backward op that
// completes the bucket's last gradient: a ring all-reduce of the bucket's
// bytes over group {0, ..., N-1} (model/graph.h, Collective). It reads and
// writes no tensor: issue order already places it after the gradients it
// reduces, and DDP reduces in place in the bucket's buffer (the gradients
// are views of it), so it allocates nothing the step's memory would count.
// Parameter gradients are not tensors of the graph at any data_parallel
// (they are static memory, as the parameters are), so adding them only to
// give the all-reduce inputs would make the N-rank step's memory differ
// from the single GPU's by something DDP does not add.

// The most ranks the parameters may be sharded over.
inline constexpr int32_t kMaxFullyShardedRanks = kMaxCollectiveRanks;

// Fully sharded data parallelism (fully_sharded = N > 1) follows PyTorch's
// FullyShardedDataParallel (ZeRO-3) with one FSDP unit per transformer
// layer and one, the root, for what is outside the layers (embeddings,
// final norm, heads), with reshard_after_forward. Every rank runs the same
// step on its own batch, so one graph serves every rank. Names: unit `L<l>`
// or `root`.
//  - Each parameter tensor holds its rank's shard, ceil(bytes / N).
//  - Before a unit's first forward op, `fsdp.all_gather.<unit>.fwd`: a
//    ring all-gather over {0, ..., N-1} of the unit's full parameter bytes
//    that reads the unit's shards and writes `fsdp.<unit>.params.fwd`
//    (kParameter, those bytes: FSDP's flat parameter). The unit's forward
//    ops read it in place of the parameters; it is freed after its last
//    forward reader, which is the resharding. The root's spans forward,
//    from the embeddings to the head, as FSDP keeps the root's parameters
//    gathered after forward.
//  - Before a unit's first backward op, `fsdp.all_gather.<unit>.bwd`
//    writes `fsdp.<unit>.params.bwd`, which the unit's backward ops read;
//    the unit's last backward op reads it too (the root's, the
//    embeddings' backward, needs no parameter), as FSDP reshards it in
//    its post-backward hook, so recomputes may read it to the end.
//  - After a unit's last backward op, `fsdp.reduce_scatter.<unit>`: a
//    ring reduce-scatter of the unit's gradient bytes (its parameter
//    bytes), reading and writing no tensor, as DDP's all-reduces (above).
//  - Recompute: the parameters gathered for forward are gone by backward,
//    and only a collective could bring them back, so a saved activation
//    whose producer read them could not be rebuilt. FSDP with activation
//    checkpointing recomputes in backward with the parameters gathered for
//    backward: each activation its producer made from the forward-gathered
//    parameters (saved or not: a chain may need either) gets a Rebuild
//    recipe (model/graph.h) of its producer's inputs, the forward-gathered
//    parameters replaced by the backward-gathered ones, at its producer's
//    cost (a tensor with a recipe already, a dropout mask, keeps it).
//    This holds only if the activation is first needed in backward after
//    its unit's backward all-gather; the generator checks it, and refuses
//    a post-norm encoder (BERT), whose layers' outputs are norm outputs
//    first needed by the next layer's backward. A layer's input cannot
//    be recomputed either (it would need the previous layer's parameters,
//    gathered later): the planners keep it (planner/analysis.h,
//    RecomputableTensors).
// A parameter shared by two ops (the tied word embeddings, read by the
// embeddings and the LM or MLM head) belongs to the root unit, which holds
// both of its readers: PyTorch FSDP puts a shared parameter in the unit
// that wraps all its users, and the root's gathered parameters serve both.

// Tensor parallelism (tensor_parallel = T > 1) follows Megatron-LM
// (Shoeybi et al. 2019) without sequence parallelism. In each layer the
// attention's q, k and v projection and the MLP's first projection are split
// by column (each rank computes heads/T heads and ffn/T of the hidden
// units, and holds 1/T of those weights), the attention output and the
// MLP's second projection by row; the norms, residual adds and dropouts
// after a row-parallel projection run on the full [tokens, hidden] tensor
// on every rank. Collectives, each a ring all-reduce of tokens x hidden
// activations over the rank's tensor-parallel group:
//  - `tp.all_reduce.<op>` after each row-parallel projection (Megatron's
//    g): it reads the projection's partial sum `<out>_partial` and writes
//    the reduced `<out>`; its backward is the identity (no op);
//  - `tp.all_reduce.<op>.bwd` after the backward of each column-parallel
//    projection (Megatron's f): it reads the gradient of the projection's
//    input, partial on each rank, and writes the reduced one that the
//    norm's backward reads.
// NCCL reduces in place; here the all-reduce writes a new tensor, so the
// step holds one tokens x hidden tensor more while a reduction runs (26 MB
// on gpt2-xl). The word embeddings are split by vocabulary (ceil(V/T) rows
// per rank): the embedding lookup is followed by an all-reduce of its
// output, and the LM or MLM head, tied to them, is column-parallel over
// the vocabulary with a vocabulary-parallel cross-entropy whose three
// all-reduces of per-token fp32 statistics (max, sum of exponentials, the
// target's logit) are one collective, `tp.all_reduce.<loss>.stats`, that
// the loss waits for. Data parallelism and sharding combine with it
// (GroupsOf): DDP's buckets and FSDP's units hold each rank's 1/T slice of
// the parameters and reduce, gather and scatter it over the rank's
// data-parallel group. A collective's output cannot be recomputed
// (sim/schedule.cc), so a residual-stream tensor made from one (the sum
// after each row-parallel projection) is kept or swapped by every plan
// (planner/analysis.h, RecomputableTensors), where Megatron's full
// recomputation would run the collective again.

// The most layers a generated step may have (its op count grows with them).
inline constexpr int32_t kMaxTransformerLayers = 10'000;

absl::Status ValidateTransformerConfig(const TransformerConfig& c);
// The step's graph, indexed (IndexGraph already ran).
absl::StatusOr<Graph> BuildTransformer(const TransformerConfig& c);

absl::StatusOr<Attention> ParseAttention(absl::string_view s);

}  // namespace slackswap

#endif  // SLACKSWAP_MODEL_TRANSFORMER_H_
