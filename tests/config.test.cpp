// bcl/detail/config.hpp, as a specification: every bcl header includes it first, so a compiler
// bcl cannot work with stops at one sentence naming the fix (C++20; Clang 16 or later) instead of
// pages of errors about concepts. BCL_CPLUSPLUS is the language version in force, read from
// _MSVC_LANG where MSVC understates __cplusplus. A translation unit that compiles at all
// therefore has a C++20 (or later) BCL_CPLUSPLUS and, under Clang, Clang 16 or later. (That the
// checks refuse C++17 and Clang 15 is a compile failure, which no test in a binary can run.)

#include <bcl/detail/config.hpp>

#include <catch2/catch.hpp>

TEST_CASE("config: BCL_CPLUSPLUS is the language version in force, at least C++20", "[config]") {
    STATIC_REQUIRE(BCL_CPLUSPLUS >= 202002L);
#if defined(_MSVC_LANG)
    STATIC_REQUIRE(BCL_CPLUSPLUS == (_MSVC_LANG > __cplusplus ? _MSVC_LANG : __cplusplus));
#else
    // Every compiler but MSVC reports the version in __cplusplus itself.
    STATIC_REQUIRE(BCL_CPLUSPLUS == __cplusplus);
#endif
}

TEST_CASE("config: a compiler that gets past the header can compile bcl", "[config]") {
#if defined(__clang__) && !defined(__apple_build_version__)
    STATIC_REQUIRE(__clang_major__ >= 16);
#endif
    // The features the checks stand for: concepts and <ranges> are there.
    STATIC_REQUIRE(__cpp_concepts >= 201907L);
    SUCCEED("C++20 and a supported compiler");
}
