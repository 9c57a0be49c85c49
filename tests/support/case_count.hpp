#pragma once
// How many random cases a property test draws. The release build runs every one; the sanitizer
// build (which runs each case ten to fifty times slower) runs a share, set by one knob:
// BCL_SANITIZED_CASE_DIVISOR (tests/CMakeLists.txt defines it when BCL_SANITIZE is on). Only the
// count of random draws shrinks: every kind of case (every distribution, shape and edge) is kept,
// so the sanitizers still see each code path.

#include <cstddef>

namespace bcl_test {

#ifdef BCL_SANITIZED_CASE_DIVISOR
inline constexpr std::size_t case_divisor = BCL_SANITIZED_CASE_DIVISOR;
#else
inline constexpr std::size_t case_divisor = 1;
#endif
static_assert(case_divisor >= 1, "BCL_SANITIZED_CASE_DIVISOR must be at least 1");

/// `full` random cases, or under the sanitizers full / BCL_SANITIZED_CASE_DIVISOR (at least one).
constexpr std::size_t random_cases(std::size_t full) noexcept {
    const std::size_t share = full / case_divisor;
    return share == 0 ? 1 : share;
}

} // namespace bcl_test
