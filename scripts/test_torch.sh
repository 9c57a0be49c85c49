#!/usr/bin/env bash
# The libtorch adapter's checks: builds bcl-torch-tests (torch in a precompiled header) and
# bcl-torch-train (Release, -O2) into build-torch/, runs the sampler's tests, checks that
# docs/torch.md shows the snippet the tests compile, and runs a short smoke of the trainer (2 MPI
# ranks, a few steps of every policy at a tiny length scale, its JSON checked for every field). A
# few minutes on 2 cores.
# Without libtorch (Debian: libtorch-dev) it says so and exits 0.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build=build-torch
generator=()
if [[ ! -f "$build/CMakeCache.txt" ]] && command -v ninja >/dev/null 2>&1; then
    generator=(-G Ninja)
fi

echo "== configure ($build/)"
configure_log="$(cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" -DBCL_BUILD_BENCHMARKS=ON -DBCL_BUILD_TORCH=ON 2>&1)" ||
    { echo "$configure_log"; exit 1; }
if ! grep -q "bcl: torch parts built" <<<"$configure_log"; then
    grep "bcl: torch parts" <<<"$configure_log" || true
    echo "== libtorch is not installed (Debian: libtorch-dev): the torch checks are skipped"
    exit 0
fi
grep "bcl: torch parts" <<<"$configure_log"

targets=(bcl-torch-tests)
if grep -q "skipping bcl-torch-train" <<<"$configure_log"; then
    grep "skipping bcl-torch-train" <<<"$configure_log"
else
    targets+=(bcl-torch-train)
fi
echo "== build ${targets[*]}"
cmake --build "$build" -j 2 --target "${targets[@]}"

echo "== sampler tests"
"$build/bin/bcl-torch-tests"

echo "== docs/torch.md snippet, trainer smoke run (2 MPI ranks)"
ctest --test-dir "$build" --output-on-failure -R '^torch_(doc_snippet|train_smoke)$'

echo "== torch checks passed"
