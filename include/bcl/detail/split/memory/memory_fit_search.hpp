#pragma once
// Internal: step 4 of a memory repair, a depth-first search for a split that fits the budget.

#include <bcl/detail/config.hpp>

#include <bcl/detail/split/memory/memory_repair_state.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace bcl::detail {

/// Searches depth first for a split of a round's items into its pack shape that keeps every
/// pack's memory within budget, ignoring cost: the last resort of a memory repair, when no swap
/// from a cost-balanced or memory-first start fits.
///
/// The items go by rank (largest memory first), each into every pack with a free slot and room
/// for it and for the smallest items that could fill its other free slots; of packs in the same
/// state (same memory, same free slots) only the first is tried. Rounds of at most exact_items
/// items are searched to the end, so there it fails only when no split fits: there are at most
/// 15400 ways to split 12 items into packs of fixed sizes, a few hundred thousand steps at most.
/// Larger ones give up once the state's work count passes its limit. Iterative, so the depth
/// costs no stack.
class memory_fit_search {
public:
    /// Rounds of up to this many items are searched exhaustively: small enough that the search is
    /// always short.
    static constexpr std::size_t exact_items = 12;

    /// Sizes the scratch space for rounds of up to `items` items in up to `packs` packs.
    void reserve(std::size_t items, std::size_t packs) {
        m_pack.reserve(items);
        m_undo.reserve(items);
        m_smallest.reserve(items + 1);
        m_fill.reserve(packs);
        m_count.reserve(packs);
    }

    /// Searches for a split of the round in `state` (its ranking, shape and budget; not its
    /// partition). On success writes it by item to `pack_of` (one slot per item) and returns
    /// true; otherwise leaves `pack_of` as it was.
    bool run(memory_repair_state& state, std::span<std::uint32_t> pack_of) {
        const std::size_t n = state.items();
        const std::size_t k = state.packs();
        const pack_shape shape = state.shape();
        const double budget = state.budget();
        m_fill.assign(k, 0.0);
        m_count.assign(k, 0);
        m_pack.resize(n);
        m_smallest.assign(n + 1, 0.0); // m_smallest[f]: the f smallest memories together
        for (std::size_t f = 1; f <= n; ++f)
            m_smallest[f] = m_smallest[f - 1] + state.memory(n - f);
        m_undo.resize(n);
        state.reset_work();
        // The bound on the smallest filling sums in another order than the pack does: loosened
        // by a hair, so rounding never cuts a branch that fits.
        const double loose_budget = budget + 1e-12 * std::abs(budget);
        std::size_t r = 0;
        std::size_t next = 0; // the first pack item r may still try
        while (r < n) {
            if (n > exact_items && state.out_of_work()) return false;
            const double m = state.memory(r);
            std::size_t p = next;
            for (; p < k; ++p) {
                const std::size_t free = shape.capacity(p, n) - m_count[p];
                state.add_work(1);
                if (free == 0 || m_fill[p] + m > budget ||
                    m_fill[p] + m + m_smallest[free - 1] > loose_budget)
                    continue;
                bool twin = false;
                for (std::size_t q = 0; q < p && !twin; ++q)
                    twin = m_fill[q] == m_fill[p] && shape.capacity(q, n) - m_count[q] == free;
                state.add_work(p);
                if (!twin) break;
            }
            if (p < k) { // place item r into pack p and go deeper
                m_undo[r] = m_fill[p];
                m_fill[p] += m;
                ++m_count[p];
                m_pack[r] = static_cast<std::uint32_t>(p);
                ++r;
                next = 0;
                continue;
            }
            if (r == 0) return false; // every branch tried
            --r;                      // take the previous item back out and try its next pack
            const std::uint32_t q = m_pack[r];
            m_fill[q] = m_undo[r]; // restored exactly, not by subtracting
            --m_count[q];
            next = q + 1;
        }
        for (std::size_t i = 0; i < n; ++i) pack_of[state.position(i)] = m_pack[i];
        return true;
    }

private:
    std::vector<double> m_fill;         // memory placed in each pack
    std::vector<std::uint32_t> m_count; // items placed in each pack
    std::vector<std::uint32_t> m_pack;  // pack by rank, for the items placed
    std::vector<double> m_smallest;     // sums of the smallest memories
    std::vector<double> m_undo;         // each placed item's pack memory before it
};

} // namespace bcl::detail
