#pragma once
// Internal: capped LPT on a ranked window, shared by lpt_partitioner and lpt_swap_partitioner.

#include <bcl/detail/config.hpp>

#include <bcl/partition/detail/pack_table.hpp>
#include <bcl/partition/detail/ranked_costs.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace bcl::detail {

/// Capped LPT: items in rank order (dearest first) each go to the lightest pack that still has a
/// free slot, ties to the lowest pack id. `packs` must be freshly reset for the window.
///
/// A full pack counts as infinitely heavy. Up to 24 packs a linear scan finds the lightest (K
/// compares that compile to conditional moves, O(n K)); up to 256, the packs are scanned in
/// groups of 8 with each group's lightest kept, so an item costs a scan of the groups and a
/// rescan of one group (O(n (K/8 + 8))); above that a winner tree over the packs replays only the
/// path from the chosen pack to the root after each item (O(n log K)). The limits are where one
/// overtook the other in timing (docs/benchmarks.md). All make the
/// same choices. Scratch is kept between calls.
class capped_lpt {
public:
    void operator()(const ranked_costs& ranked, pack_table& packs) {
        if (packs.packs() <= linear_scan_limit)
            scan(ranked, packs);
        else if (packs.packs() <= grouped_scan_limit)
            grouped_scan(ranked, packs);
        else
            tournament(ranked, packs);
    }

    /// Sizes the scratch for K packs now, so that a later call allocates nothing.
    void reserve(std::size_t k) {
        std::size_t leaves = 1;
        while (leaves < k) leaves *= 2;
        m_load.reserve(leaves); // >= K rounded up to a whole group, for grouped_scan too
        m_winner.reserve(2 * leaves);
        m_group_load.reserve(leaves / group_size + 1);
        m_group_best.reserve(leaves / group_size + 1);
    }

private:
    static constexpr std::size_t linear_scan_limit = 24;
    static constexpr std::size_t group_size = 8;
    static constexpr std::size_t grouped_scan_limit = 256;
    static constexpr double closed = std::numeric_limits<double>::infinity();

    struct lightest_pack {
        std::size_t index; // the first of the lightest, so ties go to the lowest id
        double load;
    };

    // The lightest of `count` loads, by K compares written to compile to conditional moves: which
    // pack wins is data-dependent, and a branch on it would mispredict.
    static lightest_pack lightest_of(const double* load, std::size_t count) noexcept {
        lightest_pack best{0, load[0]};
        for (std::size_t p = 1; p < count; ++p) {
            const bool lighter = load[p] < best.load;
            best.load = lighter ? load[p] : best.load;
            best.index = lighter ? p : best.index;
        }
        return best;
    }

    // Puts the item of rank r into pack p, whose load (open, so finite) is `load`, and records
    // its new load, or +infinity once it is full. load + cost is the pack's new load, bit for bit,
    // without reading it back.
    void place(const ranked_costs& ranked, pack_table& packs, std::size_t r, std::size_t p,
               double load) noexcept {
        const double cost = ranked.cost(r);
        packs.append(p, static_cast<std::uint32_t>(r), cost);
        m_load[p] = packs.count(p) < packs.capacity(p) ? load + cost : closed;
    }

    void scan(const ranked_costs& ranked, pack_table& packs) {
        const std::size_t n = ranked.size();
        const std::size_t k = packs.packs();
        m_load.assign(k, 0.0);
        for (std::size_t r = 0; r < n; ++r) {
            const lightest_pack best = lightest_of(m_load.data(), k);
            place(ranked, packs, r, best.index, best.load);
        }
    }

    // The packs in groups of group_size, each group's lightest kept: the lightest pack is the
    // lightest of the groups' lightest, and after an item only its group is scanned again.
    void grouped_scan(const ranked_costs& ranked, pack_table& packs) {
        const std::size_t n = ranked.size();
        const std::size_t k = packs.packs();
        const std::size_t groups = (k + group_size - 1) / group_size;
        m_load.assign(groups * group_size, closed);
        for (std::size_t p = 0; p < k; ++p) m_load[p] = 0.0;
        m_group_load.assign(groups, 0.0);
        m_group_best.resize(groups);
        for (std::size_t g = 0; g < groups; ++g)
            m_group_best[g] = static_cast<std::uint32_t>(g * group_size);
        for (std::size_t r = 0; r < n; ++r) {
            const lightest_pack group = lightest_of(m_group_load.data(), groups);
            place(ranked, packs, r, m_group_best[group.index], group.load);
            const std::size_t first = group.index * group_size;
            const lightest_pack in_group = lightest_of(m_load.data() + first, group_size);
            m_group_load[group.index] = in_group.load;
            m_group_best[group.index] = static_cast<std::uint32_t>(first + in_group.index);
        }
    }

    void tournament(const ranked_costs& ranked, pack_table& packs) {
        const std::size_t n = ranked.size();
        const std::size_t k = packs.packs();
        std::size_t leaves = 1;
        while (leaves < k) leaves *= 2;
        m_load.assign(leaves, closed);
        for (std::size_t p = 0; p < k; ++p) m_load[p] = 0.0;
        // m_winner[node] is the lightest leaf below node; node 1 is the root, leaf p is node
        // leaves + p. Left subtrees hold lower ids, so on a tie the left one wins.
        m_winner.resize(2 * leaves);
        for (std::size_t p = 0; p < leaves; ++p)
            m_winner[leaves + p] = static_cast<std::uint32_t>(p);
        for (std::size_t node = leaves; node-- > 1;) replay(node);
        for (std::size_t r = 0; r < n; ++r) {
            const std::uint32_t p = m_winner[1];
            place(ranked, packs, r, p, m_load[p]);
            for (std::size_t node = (leaves + p) / 2; node >= 1; node /= 2) replay(node);
        }
    }

    void replay(std::size_t node) noexcept {
        const std::uint32_t left = m_winner[2 * node];
        const std::uint32_t right = m_winner[2 * node + 1];
        m_winner[node] = m_load[right] < m_load[left] ? right : left;
    }

    std::vector<double> m_load;              // per pack (leaf): its load if open, +infinity if full
    std::vector<std::uint32_t> m_winner;     // per node of the winner tree
    std::vector<double> m_group_load;        // grouped_scan: each group's lightest load
    std::vector<std::uint32_t> m_group_best; // grouped_scan: and its pack
};

} // namespace bcl::detail
