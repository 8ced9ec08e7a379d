#!/usr/bin/env bash
# Time and CPU of import/check/convert on long unary chains (bench/make_chain_model.py), to see how
# the pipeline scales with the node count. CPU (user + sys) is the figure to compare: on a shared
# machine the wall time mostly measures the other processes.
# Usage: bench/chain_time.sh [BUILD_DIR] [NODES...]   (defaults: build, 10000 100000)
set -euo pipefail
build=${1:-build}
shift || true
sizes=("${@:-10000 100000}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
here=$(dirname "$0")
for n in ${sizes[@]}; do
  model="$work/chain$n.onnx"
  python3 "$here/make_chain_model.py" "$model" "$n"
  for cmd in "kiln inspect $model" "kiln check $model --target ms" \
             "kiln convert $model --to ms -o $work/out.ms" \
             "atc --model=$model --framework=5 --output=$work/out --soc_version=Ascend310P3"; do
    set -- $cmd
    /usr/bin/time -f "%e %U %S %M" -o "$work/time" "$build/tools/$1" "${@:2}" >/dev/null 2>&1
    read -r wall user sys rss <"$work/time"
    printf '%7s nodes  cpu %6.2f s  wall %6.2f s  peak %4d MiB  %s %s\n' "$n" \
      "$(echo "$user + $sys" | bc)" "$wall" $((rss / 1024)) "$1" "$2"
  done
done
