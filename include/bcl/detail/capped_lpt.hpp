#pragma once
// Internal: capped LPT on a ranked window, shared by lpt_partitioner and lpt_swap_partitioner.

#include <bcl/detail/pack_table.hpp>
#include <bcl/detail/ranked_costs.hpp>

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
/// overtook the other in timing (K = 16-32 and 256-512 on the benchmark machine). All make the
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

    void scan(const ranked_costs& ranked, pack_table& packs) {
        const std::size_t n = ranked.size();
        const std::size_t k = packs.packs();
        m_load.assign(k, 0.0);
        for (std::size_t r = 0; r < n; ++r) {
            std::size_t best = 0;
            double lightest = m_load[0];
            for (std::size_t p = 1; p < k; ++p) { // written to compile to conditional moves
                const bool lighter = m_load[p] < lightest;
                lightest = lighter ? m_load[p] : lightest;
                best = lighter ? p : best;
            }
            const double cost = ranked.cost(r);
            packs.append(best, static_cast<std::uint32_t>(r), cost);
            // lightest + cost is the pack's new load, bit for bit, without reading it back.
            m_load[best] = packs.count(best) < packs.capacity(best) ? lightest + cost : closed;
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
            std::size_t group = 0;
            double lightest = m_group_load[0];
            for (std::size_t g = 1; g < groups; ++g) { // conditional moves, as in scan()
                const bool lighter = m_group_load[g] < lightest;
                lightest = lighter ? m_group_load[g] : lightest;
                group = lighter ? g : group;
            }
            const std::size_t best = m_group_best[group];
            const double cost = ranked.cost(r);
            packs.append(best, static_cast<std::uint32_t>(r), cost);
            m_load[best] = packs.count(best) < packs.capacity(best) ? lightest + cost : closed;
            const double* load = m_load.data() + group * group_size;
            std::size_t in_group = 0;
            double group_lightest = load[0];
            for (std::size_t p = 1; p < group_size; ++p) {
                const bool lighter = load[p] < group_lightest;
                group_lightest = lighter ? load[p] : group_lightest;
                in_group = lighter ? p : in_group;
            }
            m_group_load[group] = group_lightest;
            m_group_best[group] = static_cast<std::uint32_t>(group * group_size + in_group);
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
            packs.append(p, static_cast<std::uint32_t>(r), ranked.cost(r));
            m_load[p] = packs.count(p) < packs.capacity(p) ? packs.load(p) : closed;
            for (std::size_t node = (leaves + p) / 2; node >= 1; node /= 2) replay(node);
        }
    }

    void replay(std::size_t node) noexcept {
        const std::uint32_t left = m_winner[2 * node];
        const std::uint32_t right = m_winner[2 * node + 1];
        m_winner[node] = m_load[right] < m_load[left] ? right : left;
    }

    std::vector<double> m_load;          // per pack (leaf): its load if open, +infinity if full
    std::vector<std::uint32_t> m_winner; // per node of the winner tree
    std::vector<double> m_group_load;        // grouped_scan: each group's lightest load
    std::vector<std::uint32_t> m_group_best; // grouped_scan: and its pack
};

} // namespace bcl::detail
