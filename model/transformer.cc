// The transformer step generator. Every FLOP and byte count below is a
// formula in the config (T = batch * seq tokens, hidden h, ffn f, heads a,
// vocab V, dtype bytes d); the conventions follow Korthikanti et al. 2022
// ("Reducing Activation Recomputation in Large Transformer Models"):
//  - a GEMM [M,K]x[K,N] costs 2MKN FLOPs and reads/writes (MK + KN + MN) * d
//    bytes; its backward (dgrad + wgrad, 2 kernels) costs twice both;
//  - dropout masks are 1 byte per element, norm statistics fp32;
//  - FlashAttention executes 4*b*s^2*h FLOPs (bidirectional) or half of it
//    (causal), and 2.5x that in backward (it recomputes S = QK^T);
//  - memory-bound ops read and write each tensor once.
// Each forward op keeps for its backward exactly the tensors autograd would
// save (its `saved` list), so the graph's saved activations are the
// activation memory of the step.
#include "model/transformer.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/format.h"
#include "common/status_macros.h"
#include "model/graph.h"

namespace slackswap {
namespace {

// Largest layer count the generator accepts (graphs stay below ~10^6 ops).
// Total bytes of all tensors must stay below this, leaving headroom for sums
// over the graph (activations + gradients + parameters) in int64.
constexpr double kMaxTotalBytes = 4.0e18;  // < 2^62

constexpr int64_t kFp32Bytes = 4;
constexpr int64_t kTokenIdBytes = 8;  // int64 token ids
constexpr int64_t kMaskBytes = 1;     // uint8 dropout mask per element
constexpr int64_t kLossBytes = 4;     // fp32 scalar
constexpr int64_t kNspClasses = 2;    // next-sentence prediction: is / isn't

// Per-element FLOPs of the memory-bound kernels (forward, backward).
constexpr double kLayerNormFwdFlops = 8;  // mean, var, normalise, affine
constexpr double kLayerNormBwdFlops = 12;
constexpr double kRmsNormFwdFlops = 4;  // square, sum, scale, weight
constexpr double kRmsNormBwdFlops = 8;
constexpr double kGeluFlops = 8;          // erf/tanh form, each direction
constexpr double kSiluFlops = 5;          // x * sigmoid(x), each direction
constexpr double kSwiGluMulBwdFlops = 2;  // d_silu = dy*up, d_up = dy*silu
constexpr double kRopeFlopsPerElem = 6;   // rotate pairs by cos/sin, q and k
constexpr double kSoftmaxFwdFlops = 5;    // scale, max, exp, sum, divide
constexpr double kSoftmaxBwdFlops = 4;
constexpr double kFlashBwdFactor = 2.5;  // FA-2 backward recomputes S = QK^T

std::string Dtype(int64_t bytes) {
  switch (bytes) {
    case 1:
      return "fp8";
    case 2:
      return "bf16";
    case 4:
      return "fp32";
    case 8:
      return "fp64";
    default:
      return absl::StrCat("b", bytes * 8);
  }
}

std::string Shape(std::initializer_list<int64_t> dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

struct Costs {
  OpKind kind = OpKind::kMemoryBound;
  double fwd_flops = 0;
  double bwd_flops = 0;
  int64_t fwd_bytes = 0;
  int64_t bwd_bytes = 0;
  int32_t fwd_kernels = 1;
  int32_t bwd_kernels = 1;
  // GEMMs and fused attention: what the efficiency tables read.
  KernelShape shape;
};

// A dimension for KernelShape; past int32 every table has long clamped.
int32_t ShapeDim(int64_t v) {
  return static_cast<int32_t>(
      std::min<int64_t>(v, std::numeric_limits<int32_t>::max()));
}

struct Saved {
  int32_t tensor;
  RecomputeClass cls;
};

// Op and layer names: BERT (encoder), GPT-2 (LayerNorm decoder) and Llama
// (RMSNorm decoder) conventions.
struct Names {
  std::string norm1, norm2, final_norm, out_proj;
};

Names NamesFor(const TransformerConfig& c) {
  if (c.arch == Arch::kEncoderPostNorm) {
    return {"attn_layernorm", "out_layernorm", "", "attn_out_proj"};
  }
  if (c.norm == Norm::kRmsNorm) {
    return {"attn_norm", "mlp_norm", "final_norm", "o_proj"};
  }
  return {"ln_1", "ln_2", "ln_f", "attn_out_proj"};
}

class Builder {
 public:
  explicit Builder(const TransformerConfig& c)
      : c_(c),
        d_(c.dtype_bytes),
        t_(c.batch * c.seq),
        h_(c.hidden),
        tp_(c.tensor_parallel),
        h_tp_(c.hidden / c.tensor_parallel),
        heads_tp_(c.heads / c.tensor_parallel),
        ffn_tp_(c.ffn / c.tensor_parallel),
        vocab_tp_((c.vocab + c.tensor_parallel - 1) / c.tensor_parallel),
        groups_(GroupsOf(c, c.rank)),
        names_(NamesFor(c)) {}

  absl::StatusOr<Graph> Build() {
    g_.name = c_.name.empty() ? "transformer" : c_.name;
    g_.description = absl::StrCat(
        c_.arch == Arch::kEncoderPostNorm ? "encoder (post-norm)"
                                          : "decoder (pre-norm)",
        ": ", c_.layers, " layers, hidden ", c_.hidden, ", ", c_.heads,
        " heads, ffn ", c_.ffn, ", vocab ", c_.vocab, ", seq ", c_.seq,
        " x batch ", c_.batch, ", ",
        c_.attention == Attention::kFlash ? "flash" : "unfused", " attention");
    if (c_.data_parallel > 1) {
      absl::StrAppend(&g_.description, ", data parallel over ",
                      c_.data_parallel, " ranks (DDP)");
    }
    if (c_.fully_sharded > 1) {
      absl::StrAppend(&g_.description, ", fully sharded over ",
                      c_.fully_sharded, " ranks (FSDP)");
    }
    if (tp_ > 1) {
      absl::StrAppend(&g_.description, ", tensor parallel over ", tp_,
                      " ranks (Megatron)");
    }
    if (RanksDiffer(c_)) {
      absl::StrAppend(&g_.description, ": rank ", c_.rank, " of ",
                      LayoutRanks(c_));
    }
    int32_t x = Embeddings();
    for (int32_t l = 0; l < c_.layers; ++l) {
      layer_ = l;
      prefix_ = absl::StrCat("L", l, ".");
      x = c_.arch == Arch::kEncoderPostNorm ? EncoderLayer(x) : DecoderLayer(x);
    }
    layer_ = -1;
    prefix_.clear();
    if (c_.arch == Arch::kEncoderPostNorm) {
      EncoderHeads(x);
    } else {
      LmHead(x);
    }
    Backward();
    if (c_.fully_sharded > 1) SLACKSWAP_RETURN_IF_ERROR(ShardParameters());
    return std::move(g_);
  }

 private:
  // What a forward op's backward is: an op (most), nothing at all (a
  // collective of statistics no gradient flows through), or the identity,
  // its output's gradient passed on as its input's (a row-parallel
  // projection's all-reduce).
  enum class BackwardOf : uint8_t { kOp, kNone, kIdentity };

  struct Forward {
    int32_t op;
    std::vector<int32_t> saved;
    std::vector<int32_t> bwd_params;
    OpCost bwd_cost;
    BackwardOf backward = BackwardOf::kOp;
    // A column-parallel projection (tensor parallelism): the gradient its
    // backward makes for its input is partial, and all-reduced after it.
    bool reduce_input_grad = false;
  };

  // --- tensors -------------------------------------------------------------

  int32_t NewTensor(absl::string_view name, int64_t bytes, std::string shape,
                    std::string dtype, TensorKind kind, bool differentiable) {
    Tensor t;
    t.name = text_.Add(absl::StrCat(prefix_, name));
    t.bytes = bytes;
    t.kind = kind;
    t.dtype = text_.Intern(dtype);
    t.shape = text_.Intern(shape);
    int32_t id = g_.AddTensor(std::move(t));
    differentiable_.resize(g_.tensors.size(), false);
    differentiable_[id] = differentiable;
    return id;
  }
  // A floating activation of `rows` x `cols` elements in the model dtype.
  int32_t Act(absl::string_view name, int64_t rows, int64_t cols) {
    return NewTensor(name, rows * cols * d_, Shape({rows, cols}), Dtype(d_),
                     TensorKind::kActivation, /*differentiable=*/true);
  }
  int32_t Param(absl::string_view name, int64_t rows, int64_t cols) {
    return NewTensor(name, rows * cols * d_, Shape({rows, cols}), Dtype(d_),
                     TensorKind::kParameter, /*differentiable=*/false);
  }
  // Kept for backward only, never differentiated (statistics, masks, lse).
  int32_t Aux(absl::string_view name, int64_t bytes, std::string shape,
              std::string dtype) {
    return NewTensor(name, bytes, std::move(shape), std::move(dtype),
                     TensorKind::kActivation, /*differentiable=*/false);
  }
  // A dropout mask: regenerated from the RNG seed (Philox offset) at the
  // cost of one elementwise kernel writing it.
  int32_t Mask(absl::string_view op, int64_t elems, std::string shape) {
    int32_t m = Aux(absl::StrCat(op, ".mask"), elems * kMaskBytes,
                    std::move(shape), "uint8");
    Rebuild& r = g_.tensors[m].rebuild.emplace();
    r.cost.kind = OpKind::kMemoryBound;
    r.cost.flops = static_cast<double>(elems);
    r.cost.bytes_accessed = elems * kMaskBytes;
    r.cost.kernels = 1;
    return m;
  }

  // --- ops -----------------------------------------------------------------

  void Emit(absl::string_view name, const Costs& costs,
            std::vector<int32_t> inputs, std::vector<int32_t> outputs,
            std::vector<int32_t> fwd_params, std::vector<int32_t> bwd_params,
            const std::vector<Saved>& saved) {
    Op op;
    op.name = text_.Add(absl::StrCat(prefix_, name));
    op.phase = Phase::kForward;
    op.layer = layer_;
    op.inputs.assign(inputs.begin(), inputs.end());
    op.inputs.insert(op.inputs.end(), fwd_params.begin(), fwd_params.end());
    op.outputs.assign(outputs.begin(), outputs.end());
    op.cost.kind = costs.kind;
    op.cost.flops = costs.fwd_flops;
    op.cost.bytes_accessed = costs.fwd_bytes;
    op.cost.kernels = costs.fwd_kernels;
    op.cost.shape = costs.shape;
    Forward f;
    f.bwd_cost.kind = costs.kind;
    f.bwd_cost.flops = costs.bwd_flops;
    f.bwd_cost.bytes_accessed = costs.bwd_bytes;
    f.bwd_cost.kernels = costs.bwd_kernels;
    // dgrad and wgrad have the forward GEMM's volume, attention's backward
    // its forward's sequence and heads.
    f.bwd_cost.shape = costs.shape;
    f.bwd_params = std::move(bwd_params);
    for (const Saved& s : saved) {
      // An entry saved by an earlier op too (an alias) keeps its first class.
      RecomputeClass& cls = g_.tensors[s.tensor].recompute_class;
      if (cls == RecomputeClass::kUnspecified) cls = s.cls;
      if (std::find(f.saved.begin(), f.saved.end(), s.tensor) ==
          f.saved.end()) {
        f.saved.push_back(s.tensor);
      }
    }
    f.op = g_.AddOp(std::move(op));
    fwd_.push_back(std::move(f));
  }

  // y = x W: [rows, k] x [k, n], outputs split evenly by column (q, k, v).
  std::vector<int32_t> Matmul(absl::string_view name, int32_t x,
                              RecomputeClass x_class, int64_t rows, int64_t k,
                              int64_t n,
                              const std::vector<std::string>& out_names,
                              int32_t weight = kNone) {
    if (weight == kNone) weight = Param(absl::StrCat(name, ".weight"), k, n);
    const int64_t parts = static_cast<int64_t>(out_names.size());
    std::vector<int32_t> outs;
    for (const std::string& o : out_names)
      outs.push_back(Act(o, rows, n / parts));
    Costs cost = MatmulCosts(rows, k, n);
    Emit(name, cost, {x}, outs, {weight}, {weight}, {{x, x_class}});
    return outs;
  }
  Costs MatmulCosts(int64_t rows, int64_t k, int64_t n) const {
    Costs cost;
    cost.kind = OpKind::kMatmul;
    cost.fwd_flops = 2.0 * rows * k * n;
    cost.bwd_flops = 2 * cost.fwd_flops;  // dgrad + wgrad
    cost.fwd_bytes = (rows * k + k * n + rows * n) * d_;
    cost.bwd_bytes = 2 * cost.fwd_bytes;
    cost.fwd_kernels = 1;
    cost.bwd_kernels = 2;
    cost.shape = {ShapeDim(rows), ShapeDim(n), ShapeDim(k), false};
    return cost;
  }

  // Normalises `x` ([rows, h]) into `out`; keeps x and the fp32 statistics.
  int32_t NormOp(absl::string_view name, int32_t x, absl::string_view out,
                 int64_t rows) {
    const bool ln = c_.norm == Norm::kLayerNorm;
    const int64_t n = rows * h_;
    // LayerNorm: gamma and beta; RMSNorm: a scale only.
    int32_t w = Param(absl::StrCat(name, ".weight"), ln ? 2 : 1, h_);
    int32_t y = Act(out, rows, h_);
    // LayerNorm keeps rstd and mean per row, RMSNorm rstd only.
    int32_t stats =
        Aux(absl::StrCat(name, ".stats"), (ln ? 2 : 1) * rows * kFp32Bytes,
            Shape({ln ? 2 : 1, rows}), "fp32");
    Costs cost;
    cost.fwd_flops = (ln ? kLayerNormFwdFlops : kRmsNormFwdFlops) * n;
    cost.bwd_flops = (ln ? kLayerNormBwdFlops : kRmsNormBwdFlops) * n;
    cost.fwd_bytes = 2 * n * d_;  // read x, write y
    cost.bwd_bytes = 3 * n * d_;  // read x, dy; write dx
    Emit(
        name, cost, {x}, {y, stats}, {w}, {w},
        {{x, RecomputeClass::kResidualStream}, {stats, RecomputeClass::kTiny}});
    return y;
  }

  // Dropout of `x` (elems elements) into `out`, keeping a uint8 mask.
  int32_t DropoutOp(absl::string_view name, int32_t x, int32_t out,
                    int64_t elems, std::string mask_shape) {
    int32_t mask = Mask(name, elems, std::move(mask_shape));
    Costs cost;
    cost.fwd_flops = static_cast<double>(elems);
    cost.bwd_flops = static_cast<double>(elems);
    // read x, write y and the mask; backward reads dy and the mask, writes dx.
    cost.fwd_bytes = elems * (2 * d_ + kMaskBytes);
    cost.bwd_bytes = cost.fwd_bytes;
    Emit(name, cost, {x}, {out, mask}, {}, {},
         {{mask, RecomputeClass::kRngMask}});
    return out;
  }
  // Dropout on the [T, h] residual branch when the model has dropout.
  int32_t MaybeResidDropout(absl::string_view name, int32_t x,
                            absl::string_view out) {
    if (!c_.dropout) return x;
    return DropoutOp(name, x, Act(out, t_, h_), t_ * h_, Shape({t_, h_}));
  }

  // a + b on [T, h]; its backward is the gradient accumulation at the branch
  // point (reads dy, writes both contributions).
  int32_t ResidualAdd(absl::string_view name, int32_t a, int32_t b,
                      absl::string_view out) {
    const int64_t n = t_ * h_;
    int32_t y = Act(out, t_, h_);
    Costs cost;
    cost.fwd_flops = static_cast<double>(n);
    cost.bwd_flops = 0;
    cost.fwd_bytes = 3 * n * d_;
    cost.bwd_bytes = 3 * n * d_;
    Emit(name, cost, {a, b}, {y}, {}, {}, {});
    return y;
  }

  // --- tensor parallelism (transformer.h) -----------------------------------

  // Appends a collective (no cost: its time is the communication stream's,
  // model/cost_model.cc) with no tensors yet; its index.
  int32_t AppendCollective(std::string name, Phase phase, int32_t layer,
                           CollectiveKind kind, int64_t bytes,
                           const std::vector<int32_t>& group) {
    const int32_t id = static_cast<int32_t>(g_.ops.size());
    // Built in place: GCC's flow analysis takes moving an op whose tensor
    // lists were never touched for a read of uninitialized memory.
    Op& op = g_.ops.emplace_back();
    op.name = text_.Add(name);
    op.phase = phase;
    op.layer = layer;
    op.external_id = id;  // as Graph::AddOp numbers ops
    Collective& c = op.collective.emplace();
    c.kind = kind;
    c.algorithm = CollectiveAlgorithm::kRing;
    c.bytes = bytes;
    c.group = group;
    return id;
  }

  // A forward all-reduce over the tensor-parallel group, `tp.all_reduce.`
  // and `name`.
  void ForwardAllReduce(absl::string_view name, std::vector<int32_t> inputs,
                        std::vector<int32_t> outputs, int64_t bytes,
                        BackwardOf backward) {
    const int32_t id = AppendCollective(
        absl::StrCat("tp.all_reduce.", name), Phase::kForward, layer_,
        CollectiveKind::kAllReduce, bytes, groups_.tensor_parallel);
    g_.ops[id].inputs.assign(inputs.begin(), inputs.end());
    g_.ops[id].outputs.assign(outputs.begin(), outputs.end());
    Forward f;
    f.op = id;
    f.backward = backward;
    fwd_.push_back(std::move(f));
  }

  // The [T, h] output `out` of the last emitted op, which wrote `partial`
  // (its rank's partial sum): all-reduced when tensor parallel.
  int32_t ReducePartial(int32_t partial, absl::string_view out) {
    const int32_t y = Act(out, t_, h_);
    ForwardAllReduce(g_.ops[fwd_.back().op].name.view(), {partial}, {y},
                     g_.tensors[y].bytes, BackwardOf::kIdentity);
    return y;
  }
  std::string PartialName(absl::string_view out) const {
    return tp_ > 1 ? absl::StrCat(out, "_partial") : std::string(out);
  }

  // A row-parallel projection of `x` ([T, k] on each rank) to [T, h].
  int32_t RowParallel(absl::string_view name, int32_t x, RecomputeClass cls,
                      int64_t k, absl::string_view out) {
    const int32_t y = Matmul(name, x, cls, t_, k, h_, {PartialName(out)})[0];
    return tp_ > 1 ? ReducePartial(y, out) : y;
  }
  // Marks the last emitted op as column-parallel.
  void ColumnParallel() {
    if (tp_ > 1) fwd_.back().reduce_input_grad = true;
  }

  // --- blocks --------------------------------------------------------------

  // Token (+ position unless RoPE, + token type for the encoder) lookups
  // summed in one pass; then the encoder's embedding LayerNorm and dropout.
  int32_t Embeddings() {
    const bool encoder = c_.arch == Arch::kEncoderPostNorm;
    const int64_t lookups = 1 + (c_.rope ? 0 : 1) + (encoder ? 1 : 0);
    const int64_t n = t_ * h_;
    std::vector<int32_t> ids;
    ids.push_back(NewTensor("input_ids", t_ * kTokenIdBytes,
                            Shape({c_.batch, c_.seq}), "int64",
                            TensorKind::kInput, false));
    if (encoder) {
      ids.push_back(NewTensor("token_type_ids", t_ * kTokenIdBytes,
                              Shape({c_.batch, c_.seq}), "int64",
                              TensorKind::kInput, false));
    }
    std::vector<int32_t> tables;
    word_embeddings_ = Param("embeddings.word", vocab_tp_, h_);
    tables.push_back(word_embeddings_);
    if (!c_.rope) tables.push_back(Param("embeddings.position", c_.seq, h_));
    if (encoder) tables.push_back(Param("embeddings.token_type", 2, h_));

    const bool more = encoder || c_.dropout;
    const char* emb_name = more ? (encoder ? "emb_sum" : "emb") : "x0";
    int32_t emb = Act(PartialName(emb_name), t_, h_);
    Costs cost;
    // The encoder's fused three-table sum is counted as one FLOP per looked-up
    // element (NVIDIA BERT), a decoder's as the adds between its lookups; the
    // backward scatter-adds at least one FLOP per element.
    const double fwd_per_elem =
        static_cast<double>(encoder ? lookups : lookups - 1);
    cost.fwd_flops = fwd_per_elem * n;
    cost.bwd_flops = std::max(1.0, fwd_per_elem) * n;
    cost.fwd_bytes = (lookups + 1) * n * d_;  // read each lookup, write sum
    cost.bwd_bytes = cost.fwd_bytes;
    cost.fwd_kernels = static_cast<int32_t>(lookups);
    cost.bwd_kernels = static_cast<int32_t>(lookups);
    std::vector<Saved> saved;
    for (int32_t id : ids) saved.push_back({id, RecomputeClass::kTiny});
    Emit("embeddings", cost, ids, {emb}, tables, {}, saved);
    // Each rank looks up its slice of the vocabulary (zeros elsewhere).
    if (tp_ > 1) emb = ReducePartial(emb, emb_name);

    int32_t x = emb;
    if (encoder) {
      x = NormOp("emb_layernorm", x, c_.dropout ? "emb_ln" : "x0", t_);
    }
    if (c_.dropout) {
      x = DropoutOp("emb_dropout", x, Act("x0", t_, h_), n, Shape({t_, h_}));
    }
    return x;
  }

  // Self-attention from the [T, h] input `x` (already normalised for a
  // pre-norm decoder); returns the attention output before its dropout.
  int32_t AttentionBlock(int32_t x) {
    const bool causal = c_.arch == Arch::kDecoderPreNorm;
    std::vector<int32_t> qkv =
        Matmul("qkv_proj", x, RecomputeClass::kNormOutput, t_, h_, 3 * h_tp_,
               {"q", "k", "v"});
    ColumnParallel();
    int32_t q = qkv[0], k = qkv[1], v = qkv[2];
    if (c_.rope) {
      int32_t q_r = Act("q_r", t_, h_tp_);
      int32_t k_r = Act("k_r", t_, h_tp_);
      const int64_t n = t_ * h_tp_;
      Costs cost;
      cost.fwd_flops = kRopeFlopsPerElem * 2 * n;
      cost.bwd_flops = cost.fwd_flops;
      cost.fwd_bytes = 4 * n * d_;  // read q, k; write q_r, k_r
      cost.bwd_bytes = cost.fwd_bytes;
      // Backward needs only the (constant) cos/sin cache.
      Emit("rope", cost, {q, k}, {q_r, k_r}, {}, {}, {});
      q = q_r;
      k = k_r;
    }
    // This rank's heads: h/T of the hidden size.
    const double bssh =
        static_cast<double>(c_.batch) * c_.seq * c_.seq * h_tp_;  // b*s^2*h
    const int64_t thd = t_ * h_tp_ * d_;
    int32_t ctx;
    if (c_.attention == Attention::kFlash) {
      int32_t o = Act("o", t_, h_tp_);
      int32_t lse = Aux("lse", c_.batch * heads_tp_ * c_.seq * kFp32Bytes,
                        Shape({c_.batch, heads_tp_, c_.seq}), "fp32");
      Costs cost;
      cost.kind = OpKind::kFlashAttention;
      // QK^T and PV: 2 * 2*b*s^2*h; a causal kernel skips half the tiles.
      cost.fwd_flops = (causal ? 2 : 4) * bssh;
      cost.bwd_flops = kFlashBwdFactor * cost.fwd_flops;
      cost.fwd_bytes = 4 * thd;  // read q, k, v; write o
      cost.bwd_bytes = 8 * thd;  // read q, k, v, o, do; write dq, dk, dv
      cost.shape = {ShapeDim(c_.seq), ShapeDim(c_.seq),
                    ShapeDim(h_tp_ / heads_tp_), causal};
      Emit("flash_attn", cost, {q, k, v}, {o, lse}, {}, {},
           {{q, RecomputeClass::kGemmOutput},
            {k, RecomputeClass::kGemmOutput},
            {v, RecomputeClass::kGemmOutput},
            {o, RecomputeClass::kAttnOutput},
            {lse, RecomputeClass::kTiny}});
      ctx = o;
    } else {
      // Eager attention materialises [b, a, s, s] scores and probabilities
      // (the full square even when causal).
      const int64_t s2_elems = c_.batch * heads_tp_ * c_.seq * c_.seq;
      const std::string s2_shape = Shape({c_.batch, heads_tp_, c_.seq, c_.seq});
      auto s2 = [&](absl::string_view name) {
        return NewTensor(name, s2_elems * d_, s2_shape, Dtype(d_),
                         TensorKind::kActivation, true);
      };
      auto bmm = [&]() {
        Costs cost;
        cost.kind = OpKind::kBatchedMatmul;
        cost.fwd_flops = 2 * bssh;
        cost.bwd_flops = 2 * cost.fwd_flops;
        // one [b,a,s,s] and two [T,h] operands; backward reads the [b,a,s,s]
        // gradient and operand once per dgrad GEMM and accumulates into the
        // [T,h] gradients.
        cost.fwd_bytes = s2_elems * d_ + 2 * thd;
        cost.bwd_bytes = 2 * cost.fwd_bytes + 2 * thd;
        cost.fwd_kernels = 1;
        cost.bwd_kernels = 2;
        // [s, hd] x [hd, s] and [s, s] x [s, hd]: one volume.
        cost.shape = {ShapeDim(c_.seq), ShapeDim(c_.seq),
                      ShapeDim(h_tp_ / heads_tp_), false};
        return cost;
      };
      int32_t scores = s2("scores");
      Emit(
          "attn_scores", bmm(), {q, k}, {scores}, {}, {},
          {{q, RecomputeClass::kGemmOutput}, {k, RecomputeClass::kGemmOutput}});
      int32_t probs = s2("probs");
      Costs sm;
      sm.fwd_flops = kSoftmaxFwdFlops * s2_elems;
      sm.bwd_flops = kSoftmaxBwdFlops * s2_elems;
      sm.fwd_bytes = 2 * s2_elems * d_;  // read scores, write probs
      sm.bwd_bytes = 3 * s2_elems * d_;  // read probs, dprobs; write dscores
      // scale + mask + softmax, fused
      Emit("attn_softmax", sm, {scores}, {probs}, {}, {},
           {{probs, RecomputeClass::kAttnS2}});
      int32_t p = probs;
      if (c_.dropout) {
        p = DropoutOp("attn_dropout", probs, s2("probs_d"), s2_elems, s2_shape);
      }
      ctx = Act("ctx", t_, h_tp_);
      Emit("attn_context", bmm(), {p, v}, {ctx}, {}, {},
           {{p, RecomputeClass::kAttnS2}, {v, RecomputeClass::kGemmOutput}});
    }
    return RowParallel(names_.out_proj, ctx, RecomputeClass::kGemmInput, h_tp_,
                       "attn_out");
  }

  // The feed-forward block from the [T, h] input `x`.
  int32_t Mlp(int32_t x) {
    // This rank's hidden units: ffn/T.
    const int64_t f = ffn_tp_;
    const int64_t n = t_ * f;
    if (c_.activation == Activation::kGelu) {
      int32_t u =
          Matmul("mlp_up", x, RecomputeClass::kNormOutput, t_, h_, f, {"u"})[0];
      ColumnParallel();
      int32_t g = ElementwiseGelu("gelu", u, "g", t_, f);
      return RowParallel("mlp_down", g, RecomputeClass::kCheapElementwise, f,
                         "mlp_out");
    }
    std::vector<int32_t> gu =
        Matmul("gate_up_proj", x, RecomputeClass::kNormOutput, t_, h_, 2 * f,
               {"gate", "up"});
    ColumnParallel();
    int32_t gate = gu[0], up = gu[1];
    int32_t silu_out = Act("silu_out", t_, f);
    Costs silu;
    silu.fwd_flops = kSiluFlops * n;
    silu.bwd_flops = kSiluFlops * n;
    silu.fwd_bytes = 2 * n * d_;
    silu.bwd_bytes = 3 * n * d_;
    Emit("silu", silu, {gate}, {silu_out}, {}, {},
         {{gate, RecomputeClass::kGemmOutput}});
    int32_t hmul = Act("hmul", t_, f);
    Costs mul;
    mul.fwd_flops = static_cast<double>(n);
    mul.bwd_flops = kSwiGluMulBwdFlops * n;
    mul.fwd_bytes = 3 * n * d_;  // read silu_out, up; write hmul
    mul.bwd_bytes = 5 * n * d_;  // read silu_out, up, dy; write two grads
    Emit("swiglu_mul", mul, {silu_out, up}, {hmul}, {}, {},
         {{silu_out, RecomputeClass::kCheapElementwise},
          {up, RecomputeClass::kGemmOutput}});
    return RowParallel("down_proj", hmul, RecomputeClass::kCheapElementwise, f,
                       "mlp_out");
  }

  int32_t ElementwiseGelu(absl::string_view name, int32_t x,
                          absl::string_view out, int64_t rows, int64_t cols) {
    const int64_t n = rows * cols;
    int32_t y = Act(out, rows, cols);
    Costs cost;
    cost.fwd_flops = kGeluFlops * n;
    cost.bwd_flops = kGeluFlops * n;
    cost.fwd_bytes = 2 * n * d_;
    cost.bwd_bytes = 3 * n * d_;
    Emit(name, cost, {x}, {y}, {}, {}, {{x, RecomputeClass::kGemmOutput}});
    return y;
  }

  // BERT: x -> attention -> dropout -> +x -> LN -> MLP -> dropout -> +x1 -> LN
  int32_t EncoderLayer(int32_t x) {
    int32_t attn = MaybeResidDropout("attn_resid_dropout", AttentionBlock(x),
                                     "attn_out_d");
    int32_t r1 = ResidualAdd("attn_residual_add", x, attn, "r1");
    int32_t x1 = NormOp(names_.norm1, r1, "x1", t_);
    int32_t mlp = MaybeResidDropout("mlp_resid_dropout", Mlp(x1), "mlp_out_d");
    int32_t r2 = ResidualAdd("mlp_residual_add", x1, mlp, "r2");
    return NormOp(names_.norm2, r2, "y", t_);
  }

  // GPT/Llama: x -> norm -> attention -> dropout -> +x -> norm -> MLP ->
  // dropout -> +r1
  int32_t DecoderLayer(int32_t x) {
    int32_t xn = NormOp(names_.norm1, x, "xn", t_);
    int32_t attn = MaybeResidDropout("attn_resid_dropout", AttentionBlock(xn),
                                     "attn_out_d");
    int32_t r1 = ResidualAdd("attn_residual_add", x, attn, "r1");
    int32_t xn2 = NormOp(names_.norm2, r1, "xn2", t_);
    int32_t mlp = MaybeResidDropout("mlp_resid_dropout", Mlp(xn2), "mlp_out_d");
    return ResidualAdd("mlp_residual_add", r1, mlp,
                       c_.norm == Norm::kRmsNorm ? "y" : "r2");
  }

  // Softmax cross-entropy over [rows, V] logits (this rank's V/T of them),
  // keeping the probabilities (in `probs_bytes` per element) for its
  // backward.
  void Loss(absl::string_view name, int32_t logits,
            absl::string_view probs_name, int64_t rows, int64_t probs_bytes) {
    const int64_t n = rows * vocab_tp_;
    std::vector<int32_t> inputs = {logits};
    if (tp_ > 1) {
      // Per row: the max, the sum of exponentials and the target's logit.
      const int64_t stats_bytes = 3 * rows * kFp32Bytes;
      const int32_t stats = Aux(absl::StrCat(name, ".stats"), stats_bytes,
                                Shape({3, rows}), "fp32");
      ForwardAllReduce(absl::StrCat(prefix_, name, ".stats"), {logits}, {stats},
                       stats_bytes, BackwardOf::kNone);
      inputs.push_back(stats);
    }
    int32_t loss = Aux("loss", kLossBytes, "[]", "fp32");
    int32_t probs = Aux(probs_name, n * probs_bytes, Shape({rows, vocab_tp_}),
                        Dtype(probs_bytes));
    Costs cost;
    cost.fwd_flops = kSoftmaxFwdFlops * n;
    cost.bwd_flops = kSoftmaxBwdFlops * n;
    cost.fwd_bytes = n * (d_ + probs_bytes);  // read logits, write probs
    // read probs and the incoming gradient, write dlogits
    cost.bwd_bytes = n * (probs_bytes + 2 * d_);
    Emit(name, cost, inputs, {loss, probs}, {}, {},
         {{probs, RecomputeClass::kLoss}});
  }

  // Final norm, LM head over the vocabulary and cross-entropy.
  void LmHead(int32_t y_last) {
    int32_t yn = NormOp(names_.final_norm, y_last, "yn", t_);
    // GPT-2 ties the LM head to the word embeddings; Llama does not.
    int32_t weight = c_.norm == Norm::kLayerNorm ? word_embeddings_ : kNone;
    int32_t logits = Matmul("lm_head", yn, RecomputeClass::kNormOutput, t_, h_,
                            vocab_tp_, {"logits"}, weight)[0];
    ColumnParallel();
    Loss("cross_entropy", logits, "probs", t_, d_);
  }

  // BERT pre-training heads: masked-LM on max_pred_per_seq gathered positions
  // per sequence (NVIDIA's implementation) and next-sentence prediction on
  // the [CLS] rows.
  void EncoderHeads(int32_t y_last) {
    const int64_t m = c_.max_pred_per_seq * c_.batch;
    int32_t hm = Act("hm", m, h_);
    int32_t cls = Act("cls", c_.batch, h_);
    Costs gather;
    gather.fwd_bytes = 2 * m * h_ * d_;  // read the rows, write hm
    gather.bwd_bytes = gather.fwd_bytes;
    // Its backward scatters into dy_last using the (static) positions only.
    Emit("mlm_gather", gather, {y_last}, {hm, cls}, {}, {}, {});
    int32_t t1 = Matmul("mlm_transform", hm, RecomputeClass::kGemmInput, m, h_,
                        h_, {"t1"})[0];
    const int64_t n = m * h_;
    int32_t t2 = Act("t2", m, h_);
    Costs gelu;
    gelu.fwd_flops = kGeluFlops * n;
    gelu.bwd_flops = kGeluFlops * n;
    gelu.fwd_bytes = 2 * n * d_;
    gelu.bwd_bytes = 3 * n * d_;
    Emit("mlm_gelu", gelu, {t1}, {t2}, {}, {},
         {{t1, RecomputeClass::kCheapElementwise}});
    int32_t t3 = NormOp("mlm_layernorm", t2, "t3", m);
    // The MLM decoder is tied to the word embeddings.
    int32_t logits = Matmul("mlm_decoder", t3, RecomputeClass::kGemmInput, m,
                            h_, vocab_tp_, {"mlm_logits"}, word_embeddings_)[0];
    ColumnParallel();
    // The MLM loss runs in fp32 and keeps fp32 probabilities.
    Loss("mlm_loss", logits, "mlm_probs", m, kFp32Bytes);

    // NSP: pooler (dense + tanh) and the 2-way classifier fused in one op.
    int32_t pooler = Param("nsp_pooler.weight", h_, h_);
    int32_t head = Param("nsp_head.weight", h_, kNspClasses);
    int32_t nsp_logits = Act("nsp_logits", c_.batch, kNspClasses);
    const int64_t b = c_.batch;
    Costs nsp;
    nsp.kind = OpKind::kMatmul;
    nsp.fwd_flops = 2.0 * b * h_ * h_ + 2.0 * b * h_ * kNspClasses;
    nsp.bwd_flops = 2 * nsp.fwd_flops;
    // pooler GEMM operands; the head reads its weight and writes the logits
    // (its input stays on chip).
    nsp.fwd_bytes =
        (b * h_ + h_ * h_ + b * h_ + h_ * kNspClasses + b * kNspClasses) * d_;
    nsp.bwd_bytes = 2 * nsp.fwd_bytes;
    // The pooler's [b, h] x [h, h] is nearly all of it.
    nsp.shape = {ShapeDim(b), ShapeDim(h_), ShapeDim(h_), false};
    nsp.fwd_kernels = 1;
    nsp.bwd_kernels = 2;
    Emit("nsp_pooler_and_head", nsp, {cls}, {nsp_logits}, {pooler, head},
         {pooler, head}, {{cls, RecomputeClass::kGemmInput}});
  }

  // One backward op per forward op, in reverse order.
  void Backward() {
    const size_t num_fwd_tensors = g_.tensors.size();
    // Forward consumers per tensor (for gradient names).
    std::vector<int32_t> fwd_consumers(num_fwd_tensors, 0);
    for (const Forward& f : fwd_) {
      if (f.backward == BackwardOf::kNone) continue;
      TensorIds in = g_.ops[f.op].inputs;
      std::sort(in.begin(), in.end());
      in.erase(std::unique(in.begin(), in.end()), in.end());
      for (int32_t t : in) ++fwd_consumers[t];
    }
    // Gradient contributions received so far, per forward tensor.
    std::vector<std::vector<int32_t>> grads(num_fwd_tensors);
    const std::vector<std::vector<int32_t>> completes = GradientsCompleted();
    for (auto it = fwd_.rbegin(); it != fwd_.rend(); ++it) {
      const Op fwd = g_.ops[it->op];  // copy: AddOp may reallocate
      if (it->backward == BackwardOf::kNone) continue;
      if (it->backward == BackwardOf::kIdentity) {
        grads[fwd.inputs[0]] = grads[fwd.outputs[0]];
        continue;
      }
      layer_ = fwd.layer;
      prefix_.clear();
      Op op;
      op.name = text_.Add(absl::StrCat(fwd.name.view(), ".bwd"));
      op.phase = Phase::kBackward;
      op.layer = fwd.layer;
      op.cost = it->bwd_cost;
      op.inputs.assign(it->saved.begin(), it->saved.end());
      for (int32_t p : it->bwd_params) op.inputs.push_back(p);
      for (int32_t out : fwd.outputs) {
        for (int32_t gr : grads[out]) op.inputs.push_back(gr);
      }
      std::vector<int32_t> seen;
      for (int32_t in : fwd.inputs) {
        if (!differentiable_[in]) continue;
        if (std::find(seen.begin(), seen.end(), in) != seen.end()) continue;
        seen.push_back(in);
        const Tensor& t = g_.tensors[in];
        std::string name =
            fwd_consumers[in] > 1
                ? absl::StrCat(t.name.view(), ".grad.", fwd.name.view())
                : absl::StrCat(t.name.view(), ".grad");
        Tensor grad;
        grad.name = text_.Add(name);
        grad.bytes = t.bytes;
        grad.kind = TensorKind::kGradient;
        grad.dtype = t.dtype;
        grad.shape = t.shape;
        int32_t id = g_.AddTensor(std::move(grad));
        grads[in].push_back(id);
        op.outputs.push_back(id);
      }
      g_.AddOp(std::move(op));
      if (it->reduce_input_grad) {
        for (int32_t in : seen) ReduceGradient(fwd, grads[in].back());
      }
      const size_t i = static_cast<size_t>(fwd_.rend() - it) - 1;
      for (int32_t p : completes[i]) AddToBucket(p, fwd.layer);
    }
    layer_ = -1;
  }

  // After a column-parallel op's backward: its input's gradient `partial`
  // all-reduced over the tensor-parallel group into a new gradient, which
  // replaces it.
  void ReduceGradient(const Op& fwd, int32_t& partial) {
    Tensor reduced = g_.tensors[partial];
    reduced.name = text_.Add(absl::StrCat(reduced.name.view(), ".reduced"));
    const int32_t id = g_.AddTensor(std::move(reduced));
    const int32_t op = AppendCollective(
        absl::StrCat("tp.all_reduce.", fwd.name.view(), ".bwd"),
        Phase::kBackward, fwd.layer, CollectiveKind::kAllReduce,
        g_.tensors[id].bytes, groups_.tensor_parallel);
    g_.ops[op].inputs.push_back(partial);
    g_.ops[op].outputs.push_back(id);
    partial = id;
  }

  // DDP's buckets (transformer.h): for each forward op (by its place in
  // fwd_), the parameters whose gradient its backward completes, in the
  // order they enter the buckets. Empty without data parallelism.
  std::vector<std::vector<int32_t>> GradientsCompleted() {
    std::vector<std::vector<int32_t>> completes(fwd_.size());
    if (c_.data_parallel <= 1) return completes;
    // A parameter's gradient is complete after the backward of its first
    // forward use: that backward runs last of its uses'.
    std::vector<bool> used(g_.tensors.size(), false);
    for (size_t i = 0; i < fwd_.size(); ++i) {
      for (int32_t t : g_.ops[fwd_[i].op].inputs) {
        if (g_.tensors[t].kind != TensorKind::kParameter || used[t]) continue;
        used[t] = true;
        completes[i].push_back(t);
      }
      // Reverse order of use within the op too.
      std::reverse(completes[i].begin(), completes[i].end());
      params_left_ += static_cast<int64_t>(completes[i].size());
    }
    return completes;
  }

  // Adds parameter `p`'s gradient to the open bucket; all-reduces the bucket
  // once it reaches the cap or holds the last gradient.
  void AddToBucket(int32_t p, int32_t layer) {
    bucket_bytes_ += g_.tensors[p].bytes;
    --params_left_;
    if (bucket_bytes_ < kDdpBucketCapBytes && params_left_ > 0) return;
    AppendCollective(absl::StrCat("ddp.all_reduce.bucket", buckets_),
                     Phase::kBackward, layer, CollectiveKind::kAllReduce,
                     bucket_bytes_, groups_.data_parallel);
    ++buckets_;
    bucket_bytes_ = 0;
  }

  // --- FSDP (transformer.h) -------------------------------------------------

  // One FSDP unit: its parameters (in first-use order) and what the rewrite
  // adds for it.
  struct Unit {
    std::string name;
    std::vector<int32_t> params;
    int64_t bytes = 0;  // full, before sharding
    int32_t gathered_fwd = kNone;
    int32_t gathered_bwd = kNone;
    // In the rewritten order; kNone until emitted.
    int32_t fwd_gather_op = kNone;
    int32_t bwd_gather_op = kNone;
    int32_t last_bwd_op = kNone;  // in the generated order
  };

  // Rewrites the generated step op by op: the all-gathers before each
  // unit's first forward and first backward op, the gathered parameters in
  // place of the unit's parameters, the reduce-scatter after its last
  // backward op, the shards' bytes, and the recipes.
  absl::Status ShardParameters() {
    std::vector<Unit> units(static_cast<size_t>(c_.layers) + 1);
    auto unit_of = [](const Op& op) {
      return static_cast<size_t>(op.layer + 1);
    };
    for (size_t u = 0; u < units.size(); ++u) {
      units[u].name = u == 0 ? "root" : absl::StrCat("L", u - 1);
    }
    std::vector<int32_t> owner(g_.tensors.size(), kNone);
    for (size_t o = 0; o < g_.ops.size(); ++o) {
      const Op& op = g_.ops[o];
      const size_t u = unit_of(op);
      if (op.phase == Phase::kBackward) {
        units[u].last_bwd_op = static_cast<int32_t>(o);
      }
      for (int32_t t : op.inputs) {
        if (g_.tensors[t].kind != TensorKind::kParameter) continue;
        if (owner[t] == kNone) {
          owner[t] = static_cast<int32_t>(u);
          units[u].params.push_back(t);
          units[u].bytes += g_.tensors[t].bytes;
        } else if (owner[t] != static_cast<int32_t>(u)) {
          // Every op of this generator reads only its own unit's parameters
          // (the tied embeddings are the root's twice over, transformer.h).
          return absl::InternalError(absl::StrCat(
              g_.OpLabel(static_cast<int32_t>(o)), " reads ", g_.TensorLabel(t),
              " of FSDP unit ", units[static_cast<size_t>(owner[t])].name));
        }
      }
    }
    for (Unit& unit : units) {
      const int64_t elems = unit.bytes / d_;
      for (const char* phase : {"fwd", "bwd"}) {
        Tensor t;
        t.name = text_.Add(absl::StrCat("fsdp.", unit.name, ".params.", phase));
        t.bytes = unit.bytes;
        t.kind = TensorKind::kParameter;
        t.dtype = text_.Intern(Dtype(d_));
        t.shape = text_.Intern(Shape({elems}));
        const int32_t id = g_.AddTensor(std::move(t));
        (phase[0] == 'f' ? unit.gathered_fwd : unit.gathered_bwd) = id;
      }
    }

    std::vector<Op> generated = std::move(g_.ops);
    g_.ops.clear();
    g_.ops.reserve(generated.size() + 3 * units.size());
    for (size_t o = 0; o < generated.size(); ++o) {
      Op& op = generated[o];
      Unit& unit = units[unit_of(op)];
      const bool fwd = op.phase == Phase::kForward;
      const int32_t gathered = fwd ? unit.gathered_fwd : unit.gathered_bwd;
      int32_t& gather_op = fwd ? unit.fwd_gather_op : unit.bwd_gather_op;
      if (gather_op == kNone) {
        gather_op = AddCollective(
            absl::StrCat("fsdp.all_gather.", unit.name, fwd ? ".fwd" : ".bwd"),
            op.phase, op.layer, CollectiveKind::kAllGather, unit.bytes);
        Op& gather = g_.ops[static_cast<size_t>(gather_op)];
        gather.inputs.assign(unit.params.begin(), unit.params.end());
        gather.outputs.push_back(gathered);
      }
      // The gathered parameters once, where the op read its parameters.
      TensorIds inputs;
      bool read = false;
      for (int32_t t : op.inputs) {
        if (g_.tensors[t].kind == TensorKind::kParameter) {
          if (read) continue;
          read = true;
          t = gathered;
        }
        inputs.push_back(t);
      }
      // FSDP reshards a unit's backward copy in its post-backward hook,
      // once all its gradients are made: it lives to the unit's last
      // backward op, which recipes rebuilding the unit's activations may
      // need it until (the root's last, the embeddings' backward, reads no
      // parameter).
      if (static_cast<int32_t>(o) == unit.last_bwd_op && !read) {
        inputs.push_back(gathered);
      }
      op.inputs = std::move(inputs);
      op.external_id = static_cast<int64_t>(g_.ops.size());
      g_.ops.push_back(std::move(op));
      if (static_cast<int32_t>(o) == unit.last_bwd_op) {
        AddCollective(absl::StrCat("fsdp.reduce_scatter.", unit.name),
                      Phase::kBackward, g_.ops.back().layer,
                      CollectiveKind::kReduceScatter, unit.bytes);
      }
    }
    // Sharded only now: the gathered bytes above are the full ones.
    const int64_t n = c_.fully_sharded;
    for (const Unit& unit : units) {
      for (int32_t p : unit.params) {
        int64_t& bytes = g_.tensors[static_cast<size_t>(p)].bytes;
        bytes = (bytes + n - 1) / n;
      }
    }
    return AddRecipes(units);
  }

  // Appends a collective over the rank's sharding group, with no tensors
  // yet; its index.
  int32_t AddCollective(std::string name, Phase phase, int32_t layer,
                        CollectiveKind kind, int64_t bytes) {
    return AppendCollective(std::move(name), phase, layer, kind, bytes,
                            groups_.data_parallel);
  }

  // The recipes of the activations whose producer read a unit's
  // forward-gathered parameters (transformer.h), after checking that each
  // saved one is first needed once the unit's backward all-gather has run.
  // The unsaved ones get one too: a chain rebuilding a saved activation
  // may need them (the logits, for the loss's probabilities), and in
  // backward only the backward-gathered parameters exist.
  absl::Status AddRecipes(const std::vector<Unit>& units) {
    const size_t num_tensors = g_.tensors.size();
    std::vector<int32_t> first_bwd_use(num_tensors, kNone);
    for (size_t o = 0; o < g_.ops.size(); ++o) {
      const Op& op = g_.ops[o];
      if (op.phase != Phase::kBackward) continue;
      for (int32_t t : op.inputs) {
        int32_t& first = first_bwd_use[static_cast<size_t>(t)];
        if (first == kNone) first = static_cast<int32_t>(o);
      }
    }
    // The unit whose forward-gathered parameters each tensor is.
    std::vector<int32_t> unit_of_gathered(num_tensors, kNone);
    for (size_t u = 0; u < units.size(); ++u) {
      unit_of_gathered[static_cast<size_t>(units[u].gathered_fwd)] =
          static_cast<int32_t>(u);
    }
    for (size_t o = 0; o < g_.ops.size(); ++o) {
      const Op& op = g_.ops[o];
      if (op.phase != Phase::kForward || op.collective.has_value()) continue;
      const Unit* unit = nullptr;
      for (int32_t t : op.inputs) {
        const int32_t u = unit_of_gathered[static_cast<size_t>(t)];
        if (u != kNone) unit = &units[static_cast<size_t>(u)];
      }
      if (unit == nullptr) continue;
      for (int32_t t : op.outputs) {
        const int32_t first = first_bwd_use[static_cast<size_t>(t)];
        Tensor& tensor = g_.tensors[static_cast<size_t>(t)];
        if (tensor.rebuild.has_value()) continue;
        if (first != kNone && first < unit->bwd_gather_op) {
          return absl::InvalidArgumentError(absl::StrCat(
              "transformer ", g_.name, ": fully_sharded: ", g_.TensorLabel(t),
              ", made with FSDP unit ", unit->name,
              "'s parameters, is first needed in backward by ",
              g_.OpLabel(first), ", before ", g_.OpLabel(unit->bwd_gather_op),
              " gathers them, so it could not be recomputed (as a post-norm "
              "encoder's layer outputs; model/transformer.h)"));
        }
        Rebuild& r = tensor.rebuild.emplace();
        r.inputs = op.inputs;
        std::replace(r.inputs.begin(), r.inputs.end(), unit->gathered_fwd,
                     unit->gathered_bwd);
        r.cost = op.cost;
      }
    }
    return absl::OkStatus();
  }

  const TransformerConfig& c_;
  const int64_t d_;
  const int64_t t_;
  const int64_t h_;
  // Tensor parallelism (1: none): this rank's share of the hidden size,
  // heads, MLP units and vocabulary.
  const int64_t tp_;
  const int64_t h_tp_;
  const int64_t heads_tp_;
  const int64_t ffn_tp_;
  const int64_t vocab_tp_;
  const LayoutGroups groups_;
  const Names names_;
  // The graph's names, packed; its dtypes and shapes, held once each.
  TextPool text_;
  Graph g_;
  std::vector<Forward> fwd_;
  std::vector<bool> differentiable_;
  int32_t word_embeddings_ = kNone;
  // DDP's buckets: parameters not yet in one, the open bucket's gradient
  // bytes, buckets all-reduced so far.
  int64_t params_left_ = 0;
  int64_t bucket_bytes_ = 0;
  int32_t buckets_ = 0;
  int32_t layer_ = -1;
  std::string prefix_;
};

absl::Status FieldError(const TransformerConfig& c, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(
      "transformer ", c.name.empty() ? "<unnamed>" : c.name, ": ", msg));
}

}  // namespace

int64_t LayoutRanks(const TransformerConfig& c) {
  return int64_t{c.tensor_parallel} *
         std::max(c.data_parallel, c.fully_sharded);
}

bool RanksDiffer(const TransformerConfig& c) {
  return c.tensor_parallel > 1 &&
         std::max(c.data_parallel, c.fully_sharded) > 1;
}

LayoutGroups GroupsOf(const TransformerConfig& c, int32_t rank) {
  const int32_t tp = std::max(c.tensor_parallel, 1);
  const int32_t dp = std::max({c.data_parallel, c.fully_sharded, 1});
  LayoutGroups groups;
  const int32_t first = rank / tp * tp;
  for (int32_t i = 0; i < tp; ++i) groups.tensor_parallel.push_back(first + i);
  for (int32_t i = 0; i < dp; ++i) {
    groups.data_parallel.push_back(rank % tp + i * tp);
  }
  return groups;
}

absl::Status ValidateTransformerConfig(const TransformerConfig& c) {
  struct Dim {
    absl::string_view field;
    int64_t value;
  };
  for (const Dim& dim :
       {Dim{"layers", c.layers}, Dim{"hidden", c.hidden}, Dim{"heads", c.heads},
        Dim{"ffn", c.ffn}, Dim{"vocab", c.vocab}, Dim{"seq", c.seq},
        Dim{"batch", c.batch}, Dim{"dtype_bytes", c.dtype_bytes}}) {
    if (dim.value <= 0) {
      return FieldError(
          c, absl::StrCat(dim.field, " must be > 0, got ", dim.value));
    }
  }
  if (c.layers > kMaxTransformerLayers) {
    return FieldError(
        c, absl::StrCat("layers must be <= ", kMaxTransformerLayers, ", got ",
                        c.layers));
  }
  if (c.data_parallel < 1 || c.data_parallel > kMaxDataParallel) {
    return FieldError(
        c, absl::StrCat("data_parallel must be in [1, ", kMaxDataParallel,
                        "] ranks, got ", c.data_parallel));
  }
  if (c.fully_sharded < 1 || c.fully_sharded > kMaxFullyShardedRanks) {
    return FieldError(
        c, absl::StrCat("fully_sharded must be in [1, ", kMaxFullyShardedRanks,
                        "] ranks, got ", c.fully_sharded));
  }
  if (c.data_parallel > 1 && c.fully_sharded > 1) {
    return FieldError(
        c, absl::StrCat("data_parallel (", c.data_parallel,
                        ") and fully_sharded (", c.fully_sharded,
                        ") cannot both be > 1: hybrid sharding is not "
                        "generated"));
  }
  if (c.tensor_parallel < 1 || c.tensor_parallel > kMaxTensorParallel) {
    return FieldError(
        c, absl::StrCat("tensor_parallel must be in [1, ", kMaxTensorParallel,
                        "] ranks, got ", c.tensor_parallel));
  }
  if (c.heads % c.tensor_parallel != 0 || c.ffn % c.tensor_parallel != 0) {
    return FieldError(
        c, absl::StrCat("tensor_parallel (", c.tensor_parallel,
                        ") must divide heads (", c.heads, ") and ffn (", c.ffn,
                        "): each rank holds as many heads and MLP units"));
  }
  if (LayoutRanks(c) > kMaxCollectiveRanks) {
    return FieldError(
        c, absl::StrCat("tensor_parallel x ",
                        c.fully_sharded > 1 ? "fully_sharded" : "data_parallel",
                        " is ", LayoutRanks(c), " ranks; at most ",
                        kMaxCollectiveRanks));
  }
  if (c.rank < 0 || c.rank >= LayoutRanks(c)) {
    return FieldError(c, absl::StrCat("rank must be in [0, ", LayoutRanks(c),
                                      ") (the layout's ranks), got ", c.rank));
  }
  if (c.hidden % c.heads != 0) {
    return FieldError(
        c, absl::StrCat("hidden (", c.hidden, ") must be divisible by heads (",
                        c.heads, ")"));
  }
  if (c.arch == Arch::kEncoderPostNorm &&
      (c.max_pred_per_seq <= 0 || c.max_pred_per_seq > c.seq)) {
    return FieldError(
        c, absl::StrCat("max_pred_per_seq must be in [1, seq=", c.seq,
                        "] for an encoder, got ", c.max_pred_per_seq));
  }
  // Byte totals, bounded generously in double (each term counts the forward
  // tensors of its shape class plus their gradients), so that every int64
  // product and sum in the generator and over the graph stays exact.
  const double d = static_cast<double>(c.dtype_bytes);
  const double tokens = static_cast<double>(c.batch) * c.seq;
  const double layers = c.layers;
  struct Term {
    absl::string_view fields;
    double bytes;
  };
  const Term terms[] = {
      {"layers * batch * seq * hidden * dtype_bytes",
       64.0 * (layers + 2) * tokens * c.hidden * d},
      {"layers * batch * seq * ffn * dtype_bytes",
       16.0 * (layers + 1) * tokens * c.ffn * d},
      {"layers * batch * heads * seq^2 * dtype_bytes",
       16.0 * layers * c.batch * c.heads * static_cast<double>(c.seq) * c.seq *
           (d + 1)},
      {"batch * seq * vocab", 4.0 * tokens * c.vocab * (d + kFp32Bytes)},
      {"layers * hidden * (hidden + ffn) * dtype_bytes",
       8.0 * (layers + 1) * c.hidden * (static_cast<double>(c.hidden) + c.ffn) *
           d},
      {"vocab * hidden * dtype_bytes", 4.0 * c.vocab * c.hidden * d},
  };
  double total = 0;
  const Term* largest = &terms[0];
  for (const Term& term : terms) {
    total += term.bytes;
    if (term.bytes > largest->bytes) largest = &term;
  }
  if (!(total < kMaxTotalBytes)) {
    return FieldError(
        c, absl::StrCat("sizes overflow int64 bytes (about ", total,
                        " bytes in all; the largest part is ", largest->fields,
                        "): reduce them"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Graph> BuildTransformer(const TransformerConfig& c) {
  SLACKSWAP_RETURN_IF_ERROR(ValidateTransformerConfig(c));
  SLACKSWAP_ASSIGN_OR_RETURN(Graph g, Builder(c).Build());
  SLACKSWAP_RETURN_IF_ERROR(IndexGraph(g));
  return g;
}

absl::StatusOr<Attention> ParseAttention(absl::string_view s) {
  if (s == "flash") return Attention::kFlash;
  if (s == "unfused") return Attention::kUnfused;
  return absl::InvalidArgumentError(absl::StrCat(
      "attention must be \"flash\" or \"unfused\", got ", QuoteInput(s)));
}

}  // namespace slackswap
