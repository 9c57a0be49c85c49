#pragma once
// The one rule for a cost (or any estimate: memory, a feature) and its one message: finite,
// >= 0 and at most bcl::max_estimate, checked on the double's bits so that no floating-point flag
// (-ffinite-math-only, -ffast-math) can drop the NaN test. Every check of a cost in bcl, its
// tools and its adapters goes through here.

#include <bcl/detail/config.hpp>

#include <bcl/cost_estimator.hpp>
#include <bcl/detail/number_text.hpp>
#include <bcl/error.hpp>

#include <bit>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace bcl {

namespace detail {

/// The bit pattern of a cost with -0.0 read as +0.0 (it passes `cost >= 0`, and its pattern has
/// the sign bit set). For values >= 0 the patterns order like the values, so a valid cost has
/// bits <= largest_cost_bits, and NaNs, infinities, negative values and values above
/// bcl::max_estimate all have more.
[[nodiscard]] constexpr std::uint64_t cost_bits(double x) noexcept {
    const auto bits = std::bit_cast<std::uint64_t>(x);
    return bits == std::uint64_t{1} << 63 ? 0 : bits;
}

inline constexpr std::uint64_t largest_cost_bits = std::bit_cast<std::uint64_t>(max_estimate);

} // namespace detail

/// Whether `x` is a cost (or estimate) bcl accepts: finite, >= 0 and at most bcl::max_estimate.
[[nodiscard]] constexpr bool valid_cost(double x) noexcept {
    return detail::cost_bits(x) <= detail::largest_cost_bits;
}

/// Throws bcl::error "<subject><value>; it must be >= 0 and at most bcl::max_estimate (1e+120)",
/// `subject` saying what the value is and where ("costs[7] is ", "bcl::balancer: record 3 has
/// cost estimate ").
[[noreturn]] inline void throw_invalid_cost(std::string_view subject, double value) {
    throw error(std::string(subject) + detail::number_text(value) +
                "; it must be >= 0 and at most bcl::max_estimate (" +
                detail::number_text(max_estimate) + ")");
}

/// Throws what throw_invalid_cost throws unless valid_cost(value); `subject()` (a callable giving
/// the subject text) is called only then, so the check costs one comparison.
template <class Subject>
void check_cost(double value, Subject&& subject) {
    if (valid_cost(value)) [[likely]]
        return;
    throw_invalid_cost(std::forward<Subject>(subject)(), value);
}

} // namespace bcl
