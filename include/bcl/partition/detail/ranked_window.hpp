#pragma once
// Internal: one window as the ranked partitioners hold it, and the steps each of them starts with.

#include <bcl/detail/config.hpp>

#include <bcl/partition/detail/pack_table.hpp>
#include <bcl/partition/detail/ranked_costs.hpp>
#include <bcl/partition/lower_bound.hpp>
#include <bcl/partition/partitioner.hpp>

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

namespace bcl::detail {

/// The costs ranked once and a table of packs over the ranks, as every sort-based partitioner
/// holds them (lpt, lpt_swap, swap_refinement, karmarkar_karp, snake).
struct ranked_window {
    ranked_costs ranked;
    pack_table packs;

    /// Checks the call (bcl::error naming `who`: a shape that does not fit the costs, an output of
    /// the wrong length, a cost that is negative, NaN or above bcl::max_estimate) and ranks the
    /// costs. Returns the window's lower bound, or nothing for an empty window, which needs no more
    /// work. The packs are left to the caller to reset: for the window's n items, or for all K*B
    /// when a short window is dealt as if full.
    std::optional<double> start(std::string_view who, std::span<const double> costs,
                                pack_shape shape, std::size_t out_size) {
        check_partition_shape(who, costs.size(), shape, out_size);
        if (costs.empty()) return std::nullopt;
        ranked.assign(costs, who);
        return pack_lower_bound_prefix(ranked.desc(), ranked.prefix(), shape);
    }
};

} // namespace bcl::detail
