#pragma once
// Capped LPT alone: largest first, each to the lightest pack with a free slot.
// Deprecated as part of the installed library: a baseline for the tests and benchmarks, it
// moves to bench/partitioners/ (not installed) in the next release; this path works until then.

#include <bcl/detail/config.hpp>

#include <bcl/partition/detail/capped_lpt.hpp>
#include <bcl/partition/detail/ranked_window.hpp>
#include <bcl/partition/lower_bound.hpp>
#include <bcl/partition/partitioner.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

namespace bcl::detail {

/// Capped LPT (longest processing time first, with a slot cap per pack).
///
/// Sorts the items by cost, high to low (ties by position), and gives each in turn to the lightest
/// pack that still has a free slot (ties to the lowest pack id). Every pack receives exactly
/// `shape.capacity(p, n)` items.
///
/// Guarantee: the contract (exact pack sizes, determinism); no bound on the gap is promised: the
/// cap forces the last items into whichever packs still have room (docs/partitioners.md has its
/// measured gaps, which `lpt_swap_partitioner` refines).
///
/// O(n) radix sort, then O(n K) for K <= 24, O(n (K/8 + 8)) up to 256, O(n log K) above. The
/// summary's lower bound is pack_lower_bound_sorted's (computed from prefix sums: equal up to
/// rounding). Scratch space is kept: after the first call of the largest window it allocates
/// nothing. Throws bcl::error if the shape does not fit the costs, pack_of has the wrong length,
/// or a cost is negative, NaN or above bcl::max_estimate.
class lpt_partitioner {
public:
    partition_summary operator()(std::span<const double> costs, pack_shape shape,
                                 std::span<std::uint32_t> pack_of) {
        const auto lower_bound =
            m_window.start("bcl::detail::lpt_partitioner", costs, shape, pack_of.size());
        if (!lower_bound) return {};
        m_window.packs.reset(shape, costs.size());
        m_lpt.reserve(shape.packs);
        m_lpt(m_window.ranked, m_window.packs);
        return {m_window.packs.write(m_window.ranked, pack_of), *lower_bound};
    }

private:
    detail::ranked_window m_window;
    detail::capped_lpt m_lpt;
};

} // namespace bcl::detail
