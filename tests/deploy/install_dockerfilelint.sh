#!/usr/bin/env bash
# Installs dockerfilelint (npm package, pinned) for tests/deploy's Dockerfile
# lint test, into
#   ${SLACKSWAP_TOOLS_DIR:-${XDG_CACHE_HOME:-~/.cache}/slackswap-tools}/dockerfilelint-VERSION
# where dockerfile_test.py looks for it. Idempotent: returns at once when it
# is already there. Needs Node.js and npm (on every machine of this project)
# and the npm registry. .ci/run calls it before the tests.
#
#   bash tests/deploy/install_dockerfilelint.sh
set -euo pipefail

version=1.8.0
tools="${SLACKSWAP_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/slackswap-tools}"
dir="$tools/dockerfilelint-$version"
bin="$dir/node_modules/.bin/dockerfilelint"

works() { [[ -x $1 ]] && "$1" --version >/dev/null 2>&1; }

if works "$bin"; then
  exit 0
fi
if ! command -v npm >/dev/null; then
  echo "install_dockerfilelint.sh: npm not found (Debian: apt-get install npm)" >&2
  exit 1
fi
mkdir -p "$tools"
rm -rf "$dir"
staging="$(mktemp -d "$tools/.dockerfilelint-XXXXXX")"
trap 'rm -rf "$staging"' EXIT
timeout 300 npm install --prefix "$staging" --no-audit --no-fund --no-save \
  --loglevel=error "dockerfilelint@$version" >&2
if ! works "$staging/node_modules/.bin/dockerfilelint"; then
  echo "install_dockerfilelint.sh: npm installed no working dockerfilelint" >&2
  exit 1
fi
mv -T "$staging" "$dir"
trap - EXIT
echo "install_dockerfilelint.sh: dockerfilelint $version in $dir" >&2
