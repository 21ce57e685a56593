#!/usr/bin/env bash
# Installs what slackswapd and slackswap need to run. Two jobs, each also a
# step of the container image (Dockerfile) and of CI (tests/deploy):
#
#   bash scripts/install.sh [--strip] PREFIX
#       Copies the built binaries, $BUILD_DIR/server/slackswapd and
#       $BUILD_DIR/cli/slackswap (BUILD_DIR defaults to build/; build them
#       first, e.g. `bash scripts/build.sh --target slackswapd slackswap`),
#       into PREFIX/bin, and docs/operations.md into
#       PREFIX/share/doc/slackswap/. --strip drops their debug information
#       (what the container image does).
#
#   bash scripts/install.sh --runtime-packages [--check]
#       Installs, with apt-get, the Debian packages the binaries link
#       against, listed in runtime-packages.txt beside this script (the
#       runtime image's only packages). Idempotent: quiet and fast when they
#       are all installed. --check installs nothing and exits 1, naming them,
#       when some are missing. Only this file and runtime-packages.txt are
#       needed, so the image's runtime stage can run it on its own.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

usage() {
  sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

runtime_packages() {
  local check=$1 list="$here/runtime-packages.txt"
  if [[ ! -f $list ]]; then
    echo "install.sh: $list not found" >&2
    exit 1
  fi
  local packages=() missing=() line p
  # One package a line; '#' starts a comment.
  while IFS= read -r line || [[ -n $line ]]; do
    line="${line%%#*}"
    for p in $line; do packages+=("$p"); done
  done <"$list"
  if ((${#packages[@]} == 0)); then
    echo "install.sh: $list lists no package" >&2
    exit 1
  fi
  for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
      grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if ((${#missing[@]} == 0)); then
    return 0
  fi
  if [[ $check == 1 ]]; then
    echo "install.sh: runtime packages not installed: ${missing[*]}" >&2
    exit 1
  fi
  echo "install.sh: installing ${missing[*]}" >&2
  local sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
}

binaries() {
  local strip=$1 prefix=$2
  local root
  root="$(cd "$here/.." && pwd)"
  local build_dir="${BUILD_DIR:-build}"
  [[ $build_dir == /* ]] || build_dir="$root/$build_dir"
  local bins=("$build_dir/server/slackswapd" "$build_dir/cli/slackswap")
  local b
  for b in "${bins[@]}"; do
    if [[ ! -x $b ]]; then
      echo "install.sh: $b is not built (bash scripts/build.sh --target" \
        "slackswapd slackswap)" >&2
      exit 1
    fi
  done
  local flags=(-m 0755)
  [[ $strip == 1 ]] && flags+=(-s)
  install -d "$prefix/bin" "$prefix/share/doc/slackswap"
  for b in "${bins[@]}"; do
    install "${flags[@]}" "$b" "$prefix/bin/$(basename "$b")"
  done
  if [[ -f $root/docs/operations.md ]]; then
    install -m 0644 "$root/docs/operations.md" \
      "$prefix/share/doc/slackswap/operations.md"
  fi
  echo "install.sh: installed slackswapd and slackswap into $prefix/bin" >&2
}

mode=binaries strip=0 check=0 prefix=""
while (($#)); do
  case $1 in
    --runtime-packages) mode=runtime ;;
    --check) check=1 ;;
    --strip) strip=1 ;;
    -h | --help) usage ;;
    -*) echo "install.sh: unknown option $1" >&2; usage ;;
    *)
      [[ -z $prefix ]] || usage
      prefix=$1
      ;;
  esac
  shift
done

if [[ $mode == runtime ]]; then
  [[ -z $prefix && $strip == 0 ]] || usage
  runtime_packages "$check"
else
  [[ -n $prefix && $check == 0 ]] || usage
  binaries "$strip" "$prefix"
fi
