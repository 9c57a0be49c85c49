#pragma once
// An exact partitioner for tiny windows: branch and bound, seeded by the default heuristic.
// Deprecated as part of the installed library: a baseline for the tests and benchmarks, it
// moves to bench/partitioners/ (not installed) in the next release; this path works until then.

#include <bcl/detail/config.hpp>

#include <bcl/error.hpp>
#include <bcl/partition/detail/pack_table.hpp>
#include <bcl/partition/detail/ranked_costs.hpp>
#include <bcl/partition/detail/swap_refiner.hpp>
#include <bcl/partition/lower_bound.hpp>
#include <bcl/partition/lpt_swap.hpp>
#include <bcl/partition/partitioner.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace bcl::detail {

/// Finds a partition whose heaviest pack is the smallest possible, for windows of at most
/// `max_items` items. Meant for tests and for measuring the other partitioners; the search is
/// exponential in the worst case.
///
/// Depth-first branch and bound over the items, dearest first: each item goes to each pack with a
/// free slot in turn. Packs in the same state (equal load and count) are interchangeable, so only
/// the first is tried; a branch is cut when the pack's load plus the cheapest possible filling of
/// its remaining slots cannot beat the best partition so far. That incumbent starts as
/// lpt_swap_partitioner's result, and the search stops as soon as it meets
/// pack_lower_bound_sorted.
///
/// Guarantee: the heaviest pack is optimal (up to floating-point summation order), every pack p
/// receives exactly `shape.capacity(p, n)` items, and the result depends only on the costs and
/// the shape. The summary's lower bound is the optimum itself: the search proved it.
///
/// O(K^n) in the worst case; in practice well under a millisecond for n <= 16. Throws bcl::error
/// if n exceeds max_items, the shape does not fit the costs, pack_of has the wrong length, or a
/// cost is negative, NaN or above bcl::max_estimate.
class exact_partitioner {
public:
    /// Largest window accepted. Default 20: windows of up to 16 items solve in well under a
    /// millisecond on typical costs; a few more can take seconds on adversarial ones.
    std::size_t max_items = 20;

    partition_summary operator()(std::span<const double> costs, pack_shape shape,
                                 std::span<std::uint32_t> pack_of) {
        constexpr const char* who = "bcl::detail::exact_partitioner";
        const std::size_t n = costs.size();
        detail::check_partition_shape(who, n, shape, pack_of.size());
        if (n > max_items)
            throw error(std::string(who) + ": a window of " + std::to_string(n) +
                        " items is larger than max_items = " + std::to_string(max_items) +
                        " (the search is exponential in the number of items)");
        if (n == 0) return {};
        m_ranked.assign(costs, who); // validates the costs under this partitioner's name
        const partition_summary start = m_heuristic(costs, shape, pack_of);
        const double bound = start.lower_bound + start.lower_bound * detail::bound_tolerance;
        if (start.heaviest <= bound) return {start.heaviest, start.heaviest};

        const std::size_t k = shape.packs;
        m_cost.assign(m_ranked.desc().begin(), m_ranked.desc().end());
        m_cheapest.assign(n + 1, 0.0); // m_cheapest[t]: sum of the t cheapest items
        for (std::size_t t = 1; t <= n; ++t) m_cheapest[t] = m_cheapest[t - 1] + m_cost[n - t];
        m_load.assign(k, 0.0);
        m_count.assign(k, 0);
        m_capacity.resize(k);
        for (std::size_t p = 0; p < k; ++p) m_capacity[p] = shape.capacity(p, n);
        m_current.assign(n, 0);
        m_best_assignment.clear();
        m_best = start.heaviest;
        m_target = bound;
        search(0, 0.0);
        if (m_best_assignment.empty()) // nothing beat the heuristic: it was optimal
            return {start.heaviest, start.heaviest};

        m_packs.reset(shape, n);
        for (std::size_t r = 0; r < n; ++r)
            m_packs.append(m_best_assignment[r], static_cast<std::uint32_t>(r), m_cost[r]);
        const double heaviest = m_packs.write(m_ranked, pack_of);
        return {heaviest, heaviest};
    }

private:
    // Places the item of rank r; `heaviest` is the heaviest pack so far. Returns true once the
    // incumbent meets the lower bound, to unwind the whole search. Recursive on purpose: the
    // depth is the window's size, at most max_items.
    bool search(std::size_t r, double heaviest) { // NOLINT(misc-no-recursion)
        const std::size_t n = m_cost.size();
        if (r == n) {
            if (heaviest < m_best) {
                m_best = heaviest;
                m_best_assignment = m_current;
            }
            return m_best <= m_target;
        }
        const std::size_t k = m_load.size();
        for (std::size_t p = 0; p < k; ++p) {
            if (m_count[p] == m_capacity[p]) continue;
            bool twin = false; // an earlier pack in the same state was already tried
            for (std::size_t q = 0; q < p && !twin; ++q)
                twin = m_load[q] == m_load[p] && m_count[q] == m_count[p] &&
                       m_capacity[q] == m_capacity[p];
            if (twin) continue;
            const double load = m_load[p] + m_cost[r];
            // Its other free slots take at least the cheapest items still to come.
            if (load + m_cheapest[m_capacity[p] - m_count[p] - 1] >= m_best) continue;
            const double before = m_load[p];
            m_load[p] = load;
            ++m_count[p];
            m_current[r] = static_cast<std::uint32_t>(p);
            const bool done = search(r + 1, std::max(heaviest, load));
            --m_count[p];
            m_load[p] = before; // restored exactly: no drift from subtracting
            if (done) return true;
        }
        return false;
    }

    lpt_swap_partitioner m_heuristic;
    detail::ranked_costs m_ranked;
    detail::pack_table m_packs;
    std::vector<double> m_cost;
    std::vector<double> m_cheapest;
    std::vector<double> m_load;
    std::vector<std::size_t> m_count;
    std::vector<std::size_t> m_capacity;
    std::vector<std::uint32_t> m_current;
    std::vector<std::uint32_t> m_best_assignment;
    double m_best = 0.0;
    double m_target = 0.0;
};

} // namespace bcl::detail
