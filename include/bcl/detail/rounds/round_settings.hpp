#pragma once
// What a lookahead policy's rounds are given: the shape settings, and the buffer as a round sees
// it.

#include <bcl/detail/config.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

namespace bcl::detail {

/// The settings a lookahead policy reads (copied from bcl::options, which lists the policies).
struct round_settings {
    std::size_t batch_size = 1;
    std::size_t lookahead = 1;
    std::size_t buffer_windows = 1;
    std::size_t max_age = 0;

    [[nodiscard]] constexpr std::size_t window() const noexcept { return batch_size * lookahead; }
};

/// The buffer at the start of a round that cannot take all of it: what a policy chooses from.
struct round_inputs {
    std::span<const double> costs;           ///< the buffered records' costs, in arrival order
    std::span<const std::uint64_t> arrivals; ///< their arrival positions (increasing)
    std::uint64_t round = 0;                 ///< rounds run before this one
    bool finished = false;     ///< the input has ended (the buffer is all that is left)
    double arrival_mean = 0.0; ///< long-run mean cost of every record accepted
    std::size_t take = 0;      ///< records the round takes: K*B, fewer than held
};

} // namespace bcl::detail
