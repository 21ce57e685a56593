#!/usr/bin/env bash
# Installs what the build, the tests or the extra jobs need, in three tiers,
# each including the ones before it:
#
#   bash scripts/setup.sh build    # scripts/run.sh and the container image:
#                                  #   compiler, CMake, gRPC, protobuf, Abseil,
#                                  #   prometheus-cpp, COIN-OR CLP/CBC (the
#                                  #   planner's LP bound and MILP)
#   bash scripts/setup.sh test     # scripts/test.sh (the default): adds
#                                  #   GoogleTest, Google Benchmark, Python
#                                  #   gRPC, Prometheus, openssl, PyTorch,
#                                  #   Chromium, kubectl and two pinned npm
#                                  #   tools
#   bash scripts/setup.sh extras   # fuzzing (clang, libFuzzer), profiling
#                                  #   (perf) and the fresh-machine check
#                                  #   (debootstrap)
#
# Debian 12 packages come from apt-get; the npm tools are cached under
#   ${SLACKSWAP_TOOLS_DIR:-${XDG_CACHE_HOME:-~/.cache}/slackswap-tools}/NAME-VERSION
# where the tests look for them. Idempotent: quiet and fast when everything
# is already there. The tests themselves never install anything.
set -euo pipefail
tier="${1:-test}"

build_packages=(
  build-essential cmake pkg-config git
  libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev
  libabsl-dev prometheus-cpp-dev libssl-dev
  coinor-libclp-dev coinor-libcbc-dev
  # The shared tier's Redis protocol (--shared_store).
  libhiredis-dev
)
test_packages=(
  libgtest-dev libgmock-dev libbenchmark-dev
  # promtool and a Prometheus server (metrics checks), a Python gRPC client,
  # TLS certificates.
  prometheus python3 python3-grpcio python3-protobuf python3-yaml openssl
  # tools/torch_export.py and its tests (Debian's system python3); pip,
  # setuptools and wheel build the python/ package in its test.
  python3-torch python3-torchvision python3-pip python3-setuptools
  python3-wheel
  # Renders the SVG pictures (--svg) headless in tests/svg_render_test.py.
  chromium
  # The shared tier's end-to-end tests start their own redis-server.
  redis-server
  # The system CA bundle, a runtime package the binaries read
  # (scripts/runtime-packages.txt; its test checks the file).
  ca-certificates
)
extras_packages=(
  # Fuzzing (libFuzzer) with sanitizers.
  clang libclang-rt-dev
  # Profiling slackswapd (docs/PERFORMANCE.md).
  linux-perf
  # The fresh-machine measurement of scripts/run.sh (docs/operations.md).
  debootstrap
)

packages=("${build_packages[@]}")
case "$tier" in
  build) ;;
  test) packages+=("${test_packages[@]}") ;;
  extras) packages+=("${test_packages[@]}" "${extras_packages[@]}") ;;
  *)
    echo "usage: $0 [build|test|extras]" >&2
    exit 2
    ;;
esac
test_tools=0
[[ $tier != build ]] && test_tools=1

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# Commands that other packages may provide as well (a kubectl or a Node.js
# from elsewhere): Debian's package only when the command is missing.
# kubectl: tests/deploy's Kubernetes test (kubectl kustomize); npm: the npm
# tools below.
if [[ $test_tools == 1 ]]; then
  if ! command -v kubectl >/dev/null; then missing+=(kubernetes-client); fi
  if ! command -v npm >/dev/null; then missing+=(npm); fi
fi

if ((${#missing[@]} > 0)); then
  echo "setup ($tier): installing ${missing[*]}"
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [[ $test_tools == 0 ]]; then
  exit 0
fi

# npm_tool NAME PACKAGE@VERSION: installs PACKAGE into $tools/NAME-VERSION
# (staged, then renamed into place) unless NAME there already runs.
tools="${SLACKSWAP_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/slackswap-tools}"
works() { [[ -x $1 ]] && "$1" --version >/dev/null 2>&1; }
npm_tool() {
  local name="$1" spec="$2"
  local dir="$tools/$name-${spec##*@}"
  local bin="$dir/node_modules/.bin/$name"
  if works "$bin"; then
    return 0
  fi
  echo "setup: installing $spec (npm) into $dir"
  mkdir -p "$tools"
  rm -rf "$dir"
  local staging
  staging="$(mktemp -d "$tools/.$name-XXXXXX")"
  if ! timeout 300 npm install --prefix "$staging" --no-audit --no-fund \
    --no-save --loglevel=error "$spec" >&2 ||
    ! works "$staging/node_modules/.bin/$name"; then
    rm -rf "$staging"
    echo "setup: npm installed no working $name ($spec)" >&2
    return 1
  fi
  mv -T "$staging" "$dir"
}

# dockerfilelint: tests/deploy/dockerfile_test.py (fails without it).
npm_tool dockerfilelint dockerfilelint@1.8.0
# buf: tests/python/buf_curl_test.py, an optional test (Skipped without buf),
# so a failed install only warns.
npm_tool buf @bufbuild/buf@1.75.0 ||
  echo "setup: warning: no buf; python_buf_curl_test will be skipped" >&2
