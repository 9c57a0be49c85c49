#pragma once
// Internal: a window's costs turned into exact unsigned integers, by integer operations alone,
// so that every comparison and sum of the global plan is the same on every compiler and flag.

#include <bcl/detail/config.hpp>

#include <bcl/cost_check.hpp>
#include <bcl/cost_estimator.hpp>
#include <bcl/detail/number_text.hpp>
#include <bcl/error.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace bcl::detail::plan {

/// The bit pattern of a double, read as an integer: for values >= 0 (and +0.0) the patterns
/// order like the values, which lets every check and every min() below run on integers.
[[nodiscard]] constexpr std::uint64_t bits_of(double x) noexcept {
    return std::bit_cast<std::uint64_t>(x);
}

inline constexpr std::uint64_t fraction_mask = (std::uint64_t{1} << 52) - 1;
inline constexpr std::uint64_t infinity_bits = 0x7ff0000000000000ULL;
using detail::cost_bits; // the one rule of a valid cost (cost_check.hpp), on the same bits
using detail::largest_cost_bits;

/// The bits of a cap, or those of +infinity (no cap) for 0. Throws bcl::error, naming `who`, for
/// a negative or NaN cap; +infinity is accepted and caps nothing.
[[nodiscard]] inline std::uint64_t cap_bits(double cap, std::string_view who) {
    const std::uint64_t bits = cost_bits(cap);
    if (bits > infinity_bits)
        throw error(std::string(who) + ": the cap " + number_text(cap) +
                    " is not a cost; it must be >= 0 (0 for none)");
    return bits == 0 ? infinity_bits : bits;
}

/// Checks every cost and returns the largest capped bit pattern (0 for an empty or all-zero
/// window). Throws bcl::error naming `who`, the index and the value of the first cost that is NaN,
/// negative, infinite or above bcl::max_estimate. Reads only; writes nothing.
[[nodiscard]] inline std::uint64_t checked_largest(std::span<const double> costs, std::uint64_t cap,
                                                   std::string_view who) {
    std::uint64_t largest = 0;
    for (std::size_t i = 0; i < costs.size(); ++i) {
        const std::uint64_t bits = cost_bits(costs[i]);
        if (bits > largest_cost_bits) [[unlikely]]
            throw_invalid_cost(
                std::string(who) + ": the cost at index " + std::to_string(i) + " is ", costs[i]);
        const std::uint64_t capped = bits < cap ? bits : cap;
        largest = capped > largest ? capped : largest;
    }
    return largest;
}

/// The fixed-point scale of a window: a cost x becomes floor(x * 2^exponent), exactly. Chosen from
/// the largest cost's binary exponent so that the largest cost lands in [2^(62-h), 2^(63-h)), h
/// being the headroom: bit_width of the window's capacity R*K*B. Then R*K*B quantized costs, and
/// as many times a pack's padded cost, add up below 2^63 whatever the costs.
struct fixed_point {
    int top = 1;           // biased exponent of the largest cost (1 for zero or subnormal)
    unsigned headroom = 1; // h
    [[nodiscard]] constexpr int exponent() const noexcept {
        // q = mantissa * 2^(e - top - h + 10) and x = mantissa * 2^(e - 1075), so
        // q = x * 2^(1085 - top - h).
        return 1085 - top - static_cast<int>(headroom);
    }

    /// floor(x * 2^exponent()) for the bits of a valid cost x no larger than the largest one.
    /// Shifting the 53-bit significand is floor of the scaled value, so the map is monotone
    /// (a <= b gives q(a) <= q(b)) and equal costs give equal integers.
    [[nodiscard]] constexpr std::uint64_t operator()(std::uint64_t bits) const noexcept {
        const auto field = static_cast<int>(bits >> 52);
        const std::uint64_t significand =
            field != 0 ? (bits & fraction_mask) | (std::uint64_t{1} << 52) : bits & fraction_mask;
        const int exponent_of = field != 0 ? field : 1;
        // A right shift by d, or a left one by -d <= 10 - h < 10: the largest cost's 53-bit
        // significand moves up to below 2^(63-h).
        const int d = (top - exponent_of) + static_cast<int>(headroom) - 10;
        if (d <= 0) return significand << static_cast<unsigned>(-d);
        if (d >= 64) return 0;
        return significand >> static_cast<unsigned>(d);
    }
};

/// The scale for a window whose largest capped cost has bit pattern `largest`, for a capacity of
/// `capacity` records (1 <= capacity < 2^53).
[[nodiscard]] constexpr fixed_point scale_for(std::uint64_t largest,
                                              std::uint64_t capacity) noexcept {
    const auto field = static_cast<int>(largest >> 52);
    return {field != 0 ? field : 1, static_cast<unsigned>(std::bit_width(capacity))};
}

/// Writes floor(min(costs[i], cap) * 2^scale.exponent()) to out[i]. The costs must have passed
/// checked_largest with the same cap.
inline void quantize(std::span<const double> costs, std::uint64_t cap, fixed_point scale,
                     std::span<std::uint64_t> out) noexcept {
    for (std::size_t i = 0; i < costs.size(); ++i) {
        const std::uint64_t bits = cost_bits(costs[i]);
        out[i] = scale(bits < cap ? bits : cap);
    }
}

} // namespace bcl::detail::plan
