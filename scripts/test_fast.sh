#!/usr/bin/env bash
# The edit loop's check, and the test command's first build: GCC 12 at -O2 with warnings as errors
# into build/ (the specs in unity batches of BCL_UNITY_BATCH_SIZE, default 8), then ctest: every
# spec and property test at full counts, each header compiling alone, the simulator's command-line
# tests, the examples and the README's output, the installed-package consumer, the batch trace and
# the MPI benchmark's runs. A first build takes about 8 minutes on 2 cores; after it, a change to
# one spec rebuilds its batch and relinks (well under a minute), and a re-run with nothing changed
# is ctest alone (about 40 s).
#
#   bash scripts/test_fast.sh [ctest arguments]     # e.g. -R token to run some tests only
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

jobs=2
build=build
configure=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" -DBCL_BUILD_TORCH=OFF
           -DBCL_UNITY_TESTS=ON)
# A fresh tree gets Ninja; an existing one keeps the generator it was made with.
if [[ ! -f "$build/CMakeCache.txt" ]]; then
    configure+=(-G Ninja)
fi
cmake -S . -B "$build" "${configure[@]}" >/dev/null
cmake --build "$build" -j "$jobs"
ctest --test-dir "$build" --output-on-failure -j "$jobs" "$@"
