#!/usr/bin/env bash
# Full check: Release build + all tests, then an ASan/UBSan build + tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh

jobs=2

# Use Ninja for fresh build trees; keep whatever generator an existing tree has.
generator_args() {
    if [[ -f "$1/CMakeCache.txt" ]]; then
        return
    fi
    echo "-G Ninja"
}

echo "== Release build (build/)"
# shellcheck disable=SC2046
cmake -S . -B build $(generator_args build) -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"

echo "== ASan + UBSan build (build-asan/)"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:strict_init_order=1:check_initialization_order=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# shellcheck disable=SC2046
cmake -S . -B build-asan $(generator_args build-asan) \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
    -DBCL_SANITIZE=ON \
    -DBCL_BUILD_BENCHMARKS=OFF
cmake --build build-asan -j "$jobs"
ctest --test-dir build-asan --output-on-failure -j "$jobs" -E '^installed_package_consumer$'

echo "== all checks passed"
