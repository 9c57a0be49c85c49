#pragma once
// Capped LPT alone: largest first, each to the lightest pack with a free slot.

#include <bcl/detail/capped_lpt.hpp>
#include <bcl/detail/pack_table.hpp>
#include <bcl/detail/ranked_costs.hpp>
#include <bcl/lower_bound.hpp>
#include <bcl/partitioner.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

namespace bcl {

/// Capped LPT (longest processing time first, with a slot cap per pack).
///
/// Sorts the items by cost, high to low (ties by position), and gives each in turn to the lightest
/// pack that still has a free slot (ties to the lowest pack id). Every pack receives exactly
/// `shape.capacity(p, n)` items.
///
/// Guarantee: the contract (exact pack sizes, determinism); no bound on the gap is promised: the
/// cap forces the last items into whichever packs still have room. Measured (docs/partitioners.md)
/// it ends 1e-4 to a few percent above the lower bound, about 2e-3 on lognormal token windows at
/// K=8, B=64; `lpt_swap_partitioner` refines that to about 1e-5.
///
/// O(n) radix sort, then O(n K) for K <= 32 or O(n log K) above. The summary's lower bound is
/// pack_lower_bound_sorted's (computed from prefix sums: equal up to rounding). Scratch space is
/// kept: after the first call of the largest window it allocates nothing. Throws bcl::error if the
/// shape does not fit the costs, pack_of has the wrong length, or a cost is negative, infinite or
/// NaN.
class lpt_partitioner {
public:
    partition_summary operator()(std::span<const double> costs, pack_shape shape,
                                 std::span<std::uint32_t> pack_of) {
        constexpr const char* who = "bcl::lpt_partitioner";
        detail::check_partition_shape(who, costs.size(), shape, pack_of.size());
        if (costs.empty()) return {};
        m_lpt.reserve(shape.packs);
        m_ranked.assign(costs, who);
        const double lower_bound =
            detail::pack_lower_bound_prefix(m_ranked.desc(), m_ranked.prefix(), shape);
        m_packs.reset(shape, costs.size());
        m_lpt(m_ranked, m_packs);
        return {m_packs.write(m_ranked, pack_of), lower_bound};
    }

private:
    detail::ranked_costs m_ranked;
    detail::pack_table m_packs;
    detail::capped_lpt m_lpt;
};

} // namespace bcl
