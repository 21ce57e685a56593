#!/bin/bash
# Regenerates tests/data/torchvision/*.pb: one training step of each
# torchvision model the real-model study uses (docs/PLANNERS.md), batch 4 at
# 224x224, exported with python/slackswap on the CPU (bf16 sizes, native
# dropout). The graphs depend on the model's structure and shapes only, not
# on its weights, so the same PyTorch and torchvision give the same bytes.
#
#   bash scripts/export_torchvision_graphs.sh           # Debian's python3-torch
#   bash scripts/export_torchvision_graphs.sh --check   # exported == committed?
set -euo pipefail
cd "$(dirname "$0")/.."
data=tests/data/torchvision
out=$data
if [[ "${1:-}" == "--check" ]]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"
models=(resnet50 mobilenet_v3_large efficientnet_b0 convnext_tiny)
for model in "${models[@]}"; do
  /usr/bin/python3 tools/torch_export.py \
    --model "torchvision.models.${model}()" --input-shape 4,3,224,224 \
    --name "torchvision ${model} (4,3,224,224)" --out "$out/${model}.pb"
done
if [[ "$out" != "$data" ]]; then
  for model in "${models[@]}"; do
    if ! cmp -s "$out/${model}.pb" "$data/${model}.pb"; then
      echo "export_torchvision_graphs: ${model}.pb differs from $data;" \
           "regenerate with bash scripts/export_torchvision_graphs.sh" >&2
      exit 1
    fi
  done
  echo "export_torchvision_graphs: all ${#models[@]} graphs as committed"
fi
