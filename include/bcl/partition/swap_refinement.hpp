#pragma once
// Swap refinement as a pass over any partition, and `refined<P>`: a partitioner followed by it.
// Deprecated as part of the installed library: a baseline for the tests and benchmarks, it
// moves to bench/partitioners/ (not installed) in the next release; this path works until then.

#include <bcl/detail/config.hpp>

#include <bcl/partition/detail/ranked_window.hpp>
#include <bcl/partition/detail/swap_refiner.hpp>
#include <bcl/partition/lower_bound.hpp>
#include <bcl/partition/lpt_swap.hpp>
#include <bcl/partition/partitioner.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

namespace bcl::detail {

/// Improves an existing partition in place by exchanging items between packs.
///
/// Each round looks at the heaviest pack h.
///   Phase 1: a good 1-for-1 swap of h with the lightest pack, else with every other pack from
///     light to heavy. The best swap is the pair (x in h, y in p) whose difference x - y in
///     (0, gap) comes closest to gap / 2, lowering the larger of the two packs the most; the
///     search, from h's cheapest item up, takes the first pair that achieves at least 3/4 of
///     that most (gap * 3/8), else the best there is. Skipped, as it cannot succeed, once h is
///     within the smallest difference between two of the window's costs of the lightest pack.
///   Phase 2, only while h is more than `effort.above` above the bound and within the budget:
///     a) the best 2-for-2 exchange of h with the lightest pack: two swaps that are useless alone
///        (one overshoots the gap, one goes the wrong way) but add up to a step inside it. This
///        is what balances costs that move in coarse steps (integer token counts): one swap
///        moves whole tokens, two can move the small difference between two quadratic terms;
///     b) else make room: lower another heavy pack, heaviest first, by a 1-for-1 swap with the
///        lightest pack. When h is stuck because its neighbours at the top hold the small items
///        it needs, this is what frees them (heavy tails, small B).
/// It stops as soon as the heaviest pack meets pack_lower_bound_sorted (the partition is then
/// provably optimal), when no move applies, or after 2n + 2K rounds.
///
/// Guarantees: pack sizes never change (every move is an exchange), so a valid partition stays
/// valid; the heaviest pack never gets heavier (every move lowers the larger of the two packs it
/// touches); when it stops above the bound with rounds to spare, no single swap between a
/// heaviest pack and any other pack would lower it. The result is a pure function of the costs
/// and the partition it started from.
///
/// The summary's lower bound is pack_lower_bound_sorted's, computed from prefix sums (equal up to
/// rounding).
///
/// Cost: O(n) to rank the costs (radix sort) and load the partition; per phase-1 round O(K + B)
/// when the lightest pack helps (the common case), O(K log K + n) when every pack has to be
/// tried; O(B log B) per 2-for-2 search and O(B) per make-room attempt, at most
/// `effort.searches_per_pack * K` of them per window. Scratch space is kept between calls: after
/// the first call of the largest window it allocates nothing.
class swap_refinement {
public:
    refinement_effort effort{};

    swap_refinement() = default;
    explicit swap_refinement(refinement_effort e) : effort(e) {}

    /// Refines the partition in `pack_of` (the pack of each item, as a partitioner wrote it) and
    /// returns its new heaviest pack and the lower bound. Throws bcl::error if the shape does not
    /// fit the costs, if pack_of is not a valid partition for it (an id out of range, a pack
    /// with the wrong number of items), or if a cost is negative, NaN or above bcl::max_estimate.
    partition_summary operator()(std::span<const double> costs, pack_shape shape,
                                 std::span<std::uint32_t> pack_of) {
        constexpr const char* who = "bcl::detail::swap_refinement";
        const auto lower_bound = m_window.start(who, costs, shape, pack_of.size());
        if (!lower_bound) return {};
        m_window.packs.reset(shape, costs.size());
        m_refiner.reserve(shape);
        m_window.packs.assign(m_window.ranked, pack_of, who);
        m_refiner.run(m_window.ranked, m_window.packs, *lower_bound, effort.above,
                      effort.searches_per_pack);
        return {m_window.packs.write(m_window.ranked, pack_of), *lower_bound};
    }

private:
    detail::ranked_window m_window;
    detail::swap_refiner m_refiner;
};

/// A partitioner P followed by swap_refinement:
/// `bcl::detail::refined<bcl::detail::karmarkar_karp_partitioner>` is balanced Karmarkar-Karp plus
/// refinement. (lpt_swap_partitioner gives the same result as `refined<lpt_partitioner>` with one
/// sort instead of two.)
template <partitioner P>
class refined {
public:
    refined() = default;
    explicit refined(P first, swap_refinement second = {})
        : m_first(std::move(first)), m_refinement(std::move(second)) {}

    partition_summary operator()(std::span<const double> costs, pack_shape shape,
                                 std::span<std::uint32_t> pack_of) {
        static_cast<void>(m_first(costs, shape, pack_of));
        return m_refinement(costs, shape, pack_of);
    }

    [[nodiscard]] P& first() noexcept { return m_first; }
    [[nodiscard]] swap_refinement& refinement() noexcept { return m_refinement; }

private:
    P m_first;
    swap_refinement m_refinement;
};

} // namespace bcl::detail
