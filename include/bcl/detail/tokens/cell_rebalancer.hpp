#pragma once
// Internal: a packing of records into cells of at most T tokens made cheaper at its dearest cell
// by moving or swapping records with the cheapest cells, within the token budget: the balance a
// tight packing (first fit, the search) gives up while it fits tokens.

#include <bcl/detail/config.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace bcl::detail::tokens {

/// Rounds of: the dearest cell gives a record to one of the `partners` cheapest cells, or swaps
/// one for a cheaper one of theirs, whichever lowers the dearer of the two cells the most,
/// keeping both within the token capacity and neither empty; until no move or swap lowers the
/// dearest cell, or `rounds` rounds. A record that `closing` marks stays where it is. Ties to
/// the lower record and cell: the same result on every platform. O(C + (size of the dearest
/// cell) * (records of the partners)) a round; the scratch is kept.
class cell_rebalancer {
public:
    static constexpr std::size_t partners = 8;

    /// Improves `cell_of` (by record, each record's cell among `cells`) in place.
    void rebalance(std::span<std::uint32_t> cell_of, std::span<const std::uint64_t> tokens,
                   std::span<const std::uint64_t> cost, std::size_t cells, std::uint64_t capacity,
                   std::span<const std::uint8_t> closing, std::size_t rounds) {
        const std::size_t n = cell_of.size();
        m_load.assign(cells, 0);
        m_used.assign(cells, 0);
        m_count.assign(cells, 0);
        m_closed.assign(cells, 0);
        for (std::size_t r = 0; r < n; ++r) {
            m_load[cell_of[r]] += cost[r];
            m_used[cell_of[r]] += tokens[r];
            ++m_count[cell_of[r]];
            if (!closing.empty() && closing[r] != 0) m_closed[cell_of[r]] = 1;
        }
        members(cell_of, cells);
        for (std::size_t round = 0; round < rounds; ++round) {
            std::size_t dearest = 0;
            for (std::size_t c = 1; c < cells; ++c)
                if (m_load[c] > m_load[dearest]) dearest = c;
            if (m_closed[dearest] != 0) return; // a record alone above T: nothing to move
            cheapest(cells, dearest);
            if (!improve(cell_of, tokens, cost, capacity, dearest)) return;
        }
    }

private:
    struct change {
        std::uint64_t top;  // the dearer of the two cells after it
        std::uint32_t give; // the record that leaves the dearest cell
        std::uint32_t take; // the record that comes back (none: a move)
        std::uint32_t to;   // the partner cell
    };
    static constexpr std::uint32_t none = ~std::uint32_t{0};

    // m_first[c] and m_next: each cell's records as a list, rebuilt from cell_of.
    void members(std::span<const std::uint32_t> cell_of, std::size_t cells) {
        m_first.assign(cells, none);
        m_next.assign(cell_of.size(), none);
        for (std::size_t r = cell_of.size(); r-- > 0;) {
            m_next[r] = m_first[cell_of[r]];
            m_first[cell_of[r]] = static_cast<std::uint32_t>(r);
        }
    }

    // m_partners: the cheapest open cells other than `dearest`, cheapest first.
    void cheapest(std::size_t cells, std::size_t dearest) {
        m_partners.clear();
        for (std::size_t c = 0; c < cells; ++c)
            if (c != dearest && m_closed[c] == 0)
                m_partners.push_back(static_cast<std::uint32_t>(c));
        const auto cheaper = [this](std::uint32_t a, std::uint32_t b) {
            return m_load[a] < m_load[b] || (m_load[a] == m_load[b] && a < b);
        };
        const std::size_t keep = std::min(partners, m_partners.size());
        std::partial_sort(m_partners.begin(),
                          m_partners.begin() + static_cast<std::ptrdiff_t>(keep), m_partners.end(),
                          cheaper);
        m_partners.resize(keep);
    }

    // The best move or swap between `dearest` and a partner; applied if it lowers the dearest.
    bool improve(std::span<std::uint32_t> cell_of, std::span<const std::uint64_t> tokens,
                 std::span<const std::uint64_t> cost, std::uint64_t capacity, std::size_t dearest) {
        const std::uint64_t top = m_load[dearest];
        change best{top, none, none, none};
        for (std::uint32_t g = m_first[dearest]; g != none; g = m_next[g]) {
            for (const std::uint32_t p : m_partners) {
                // A move, if the dearest keeps a record.
                if (m_count[dearest] > 1 && m_used[p] + tokens[g] <= capacity) {
                    const std::uint64_t after = std::max(top - cost[g], m_load[p] + cost[g]);
                    if (after < best.top) best = {after, g, none, p};
                }
                for (std::uint32_t t = m_first[p]; t != none; t = m_next[t]) {
                    if (cost[t] >= cost[g]) continue;
                    if (m_used[dearest] - tokens[g] + tokens[t] > capacity ||
                        m_used[p] - tokens[t] + tokens[g] > capacity)
                        continue;
                    const std::uint64_t after =
                        std::max(top - cost[g] + cost[t], m_load[p] - cost[t] + cost[g]);
                    if (after < best.top) best = {after, g, t, p};
                }
            }
        }
        if (best.give == none) return false;
        shift(cell_of, tokens, cost, best.give, dearest, best.to);
        if (best.take != none) shift(cell_of, tokens, cost, best.take, best.to, dearest);
        return true;
    }

    void shift(std::span<std::uint32_t> cell_of, std::span<const std::uint64_t> tokens,
               std::span<const std::uint64_t> cost, std::uint32_t r, std::size_t from,
               std::size_t to) {
        m_load[from] -= cost[r];
        m_used[from] -= tokens[r];
        --m_count[from];
        m_load[to] += cost[r];
        m_used[to] += tokens[r];
        ++m_count[to];
        cell_of[r] = static_cast<std::uint32_t>(to);
        // Unlink from `from`'s list, link at the head of `to`'s.
        if (m_first[from] == r) {
            m_first[from] = m_next[r];
        } else {
            std::uint32_t at = m_first[from];
            while (m_next[at] != r) at = m_next[at];
            m_next[at] = m_next[r];
        }
        m_next[r] = m_first[to];
        m_first[to] = r;
    }

    std::vector<std::uint64_t> m_load;  // by cell: its cost
    std::vector<std::uint64_t> m_used;  // by cell: its tokens
    std::vector<std::size_t> m_count;   // by cell: its records
    std::vector<std::uint8_t> m_closed; // by cell: holds a record alone above T
    std::vector<std::uint32_t> m_first; // by cell: its first record
    std::vector<std::uint32_t> m_next;  // by record: the next of its cell
    std::vector<std::uint32_t> m_partners;
};

} // namespace bcl::detail::tokens
