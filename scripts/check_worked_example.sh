#!/usr/bin/env bash
# Keeps docs/design.md's worked example true: applies the diff it shows (a new cap kind) to a
# copy of include/, builds tests/behaviour/new_cap_kind.cpp against it and runs it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$root/include" "$work/include"
# The diff is the document's only ```diff block.
awk '/^```diff$/ {on = 1; next} /^```$/ {on = 0} on' "$root/docs/design.md" > "$work/example.diff"
(cd "$work" && patch -p0 --quiet < example.diff)
"${CXX:-g++}" -std=c++20 -O1 -I"$work/include" "$root/tests/behaviour/new_cap_kind.cpp" \
    -o "$work/new_cap_kind"
"$work/new_cap_kind"
