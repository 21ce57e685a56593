#!/bin/bash
# Regenerates tests/data/torchvision/*.pb: one training step of each
# torchvision model the real-model study uses (docs/PLANNERS.md), batch 4 at
# 224x224, exported with python/slackswap on the CPU (bf16 sizes, native
# dropout). The graphs depend on the model's structure and shapes only, not
# on its weights, so the same PyTorch and torchvision give the same bytes.
#
#   bash scripts/export_torchvision_graphs.sh   # Debian's python3-torch
set -euo pipefail
cd "$(dirname "$0")/.."
out=tests/data/torchvision
mkdir -p "$out"
for model in resnet50 mobilenet_v3_large efficientnet_b0 convnext_tiny; do
  /usr/bin/python3 tools/torch_export.py \
    --model "torchvision.models.${model}()" --input-shape 4,3,224,224 \
    --name "torchvision ${model} (4,3,224,224)" --out "$out/${model}.pb"
done
