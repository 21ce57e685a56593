#include "model/workloads.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/format.h"
#include "common/status_macros.h"

namespace slackswap {
namespace {

// Every preset is a mixed-precision (bf16/fp16) step with fused attention
// unless overridden.
TransformerConfig Base(const char* name) {
  TransformerConfig c;
  c.name = name;
  c.attention = Attention::kFlash;
  c.dtype_bytes = 2;
  return c;
}

// BERT-Large uncased (Devlin et al. 2019), NVIDIA pre-training phase 2.
TransformerConfig BertLarge() {
  TransformerConfig c = Base("bert-large");
  c.arch = Arch::kEncoderPostNorm;
  c.layers = 24;
  c.hidden = 1024;
  c.heads = 16;
  c.ffn = 4096;
  c.vocab = 30522;
  c.seq = 512;
  c.batch = 32;
  c.activation = Activation::kGelu;
  c.norm = Norm::kLayerNorm;
  c.dropout = true;
  c.rope = false;
  c.max_pred_per_seq = 80;
  return c;
}

// GPT-2 XL, 1.5B (Radford et al. 2019).
TransformerConfig Gpt2Xl() {
  TransformerConfig c = Base("gpt2-xl");
  c.arch = Arch::kDecoderPreNorm;
  c.layers = 48;
  c.hidden = 1600;
  c.heads = 25;
  c.ffn = 6400;
  c.vocab = 50257;
  c.seq = 1024;
  c.batch = 8;
  c.activation = Activation::kGelu;
  c.norm = Norm::kLayerNorm;
  c.dropout = true;
  c.rope = false;
  return c;
}

// LLaMA 7B shapes (Touvron et al. 2023): RMSNorm, RoPE, SwiGLU, no dropout,
// no biases.
TransformerConfig Llama7b() {
  TransformerConfig c = Base("llama-7b");
  c.arch = Arch::kDecoderPreNorm;
  c.layers = 32;
  c.hidden = 4096;
  c.heads = 32;
  c.ffn = 11008;
  c.vocab = 32000;
  c.seq = 2048;
  c.batch = 4;
  c.activation = Activation::kSwiGlu;
  c.norm = Norm::kRmsNorm;
  c.dropout = false;
  c.rope = true;
  return c;
}

}  // namespace

const std::vector<Workload>& WorkloadCatalog() {
  static const std::vector<Workload>* const catalog = new std::vector<Workload>{
      {"bert-large", "BERT-Large pre-training, batch 32, sequence 512",
       BertLarge()},
      {"gpt2-xl", "GPT-2 XL (1.5B), batch 8, sequence 1024", Gpt2Xl()},
      {"llama-7b", "LLaMA-7B shapes, batch 4, sequence 2048", Llama7b()},
  };
  return *catalog;
}

std::vector<std::string> WorkloadNames() {
  std::vector<std::string> names;
  for (const Workload& w : WorkloadCatalog()) names.push_back(w.name);
  return names;
}

absl::StatusOr<TransformerConfig> FindWorkload(absl::string_view name) {
  for (const Workload& w : WorkloadCatalog()) {
    if (w.name == name) return w.config;
  }
  return absl::NotFoundError(
      absl::StrCat("unknown workload ", QuoteInput(name),
                   "; known: ", absl::StrJoin(WorkloadNames(), ", ")));
}

absl::StatusOr<TransformerConfig> WorkloadConfig(
    absl::string_view name, const WorkloadOverrides& overrides) {
  SLACKSWAP_ASSIGN_OR_RETURN(TransformerConfig config, FindWorkload(name));
  if (overrides.layers.has_value()) {
    if (*overrides.layers <= 0 || *overrides.layers > kMaxTransformerLayers) {
      return absl::InvalidArgumentError(
          absl::StrCat("layers must be in [1, ", kMaxTransformerLayers,
                       "], got ", *overrides.layers));
    }
    config.layers = static_cast<int32_t>(*overrides.layers);
  }
  if (overrides.batch.has_value()) config.batch = *overrides.batch;
  if (overrides.seq.has_value()) config.seq = *overrides.seq;
  if (overrides.attention.has_value()) config.attention = *overrides.attention;
  if (overrides.data_parallel.has_value()) {
    // Checked here, before it narrows to the config's int32.
    if (*overrides.data_parallel < 1 ||
        *overrides.data_parallel > kMaxDataParallel) {
      return absl::InvalidArgumentError(
          absl::StrCat("data_parallel must be in [1, ", kMaxDataParallel,
                       "] ranks, got ", *overrides.data_parallel));
    }
    config.data_parallel = static_cast<int32_t>(*overrides.data_parallel);
  }
  if (overrides.fully_sharded.has_value()) {
    if (*overrides.fully_sharded < 1 ||
        *overrides.fully_sharded > kMaxFullyShardedRanks) {
      return absl::InvalidArgumentError(
          absl::StrCat("fully_sharded must be in [1, ", kMaxFullyShardedRanks,
                       "] ranks, got ", *overrides.fully_sharded));
    }
    config.fully_sharded = static_cast<int32_t>(*overrides.fully_sharded);
  }
  if (overrides.tensor_parallel.has_value()) {
    if (*overrides.tensor_parallel < 1 ||
        *overrides.tensor_parallel > kMaxTensorParallel) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor_parallel must be in [1, ", kMaxTensorParallel,
                       "] ranks, got ", *overrides.tensor_parallel));
    }
    config.tensor_parallel = static_cast<int32_t>(*overrides.tensor_parallel);
  }
  if (overrides.rank.has_value()) {
    // No layout has more ranks than a collective's group may name.
    if (*overrides.rank < 0 || *overrides.rank >= kMaxCollectiveRanks) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank must be in [0, ", LayoutRanks(config),
                       ") (the layout's ranks), got ", *overrides.rank));
    }
    config.rank = static_cast<int32_t>(*overrides.rank);
  }
  SLACKSWAP_RETURN_IF_ERROR(ValidateTransformerConfig(config));
  return config;
}

absl::StatusOr<Graph> BuildWorkload(absl::string_view name,
                                    const WorkloadOverrides& overrides) {
  SLACKSWAP_ASSIGN_OR_RETURN(TransformerConfig config,
                             WorkloadConfig(name, overrides));
  return BuildTransformer(config);
}

}  // namespace slackswap
