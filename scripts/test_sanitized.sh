#!/usr/bin/env bash
# The test command's second build: clang++-16 against LLVM's libc++, under ASan + UBSan, warnings
# as errors (clang's own: -Wsign-conversion and the rest), into build-asan/. It builds and runs
# every spec of bcl-tests (in unity batches, as build/) and compiles each public header alone
# against libc++. The random property tests run a share of their cases here
# (BCL_SANITIZED_CASE_DIVISOR, default 4: every kind of case, fewer seeds); build/ runs them all.
# The benchmarks, the simulator and the examples are left to build/ (Debian's Google Benchmark
# and libfmt are built for libstdc++; fmt is used header-only here).
#
#   bash scripts/test_sanitized.sh
#
# Environment: BCL_CLANG_CXX (default clang++-16); BCL_CLANG_CXXFLAGS, extra compile flags.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

cxx="${BCL_CLANG_CXX:-clang++-16}"
extra_flags="${BCL_CLANG_CXXFLAGS:-}"
jobs=2
build=build-asan

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:strict_init_order=1:check_initialization_order=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# Unoptimized, with line tables: the sanitizers check as well at -O0 (a heavy spec compiles in a
# third of the time it takes at -O1, and the tests run about as much slower, which is cheaper), and
# line tables are all a report needs (file and line; full debug information doubles the compile).
# Assertions stay on (no NDEBUG).
configure=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O0 -gline-tables-only"
           "-DCMAKE_CXX_FLAGS=-stdlib=libc++ $extra_flags" "-DCMAKE_EXE_LINKER_FLAGS=-stdlib=libc++"
           -DBCL_FMT_HEADER_ONLY=ON -DBCL_SANITIZE=ON -DBCL_UNITY_TESTS=ON
           -DBCL_BUILD_TESTS=ON -DBCL_BUILD_BENCHMARKS=OFF -DBCL_BUILD_EXAMPLES=OFF
           -DBCL_BUILD_TORCH=OFF)
# A fresh tree gets Ninja and the compiler; an existing one keeps what it was configured with.
if [[ ! -f "$build/CMakeCache.txt" ]]; then
    configure+=(-G Ninja "-DCMAKE_CXX_COMPILER=$cxx")
fi
cmake -S . -B "$build" "${configure[@]}" >/dev/null
cmake --build "$build" -j "$jobs"
ctest --test-dir "$build" --output-on-failure -j "$jobs"
