#pragma once
// Internal: the padded global plan, sorted runs of records cut into steps.

#include <bcl/detail/config.hpp>

#include <bcl/detail/plan/geometry.hpp>
#include <bcl/detail/plan/layout_totals.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

namespace bcl::detail::plan {

/// The padded plan (a batch costs its size times its dearest record's cost): consecutive runs of
/// the records in cost order (`cost` by place, descending; `index` the input index of the record
/// at each place), into out[input index] = {step, rank}. A step costs its dearest run, so blocks
/// of R consecutive runs minimize the sum over steps: in any other grouping some block's head is
/// a dearer record. The short step's block (R runs of the last size) goes where among the blocks
/// the total is least (ties: the latest position), and is still the last step. Within a block
/// the j-th run goes to rank (j + step) mod R (geometry::rank_of). Optimal for its shape, so the
/// lower bound is the objective. O(n).
template <class Slot>
layout_totals padded_layout(const geometry& g, std::span<const std::uint64_t> cost,
                            std::span<const std::uint32_t> index, std::span<Slot> out) {
    layout_totals totals;
    if (cost.empty()) return totals;
    const std::size_t full_block = g.ranks * g.batch;
    const std::size_t full_blocks = g.full_steps();
    const std::size_t short_block = g.short_packs * g.last_size;
    std::size_t short_at = full_blocks; // where the short block sits among the blocks
    if (short_block > 0) {
        // total(short_at) = B * the heads of the full blocks before it + last size * its head + B *
        // the heads of the full blocks after it, each short_block later; one sweep.
        std::uint64_t after = 0;
        for (std::size_t b = 0; b < full_blocks; ++b)
            after += g.batch * cost[b * full_block + short_block];
        std::uint64_t before = 0;
        std::uint64_t best = ~std::uint64_t{0};
        for (std::size_t at = 0; at <= full_blocks; ++at) {
            if (at > 0) {
                before += g.batch * cost[(at - 1) * full_block];
                after -= g.batch * cost[(at - 1) * full_block + short_block];
            }
            const std::uint64_t total = before + g.last_size * cost[at * full_block] + after;
            if (total <= best) {
                best = total;
                short_at = at;
            }
        }
    }
    std::size_t start = 0;
    std::size_t full_seen = 0;
    const std::size_t blocks = full_blocks + (short_block > 0 ? 1 : 0);
    for (std::size_t block = 0; block < blocks; ++block) {
        const bool is_short = short_block > 0 && block == short_at;
        const std::size_t size = is_short ? g.last_size : g.batch;
        const std::size_t step = is_short ? g.steps - 1 : full_seen++;
        const std::uint64_t head = size * cost[start];
        totals.objective += head;
        totals.heaviest = head > totals.heaviest ? head : totals.heaviest;
        for (std::size_t j = 0; j < g.ranks; ++j) {
            const Slot at{static_cast<std::uint32_t>(step), g.rank_of(j, step)};
            totals.total += size * cost[start];
            for (std::size_t k = 0; k < size; ++k) out[index[start + k]] = at;
            start += size;
        }
    }
    totals.lower_bound = totals.objective;
    return totals;
}

} // namespace bcl::detail::plan
