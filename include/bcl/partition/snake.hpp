#pragma once
// Serpentine ("snake") dealing: sorted items dealt to the packs back and forth.
// Deprecated as part of the installed library: a baseline for the tests and benchmarks, it
// moves to bench/partitioners/ (not installed) in the next release; this path works until then.

#include <bcl/detail/config.hpp>

#include <bcl/partition/detail/ranked_window.hpp>
#include <bcl/partition/lower_bound.hpp>
#include <bcl/partition/partitioner.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

namespace bcl::detail {

/// Serpentine dealing, the simplest sort-based balancer: sort the items high to low and deal
/// them in rows of K, left to right on even rows and right to left on odd ones (pack 0 gets
/// ranks 0, 2K-1, 2K, 4K-1, ...). A short window is dealt as if it were full, with zero-cost
/// placeholders at the end that are then gathered into the last pack.
///
/// Guarantee: the contract (exactly `shape.capacity(p, n)` items per pack, deterministic); every
/// pack gets exactly one item of each row of K. No bound on the gap: on heavy tails the pack
/// that gets the largest item still gets one item of every later row, and ends percent-level
/// above the lower bound (docs/partitioners.md). A baseline, and a start for swap_refinement.
///
/// O(n) radix sort and O(n) dealing. Scratch space is kept: after the first call of the largest
/// window it allocates nothing. Throws bcl::error if the shape does not fit the costs, pack_of
/// has the wrong length, or a cost is negative, NaN or above bcl::max_estimate.
class snake_partitioner {
public:
    partition_summary operator()(std::span<const double> costs, pack_shape shape,
                                 std::span<std::uint32_t> pack_of) {
        const auto lower_bound =
            m_window.start("bcl::detail::snake_partitioner", costs, shape, pack_of.size());
        if (!lower_bound) return {};
        const std::size_t n = costs.size();
        const std::size_t k = shape.packs;
        const std::size_t full = k * shape.pack_size;
        const detail::ranked_costs& ranked = m_window.ranked;
        detail::pack_table& packs = m_window.packs;
        packs.reset(shape, full);
        for (std::size_t r = 0; r < full; ++r) {
            const std::size_t row = r / k;
            const std::size_t column = r % k;
            const std::size_t p = row % 2 == 0 ? column : k - 1 - column;
            packs.append(p, static_cast<std::uint32_t>(r), r < n ? ranked.cost(r) : 0.0);
        }
        if (n < full) packs.gather_placeholders(n, ranked);
        return {packs.write(ranked, pack_of), *lower_bound};
    }

private:
    detail::ranked_window m_window;
};

} // namespace bcl::detail
