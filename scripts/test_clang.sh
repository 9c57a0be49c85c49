#!/usr/bin/env bash
# The unit tests, the per-header compile checks and the examples, built and run with a second
# compiler, clang++-16 (benchmarks off: Debian's Google Benchmark is built for libstdc++):
#   1. against libstdc++ (GCC's standard library, as the main build) into build-clang/;
#   2. against LLVM's libc++ (-stdlib=libc++) into build-libcxx/, if libc++ is installed. Debian's
#      libfmt is compiled against libstdc++, so there fmt is used header-only: through the
#      BCL_FMT_HEADER_ONLY option when the project has it, else through a CMake package that
#      stands in for fmt and makes fmt::fmt the header-only target (written into build-libcxx/).
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
        -DBCL_BUILD_BENCHMARKS=OFF)

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

libcxx_args=("-DCMAKE_CXX_FLAGS=-stdlib=libc++ $extra_flags" "-DCMAKE_EXE_LINKER_FLAGS=-stdlib=libc++")
if grep -q 'BCL_FMT_HEADER_ONLY' CMakeLists.txt; then
    libcxx_args+=(-DBCL_FMT_HEADER_ONLY=ON)
else
    # Stand-in fmt package: fmt::fmt and fmt::fmt-header-only both the header-only library,
    # found instead of the real package through fmt_DIR.
    fmt_include="$(dirname "$(dirname "$(find /usr/include /usr/local/include -maxdepth 2 \
        -path '*/fmt/core.h' -print -quit)")")"
    fmt_version="$(sed -n 's/^#define FMT_VERSION \([0-9]*\).*/\1/p' "$fmt_include/fmt/core.h")"
    shim="$PWD/build-libcxx/fmt-header-only"
    mkdir -p "$shim"
    cat >"$shim/fmt-config.cmake" <<EOF
# Written by scripts/test_clang.sh: fmt as a header-only library, for a libc++ build.
if(NOT TARGET fmt::fmt-header-only)
    add_library(fmt::fmt-header-only INTERFACE IMPORTED)
    set_target_properties(fmt::fmt-header-only PROPERTIES
        INTERFACE_COMPILE_DEFINITIONS "FMT_HEADER_ONLY=1"
        INTERFACE_INCLUDE_DIRECTORIES "$fmt_include")
endif()
if(NOT TARGET fmt::fmt)
    add_library(fmt::fmt INTERFACE IMPORTED)
    set_target_properties(fmt::fmt PROPERTIES INTERFACE_LINK_LIBRARIES fmt::fmt-header-only)
endif()
EOF
    cat >"$shim/fmt-config-version.cmake" <<EOF
set(PACKAGE_VERSION "$((fmt_version / 10000)).$((fmt_version / 100 % 100)).$((fmt_version % 100))")
set(PACKAGE_VERSION_COMPATIBLE TRUE)
if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
endif()
EOF
    libcxx_args+=("-Dfmt_DIR=$shim")
fi
# shellcheck disable=SC2046
cmake -S . -B build-libcxx $(fresh_tree_args build-libcxx) "${common[@]}" "${libcxx_args[@]}"
cmake --build build-libcxx -j "$jobs"
ctest --test-dir build-libcxx --output-on-failure -j "$jobs"

echo "== clang checks passed (libstdc++ and libc++)"
