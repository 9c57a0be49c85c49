#!/usr/bin/env bash
# The global plan is bit-identical everywhere: builds tests/plan_digest/plan_digest_main.cpp (over
# ten thousand windows planned by bcl::global_planner, one digest over every plan and summary)
# with each compiler, standard library and floating-point setting below, runs each, and fails
# unless every build prints the same digest. Needs g++ and clang++-16 (clang++-16 -stdlib=libc++
# too, when libc++ is installed); no CMake. About a minute on two cores.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

source_file=tests/plan_digest/plan_digest_main.cpp
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# "compiler|flags" per build.
builds=(
    "g++|-O0"
    "g++|-O3 -march=native -ffp-contract=fast"
    "g++|-O2 -ffast-math"
    "clang++-16|-O0"
    "clang++-16|-O3 -march=native -ffp-contract=fast"
)
# libc++, where it is installed (Debian: libc++-16-dev, libc++abi-16-dev).
if echo 'int main() {}' | clang++-16 -std=c++20 -stdlib=libc++ -x c++ - -o "$work/libcxx" \
    2>/dev/null; then
    builds+=("clang++-16|-stdlib=libc++ -O2")
else
    echo "== clang++-16 -stdlib=libc++ skipped: libc++ is not installed"
fi

# Two builds at a time (two cores), then run them in order.
pids=()
for i in "${!builds[@]}"; do
    IFS='|' read -r compiler flags <<<"${builds[$i]}"
    # shellcheck disable=SC2086
    "$compiler" -std=c++20 -Iinclude $flags "$source_file" -o "$work/plan_digest_$i" \
        2>"$work/build_$i.log" &
    pids+=($!)
    if (( ${#pids[@]} == 2 )); then
        wait "${pids[0]}" "${pids[1]}" || { cat "$work"/build_*.log; exit 1; }
        pids=()
    fi
done
for pid in "${pids[@]}"; do wait "$pid" || { cat "$work"/build_*.log; exit 1; }; done

first=""
status=0
for i in "${!builds[@]}"; do
    line="$("$work/plan_digest_$i")"
    printf '%-50s %s\n' "${builds[$i]/|/ }" "$line"
    if [[ -z "$first" ]]; then
        first="$line"
    elif [[ "$line" != "$first" ]]; then
        status=1
    fi
done
if (( status != 0 )); then
    echo "== FAILED: the builds disagree on the global plan"
    exit 1
fi
echo "== every build planned the same windows the same way"
