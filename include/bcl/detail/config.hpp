#pragma once
// The compilers bcl needs, checked first so that a wrong setting reads as one clear message
// rather than pages of errors about concepts.

// MSVC reports __cplusplus as 199711L unless /Zc:__cplusplus is given; _MSVC_LANG is reliable.
#if defined(_MSVC_LANG) && _MSVC_LANG > __cplusplus
#define BCL_CPLUSPLUS _MSVC_LANG
#else
#define BCL_CPLUSPLUS __cplusplus
#endif

#if BCL_CPLUSPLUS < 202002L
#error                                                                                             \
    "bcl needs C++20: compile with -std=c++20 (or /std:c++20), or, in CMake, link bcl::bcl, which asks for cxx_std_20"
#endif

// Clang 14 and 15 cannot compile libstdc++ 12's <ranges>, which bcl::balance builds on.
#if defined(__clang__) && !defined(__apple_build_version__) && __clang_major__ < 16
#error                                                                                             \
    "bcl needs Clang 16 or later (or GCC 12 or later): older Clang cannot compile the standard library's <ranges>"
#endif
