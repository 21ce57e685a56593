// The transformer workload generator: a training step (embedding, N layers,
// head and loss; forward then backward ops with FLOPs, HBM bytes, kernel
// counts and saved activations) generated from first principles. The named
// configurations (bert-large, gpt2-xl, llama-7b) are model/workloads.h.
//
//   absl::StatusOr<TransformerConfig> c = FindWorkload("gpt2-xl");
//   c->layers = 4;                        // an override
//   absl::StatusOr<Graph> g = BuildTransformer(*c);
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
};

// The most layers a generated step may have (its op count grows with them).
inline constexpr int32_t kMaxTransformerLayers = 10'000;

absl::Status ValidateTransformerConfig(const TransformerConfig& c);
// The step's graph, indexed (IndexGraph already ran).
absl::StatusOr<Graph> BuildTransformer(const TransformerConfig& c);

absl::StatusOr<Attention> ParseAttention(absl::string_view s);

}  // namespace slackswap

#endif  // SLACKSWAP_MODEL_TRANSFORMER_H_
