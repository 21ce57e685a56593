#!/usr/bin/env bash
# Installs the Debian 12 packages the build and tests need. Idempotent: quiet
# and fast when everything is already there.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev
  libabsl-dev prometheus-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # Tests: promtool (metrics checks), a Python gRPC client, TLS certificates.
  prometheus python3 python3-grpcio python3-protobuf python3-yaml openssl
  # tools/torch_export.py and its tests (Debian's system python3).
  python3-torch python3-torchvision
  # Fuzzing (libFuzzer) and sanitizer builds.
  clang libclang-rt-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
