#pragma once
// The default partitioner: capped LPT followed by swap refinement, sharing one sort.

#include <bcl/detail/config.hpp>

#include <bcl/partition/detail/capped_lpt.hpp>
#include <bcl/partition/detail/ranked_window.hpp>
#include <bcl/partition/detail/swap_refiner.hpp>
#include <bcl/partition/lower_bound.hpp>
#include <bcl/partition/partitioner.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

namespace bcl {

/// How much work swap refinement may spend once single swaps are stuck (phase 2 below).
struct refinement_effort {
    /// Phase 2 runs only while the heaviest pack is more than this fraction above the lower
    /// bound. Default 1e-4: a window that close to the best possible costs a trainer at most a
    /// hundredth of a percent of its step, far below what any cost estimate can resolve, and
    /// single swaps alone usually get there; the windows still above it (small B with costs that
    /// move in whole tokens, a few items each near a pack's share) are the ones worth more work.
    /// Lower it to chase the bound harder; 0 means "until the bound or the budget".
    double above = 1e-4;
    /// Phase-2 searches allowed per pack and window: one 2-for-2 search or one make-room attempt
    /// each. Default 4: measured, a larger budget buys almost nothing (docs/partitioners.md), and
    /// it caps the worst case at 4K searches of O(B log B). 0 turns phase 2 off, leaving plain
    /// 1-for-1 refinement.
    std::size_t searches_per_pack = 4;
};

/// Capped LPT + swap refinement: the library's default partitioner.
///
/// 1. Sort the items by cost, high to low, ties by position (a radix sort on the bits of the
///    costs: O(n)).
/// 2. Capped LPT: each item, largest first, goes to the lightest pack that still has a free slot
///    (see lpt_partitioner).
/// 3. Unless the heaviest pack already meets pack_lower_bound_sorted, refine exactly as
///    swap_refinement does: 1-for-1 swaps of the heaviest pack, light packs first; once those are
///    stuck, and only while the gap exceeds `effort.above`, 2-for-2 exchanges and make-room
///    swaps within a budget. Stop at the lower bound (the partition is then provably optimal),
///    when nothing helps, or after 2n + 2K rounds.
///
/// The result equals `refined<lpt_partitioner>`'s, with one sort instead of two. Every pack p
/// receives exactly `shape.capacity(p, n)` items; the result depends only on the costs and the
/// shape. The summary's lower bound is pack_lower_bound_sorted's (computed from prefix sums the
/// sort leaves behind: equal up to rounding).
///
/// Its gaps to the lower bound, and how often it is optimal, are measured in
/// docs/partitioners.md.
///
/// Cost: O(n) sort, O(n K) LPT at most (less for many packs, see lpt_partitioner), then
/// typically about K rounds of O(K + B) each, plus phase 2 where it runs. Scratch space is kept
/// between calls: after the first call of the largest window it allocates nothing. Throws
/// bcl::error if the shape does not fit the costs, pack_of has the wrong length, or a cost is
/// negative, NaN or above bcl::max_estimate.
class lpt_swap_partitioner {
public:
    /// How hard refinement works once single swaps are stuck; see refinement_effort.
    refinement_effort effort{};

    lpt_swap_partitioner() = default;
    explicit lpt_swap_partitioner(refinement_effort e) : effort(e) {}

    partition_summary operator()(std::span<const double> costs, pack_shape shape,
                                 std::span<std::uint32_t> pack_of) {
        const auto lower_bound =
            m_window.start("bcl::lpt_swap_partitioner", costs, shape, pack_of.size());
        if (!lower_bound) return {};
        m_window.packs.reset(shape, costs.size());
        m_lpt.reserve(shape.packs);
        m_refiner.reserve(shape);
        m_lpt(m_window.ranked, m_window.packs);
        m_refiner.run(m_window.ranked, m_window.packs, *lower_bound, effort.above,
                      effort.searches_per_pack);
        const double heaviest = m_window.packs.write(m_window.ranked, pack_of);
        return {heaviest, *lower_bound, m_window.packs.loads()};
    }

private:
    detail::ranked_window m_window;
    detail::capped_lpt m_lpt;
    detail::swap_refiner m_refiner;
};

} // namespace bcl
