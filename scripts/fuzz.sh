#!/usr/bin/env bash
# Builds bcl's libFuzzer targets with clang++-16 into build-fuzz/ and runs them one after the
# other for SECONDS in all (default 180), split evenly (at least 1 s each), each on a scratch copy
# of its seed corpus (fuzz/corpus/<target>/), so the repository is never modified. Exits non-zero
# on any finding and prints the reproducer's path.
#
#   bash scripts/fuzz.sh [SECONDS]
#
# Environment: BCL_FUZZ_CXX (default clang++-16), BCL_FUZZ_WORK (scratch directory, default a
# new /tmp/bcl-fuzz.XXXXXX, kept afterwards: it holds the logs, the grown corpus and any
# reproducers). See fuzz/README.md for longer campaigns.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds="${1:-180}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -eq 0 ]]; then
    echo "usage: $0 [SECONDS]   (a positive number of seconds, for all targets together)" >&2
    exit 2
fi
cxx="${BCL_FUZZ_CXX:-clang++-16}"
build="build-fuzz"
targets=(balancer state calibration epoch_rest token_rest stage_plan stage_balancer)
per_target=$((seconds / ${#targets[@]}))
if [[ $per_target -eq 0 ]]; then
    per_target=1
fi

# -O2 with line tables: a finding's stack trace needs file and line, not full debug information.
configure_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -gline-tables-only"
                -DBCL_BUILD_TESTS=OFF -DBCL_BUILD_BENCHMARKS=OFF
                -DBCL_BUILD_EXAMPLES=OFF -DBCL_BUILD_FUZZERS=ON)
if [[ ! -f "$build/CMakeCache.txt" ]]; then
    configure_args+=(-G Ninja "-DCMAKE_CXX_COMPILER=$cxx")
fi
echo "== configuring and building $build/ with $cxx"
cmake -S . -B "$build" "${configure_args[@]}" >/dev/null
# The seed corpus generator too, so that it keeps building.
cmake --build "$build" -j 2 --target "${targets[@]/#/bcl-fuzz-}" bcl-fuzz-make-corpus

work="${BCL_FUZZ_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/bcl-fuzz.XXXXXX")}"
mkdir -p "$work"
# Stack traces with function names and lines, when a symbolizer is installed.
if [[ -z "${ASAN_SYMBOLIZER_PATH:-}" ]] && command -v llvm-symbolizer >/dev/null; then
    ASAN_SYMBOLIZER_PATH="$(command -v llvm-symbolizer)"
    export ASAN_SYMBOLIZER_PATH
fi

status=0
for target in "${targets[@]}"; do
    dir="$work/$target"
    mkdir -p "$dir/corpus" "$dir/artifacts"
    cp fuzz/corpus/"$target"/* "$dir/corpus/"
    echo "== bcl-fuzz-$target: ${per_target}s (log: $dir/log)"
    set +e
    "$build/bin/bcl-fuzz-$target" "$dir/corpus" \
        -max_total_time="$per_target" -timeout=30 -report_slow_units=30 \
        -rss_limit_mb=2048 -malloc_limit_mb=2048 \
        -artifact_prefix="$dir/artifacts/" -print_final_stats=1 >"$dir/log" 2>&1
    code=$?
    set -e
    grep -E '^Done [0-9]+ runs|^stat::number_of_executed_units|^stat::new_units_added' "$dir/log" || true
    shopt -s nullglob
    found=("$dir"/artifacts/*)
    shopt -u nullglob
    if [[ $code -ne 0 || ${#found[@]} -gt 0 ]]; then
        status=1
        echo "!! bcl-fuzz-$target: FINDING (exit code $code)"
        grep -E 'PROPERTY VIOLATED|^SUMMARY|ERROR: (AddressSanitizer|libFuzzer|UndefinedBehaviorSanitizer)|runtime error' \
            "$dir/log" | head -n 5 || true
        for artifact in "${found[@]}"; do
            echo "   reproducer: $artifact"
            echo "   reproduce:  $build/bin/bcl-fuzz-$target $artifact"
        done
    fi
done

if [[ $status -eq 0 ]]; then
    echo "== no findings (scratch directory: $work)"
else
    echo "== FINDINGS: see above (scratch directory: $work)"
fi
exit $status
