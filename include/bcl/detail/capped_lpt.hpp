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
/// A full pack counts as infinitely heavy. Up to 32 packs a linear scan finds the lightest (K
/// compares that compile to conditional moves, O(n K)); above that a winner tree over the packs
/// does, replaying only the path from the chosen pack to the root after each item (O(n log K)).
/// Both make the same choices. Scratch is kept between calls.
class capped_lpt {
public:
    void operator()(const ranked_costs& ranked, pack_table& packs) {
        if (packs.packs() <= linear_scan_limit)
            scan(ranked, packs);
        else
            tournament(ranked, packs);
    }

    /// Sizes the scratch for K packs now, so that a later call allocates nothing.
    void reserve(std::size_t k) {
        std::size_t leaves = 1;
        while (leaves < k) leaves *= 2;
        m_load.reserve(leaves);
        m_winner.reserve(2 * leaves);
    }

private:
    static constexpr std::size_t linear_scan_limit = 32;
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
};

} // namespace bcl::detail
