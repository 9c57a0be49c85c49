#pragma once
// Internal: a token plan's records as integers: each record's tokens for packing (a record above
// the budget, where allowed, counted as filling a micro-batch) and its cost in fixed point, the
// default cost computed in integers so that it is the same on every compiler and flag.

#include <bcl/detail/config.hpp>

#include <bcl/cost_check.hpp>
#include <bcl/detail/plan/quantize.hpp>
#include <bcl/error.hpp>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bcl::detail::tokens {

/// The default cost of a record of L tokens, L + L^2 / 24576, in units of 1/24576: L * 24576 +
/// L^2, exact in 64 bits for L up to 2^31.
[[nodiscard]] constexpr std::uint64_t default_cost_units(std::uint64_t tokens) noexcept {
    return tokens * 24576 + tokens * tokens;
}

/// The most tokens a record, and a micro-batch's budget, may hold: 2^31 keeps every default cost
/// and every sum of tokens of a plan exact in 64 bits.
inline constexpr std::uint64_t max_record_tokens = std::uint64_t{1} << 31;

/// A record's length as a plan counts it: `tokens` rounded up to a multiple of `multiple` (a
/// context-parallel trainer pads each sequence so), or as it is above 2^31 (refused anyway).
[[nodiscard]] constexpr std::uint64_t padded_length(std::uint64_t tokens,
                                                    std::uint64_t multiple) noexcept {
    if (multiple <= 1 || tokens > max_record_tokens) return tokens;
    return (tokens + multiple - 1) / multiple * multiple;
}

/// A record's length as a plan counts it (padded_length), checked: throws bcl::error (prefixed
/// with `who`, naming `what` and `index`: "record 7", "dataset index 7") where it is above
/// `max_tokens`, unless `oversized_alone` allows it (up to 2^31), the error then saying how to.
[[nodiscard]] inline std::uint64_t checked_length(std::uint64_t tokens, std::size_t index,
                                                  std::string_view what, std::uint64_t max_tokens,
                                                  bool oversized_alone, std::uint64_t multiple,
                                                  std::string_view who) {
    const std::uint64_t t = padded_length(tokens, multiple);
    if (t <= max_tokens || (oversized_alone && t <= max_record_tokens)) return t;
    throw error(std::string(who) + ": " + std::string(what) + " " + std::to_string(index) +
                " has " + std::to_string(tokens) + " tokens" +
                (t != tokens ? " (" + std::to_string(t) + " padded to a multiple of " +
                                   std::to_string(multiple) + ")"
                             : std::string()) +
                ", above max_tokens (" + std::to_string(max_tokens) + ")" +
                (oversized_alone ? ": no record may have more than 2^31"
                                 : "; truncate it, or let such records have a micro-batch of "
                                   "their own"));
}

/// A plan's records as integers.
struct token_records {
    std::vector<std::uint64_t> tokens; ///< for packing: the record's, or T for one allowed alone
    std::vector<std::uint64_t> cost;   ///< fixed point
    std::vector<std::uint8_t> alone;   ///< 1 for a record above T (allowed alone)
    double unit = 1.0;                 ///< cost units per fixed-point unit
    std::size_t oversized = 0;         ///< records above T, each alone in a micro-batch

    void reserve(std::size_t n) {
        tokens.reserve(n);
        cost.reserve(n);
        alone.reserve(n);
    }
};

/// Reads `tokens` (and `costs`, one per record, or none for the default cost) into `out`, each
/// length counted as padded_length(length, multiple) for the budget and the default cost.
/// Throws bcl::error (prefixed with `who`) naming the index and value of a record above
/// `max_tokens` (unless `oversized_alone`), of a cost that is not valid (bcl::valid_cost), and
/// for costs of another length; `out` may then be partly written. O(n).
inline void read_records(std::span<const std::uint64_t> tokens, std::span<const double> costs,
                         std::uint64_t max_tokens, bool oversized_alone, std::string_view who,
                         token_records& out, std::uint64_t multiple = 1) {
    const std::size_t n = tokens.size();
    if (!costs.empty() && costs.size() != n)
        throw error(std::string(who) + ": " + std::to_string(costs.size()) + " costs for " +
                    std::to_string(n) +
                    " records; give one cost per record, or none for the "
                    "default L + L^2/24576");
    out.tokens.resize(n);
    out.cost.resize(n);
    out.alone.assign(n, 0);
    out.oversized = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint64_t t =
            checked_length(tokens[i], i, "record", max_tokens, oversized_alone, multiple, who);
        if (t > max_tokens) {
            ++out.oversized;
            out.alone[i] = 1;
            out.tokens[i] = max_tokens; // alone: nothing else fits beside it
        } else {
            out.tokens[i] = t;
        }
    }
    const unsigned headroom = static_cast<unsigned>(std::bit_width(n == 0 ? 1 : n));
    if (costs.empty()) {
        std::uint64_t largest = 0;
        for (std::size_t i = 0; i < n; ++i) {
            out.cost[i] = default_cost_units(padded_length(tokens[i], multiple));
            largest = std::max(largest, out.cost[i]);
        }
        // Shift so that n costs add up below 2^63.
        const auto width = static_cast<int>(std::bit_width(largest));
        const int shift = std::max(0, width - (63 - static_cast<int>(headroom)));
        for (std::uint64_t& c : out.cost) c >>= shift;
        out.unit = std::ldexp(1.0, shift) / 24576.0;
        return;
    }
    const std::uint64_t no_cap = plan::cap_bits(0.0, who);
    const std::uint64_t largest = plan::checked_largest(costs, no_cap, who);
    const plan::fixed_point scale = plan::scale_for(largest, n == 0 ? 1 : n);
    plan::quantize(costs, no_cap, scale, out.cost);
    out.unit = std::ldexp(1.0, -scale.exponent());
}

} // namespace bcl::detail::tokens
