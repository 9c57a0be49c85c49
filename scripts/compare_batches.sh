#!/usr/bin/env bash
# Proves a change left the balancer's behaviour unchanged: builds tests/behaviour/batch_trace.cpp
# (this tree's copy) against the headers of a base revision and against this tree's, runs both
# over its grid of configurations, and requires identical output.
#   bash scripts/compare_batches.sh [base-revision]   (default: HEAD, i.e. the last commit)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
base=${1:-HEAD}
cxx=${CXX:-g++}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git -C "$root" archive "$base" include | tar -x -C "$work"
for side in base this; do
    inc="$root/include"
    [ "$side" = base ] && inc="$work/include"
    "$cxx" -std=c++20 -O2 -I"$inc" "$root/tests/behaviour/batch_trace.cpp" -o "$work/trace-$side"
    "$work/trace-$side" > "$work/$side.txt"
done
if cmp -s "$work/base.txt" "$work/this.txt"; then
    echo "identical batches on $(wc -l < "$work/this.txt") configurations ($base vs this tree)"
else
    diff "$work/base.txt" "$work/this.txt" | head -20
    echo "batches differ from $base" >&2
    exit 1
fi
