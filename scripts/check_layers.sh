#!/usr/bin/env bash
# Fails when an #include runs against the dependency order of the tree:
#
#   common -> proto -> model -> sim -> planner -> io -> core -> server, cli
#
# A library file may include its own folder and the folders before it, never
# one after it; server/ and cli/ never include each other. model/, sim/ and
# planner/ are plain C++: no generated protobuf (slackswap/v1/...), protobuf
# or gRPC headers. planner/internal/ is private to planner/. Tests
# (*_test.cc), testing/, bench/, tests/ and tools/ sit on top and are not
# checked.
#
#   bash scripts/check_layers.sh          # the tree this script is in
#   bash scripts/check_layers.sh DIR      # another checkout
set -euo pipefail

root="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
cd "$root"

order=(common proto model sim planner io core server cli)
rank() {
  local i
  for i in "${!order[@]}"; do
    [[ ${order[$i]} == "$1" ]] && { echo "$i"; return; }
  done
  echo -1
}

violations=0
report() {
  echo "$1:$2: includes \"$3\": $4" >&2
  violations=$((violations + 1))
}

for dir in "${order[@]}"; do
  [[ -d $dir ]] || continue
  mine=$(rank "$dir")
  while IFS= read -r file; do
    [[ $file == *_test.cc ]] && continue
    while IFS=: read -r line inc; do
      target="${inc%%/*}"
      case "$target" in
        slackswap) target=proto ;;  # generated from proto/slackswap/v1
        grpc | grpcpp | google)
          if [[ $dir == model || $dir == sim || $dir == planner ]]; then
            report "$file" "$line" "$inc" "$dir/ is plain C++ (no protobuf or gRPC)"
          fi
          continue
          ;;
      esac
      if [[ $target == proto && ($dir == model || $dir == sim || $dir == planner) ]]; then
        report "$file" "$line" "$inc" "$dir/ is plain C++ (no generated messages)"
        continue
      fi
      theirs=$(rank "$target")
      ((theirs < 0)) && continue  # absl/, prometheus/, system headers
      if [[ $inc == planner/internal/* && $dir != planner ]]; then
        report "$file" "$line" "$inc" "planner/internal/ is private to planner/"
      elif ((theirs > mine)) || [[ $dir == cli && $target == server ]]; then
        report "$file" "$line" "$inc" "$dir/ comes before $target/ in ${order[*]}"
      fi
    done < <(grep -n '^#include "' "$file" | sed 's/^\([0-9]*\):#include "\([^"]*\)".*/\1:\2/')
  done < <(find "$dir" -name '*.h' -o -name '*.cc' | sort)
done

if ((violations > 0)); then
  echo "check_layers: $violations include(s) against the layer order" >&2
  exit 1
fi
echo "check_layers: every include follows ${order[*]}"
