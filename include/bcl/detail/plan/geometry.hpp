#pragma once
// Internal: the steps and packs of one global-plan window, and the checks that the shape fits.

#include <bcl/detail/config.hpp>

#include <bcl/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace bcl::detail::plan {

/// How n records of a window of R ranks, K steps and batches of B fall into steps and packs.
/// Every rank gets m = n / R records in ceil(m / B) steps: full steps of B records per rank, the
/// last one holding m - (steps - 1) * B (the short final step, when that is less than B).
struct geometry {
    std::size_t ranks = 0;       ///< R
    std::size_t batch = 0;       ///< B
    std::size_t capacity = 0;    ///< R * K * B, the most records a window holds
    std::size_t per_rank = 0;    ///< m
    std::size_t steps = 0;       ///< ceil(m / B)
    std::size_t last_size = 0;   ///< records per rank in the last step (B unless it is short)
    std::size_t full_packs = 0;  ///< R * (steps - 1), or R * steps when no step is short
    std::size_t short_packs = 0; ///< R when the last step is short, else 0

    [[nodiscard]] std::size_t packs() const noexcept { return full_packs + short_packs; }
    [[nodiscard]] std::size_t full_steps() const noexcept { return full_packs / ranks; }

    /// The rank the j-th heaviest pack of step s goes to: (j + s) mod R, so that no rank always
    /// gets a step's heaviest pack (step s's goes to rank s mod R). Both layouts seat their packs
    /// by it.
    [[nodiscard]] std::uint32_t rank_of(std::size_t j, std::size_t step) const noexcept {
        return static_cast<std::uint32_t>((j + step) % ranks);
    }
};

/// The geometry of n records in a window of (ranks, steps, batch). Throws bcl::error naming `who`
/// and the numbers when a count is 0, R*K*B overflows or is above `max_records`, n is above
/// R*K*B, or n is not a multiple of R.
[[nodiscard]] inline geometry geometry_of(std::size_t n, std::size_t ranks, std::size_t steps,
                                          std::size_t batch, std::size_t max_records,
                                          std::string_view who) {
    const auto text = [](std::size_t v) { return std::to_string(v); };
    // Built only for a message: a valid window allocates nothing here.
    const auto shape = [&] {
        return "ranks = " + text(ranks) + ", steps = " + text(steps) + ", batch = " + text(batch);
    };
    if (ranks == 0 || steps == 0 || batch == 0)
        throw error(std::string(who) + ": every count of the shape must be at least 1 (" + shape() +
                    ")");
    if (steps > max_records / ranks || batch > max_records / (ranks * steps))
        throw error(std::string(who) + ": a window of R*K*B records (" + shape() +
                    ") is more than the " + text(max_records) + " records a plan takes");
    geometry g;
    g.ranks = ranks;
    g.batch = batch;
    g.capacity = ranks * steps * batch;
    if (n > g.capacity)
        throw error(std::string(who) + ": " + text(n) +
                    " costs are more than the window holds (R*K*B = " + text(g.capacity) + ", " +
                    shape() + ")");
    if (n % ranks != 0)
        throw error(std::string(who) + ": " + text(n) + " costs do not split evenly over " +
                    text(ranks) + " ranks (the count must be a multiple of R)");
    g.per_rank = n / ranks;
    g.steps = (g.per_rank + batch - 1) / batch;
    g.last_size = g.per_rank - (g.steps == 0 ? 0 : (g.steps - 1) * batch);
    const bool short_step = g.steps > 0 && g.last_size < batch;
    g.full_packs = ranks * (short_step ? g.steps - 1 : g.steps);
    g.short_packs = short_step ? ranks : 0;
    return g;
}

} // namespace bcl::detail::plan
