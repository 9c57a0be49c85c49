#!/usr/bin/env bash
# The whole test suite: the style checks, a Release build with every test, an ASan + UBSan build
# with every test, the unit tests again with a second compiler (clang-16, libstdc++ and libc++),
# the global plan's digest under several compilers and floating-point settings, the libtorch
# adapter (its own tree, build-torch/), the Python package (a virtual environment over Debian's
# torch), and the fuzz targets for three minutes in all under ASan + UBSan. Installs what is
# missing (Debian). Each section's header says when it started, to keep the whole in budget.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh --all

jobs=2
section() { echo "== $1 (at $((SECONDS / 60)) min $((SECONDS % 60)) s)"; }
fuzz_seconds="${BCL_FUZZ_SECONDS:-180}"

# Use Ninja for fresh build trees; keep whatever generator an existing tree has.
generator_args() {
    if [[ -f "$1/CMakeCache.txt" ]]; then
        return
    fi
    echo "-G Ninja"
}

section "style (clang-format, clang-tidy)"
bash scripts/check_style.sh

section "Release build (build/)"
# shellcheck disable=SC2046
cmake -S . -B build $(generator_args build) -DCMAKE_BUILD_TYPE=Release -DBCL_BUILD_TORCH=OFF
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"

section "token-budget micro-batches: bcl-sim's targets against the peers (docs/tokens.md)"
python3 bench/sim/token_table.py --sim build/bin/bcl-sim --steps 300

section "ASan + UBSan build (build-asan/)"
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

section "second compiler"
bash scripts/test_clang.sh

section "the global plan is the same under every compiler and floating-point setting"
bash scripts/test_plan_digest.sh

section "docs/design.md's worked example (a new cap kind) applies and works"
bash scripts/check_worked_example.sh

section "libtorch adapter"
bash scripts/test_torch.sh

section "Python package"
bash scripts/test_python.sh

section "fuzzing, ${fuzz_seconds} s over all targets"
bash scripts/fuzz.sh "$fuzz_seconds"

echo "== all checks passed in $((SECONDS / 60)) min $((SECONDS % 60)) s"
