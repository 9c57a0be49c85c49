#!/usr/bin/env bash
# The unit tests, the per-header compile checks and the examples, built and run with a second
# compiler, clang++-16 (benchmarks off: Debian's Google Benchmark is built for libstdc++):
#   1. against libstdc++ (GCC's standard library, as the main build) into build-clang/;
#   2. against LLVM's libc++ (-stdlib=libc++) into build-libcxx/, if libc++ is installed, with fmt
#      header-only (BCL_FMT_HEADER_ONLY: Debian's libfmt is compiled against libstdc++).
#
#   bash scripts/test_clang.sh
#
# Environment: BCL_CLANG_CXX (default clang++-16); BCL_CLANG_CXXFLAGS, extra compile flags for
# both trees (e.g. -Wno-error=sign-conversion to get past a warning only Clang gives).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

cxx="${BCL_CLANG_CXX:-clang++-16}"
extra_flags="${BCL_CLANG_CXXFLAGS:-}"
jobs=2
common=(-DCMAKE_BUILD_TYPE=Release -DBCL_BUILD_TESTS=ON -DBCL_BUILD_EXAMPLES=ON
        -DBCL_BUILD_BENCHMARKS=OFF -DBCL_BUILD_TORCH=OFF)

# A fresh tree gets Ninja and the compiler; an existing one keeps what it was configured with.
fresh_tree_args() {
    if [[ ! -f "$1/CMakeCache.txt" ]]; then
        echo "-G Ninja -DCMAKE_CXX_COMPILER=$cxx"
    fi
}

echo "== $cxx with libstdc++ (build-clang/)"
# shellcheck disable=SC2046
cmake -S . -B build-clang $(fresh_tree_args build-clang) "${common[@]}" "-DCMAKE_CXX_FLAGS=$extra_flags"
cmake --build build-clang -j "$jobs"
ctest --test-dir build-clang --output-on-failure -j "$jobs"

echo "== $cxx with libc++ (build-libcxx/)"
probe_dir="$(mktemp -d)"
trap 'rm -rf "$probe_dir"' EXIT
printf '#include <string>\n#include <vector>\nint main() { std::vector<std::string> v{"ok"}; return v[0].size() == 2 ? 0 : 1; }\n' \
    >"$probe_dir/probe.cpp"
if ! "$cxx" -std=c++20 -stdlib=libc++ "$probe_dir/probe.cpp" -o "$probe_dir/probe" ||
    ! "$probe_dir/probe"; then
    echo "== libc++ is not usable with $cxx (install libc++-16-dev and libc++abi-16-dev): skipped"
    echo "== clang checks passed (libstdc++ only)"
    exit 0
fi

# Debian's libfmt is compiled against libstdc++: under libc++ fmt is used header-only.
libcxx_args=("-DCMAKE_CXX_FLAGS=-stdlib=libc++ $extra_flags" "-DCMAKE_EXE_LINKER_FLAGS=-stdlib=libc++"
             -DBCL_FMT_HEADER_ONLY=ON)
# shellcheck disable=SC2046
cmake -S . -B build-libcxx $(fresh_tree_args build-libcxx) "${common[@]}" "${libcxx_args[@]}"
cmake --build build-libcxx -j "$jobs"
ctest --test-dir build-libcxx --output-on-failure -j "$jobs"

echo "== clang checks passed (libstdc++ and libc++)"
