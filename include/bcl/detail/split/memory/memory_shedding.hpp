#pragma once
// Internal: step 1 of a memory repair, swaps that shed memory from the packs over budget.

#include <bcl/detail/config.hpp>

#include <bcl/detail/split/memory/memory_repair_state.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace bcl::detail {

/// Sheds memory from the packs over budget by swaps that keep the partner pack within budget,
/// so that a budget that is rarely hit costs a few swaps and little cost balance.
///
/// The packs over budget wait in a heap, the one with the most memory first. Each of its items x
/// looks for a partner y, from another pack that stays within budget after the swap, among at
/// most scan_width items just below memory(x) - excess in the ranking (one binary search) and in
/// the pack with the most room (a winner tree over the packs; two binary searches in it). A swap
/// that brings the pack within budget beats one that does not; among those, the one that raises
/// the larger of the two packs' costs least wins; otherwise the one that frees the most memory.
/// O(B (log n + scan_width)) per swap, at most 4K + 4 swaps, and it stops once the state's work
/// count passes its limit.
class memory_shedding {
public:
    /// Sizes the scratch space for up to `packs` packs.
    void reserve(std::size_t packs) {
        m_over.reserve(packs + 1);
        m_tree.reserve(2 * std::bit_ceil(packs));
    }

    /// Sheds memory from the partition loaded in `state`. Returns whether every pack ended within
    /// budget (by the running sums); false when it got stuck or ran out of work.
    bool run(memory_repair_state& state) {
        const std::size_t k = state.packs();
        const double budget = state.budget();
        build_tree(state);
        m_over.clear();
        for (std::size_t p = 0; p < k; ++p)
            if (state.pack_memory(p) > budget) m_over.push_back(static_cast<std::uint32_t>(p));
        const auto less_memory = [&state](std::uint32_t a, std::uint32_t b) {
            return state.pack_memory(a) < state.pack_memory(b) ||
                   (state.pack_memory(a) == state.pack_memory(b) && a > b);
        };
        std::make_heap(m_over.begin(), m_over.end(), less_memory);
        for (std::size_t swaps = 0; !m_over.empty(); ++swaps) {
            if (swaps > 4 * k + 4 || state.out_of_work()) return false;
            std::pop_heap(m_over.begin(), m_over.end(), less_memory);
            const std::uint32_t h = m_over.back();
            m_over.pop_back();
            const repair_swap c = best_swap(state, h);
            if (c.x == repair_swap::none) return false;
            const std::uint32_t p = state.pack(c.y);
            state.exchange(c.x, c.y);
            update_tree(state, h);
            update_tree(state, p);
            if (state.pack_memory(h) > budget) {
                m_over.push_back(h);
                std::push_heap(m_over.begin(), m_over.end(), less_memory);
            }
        }
        return true;
    }

private:
    // Candidates scanned in the ranking per item of the pack being shed: enough to see past a few
    // partners in packs without room, few enough to keep a swap O(B).
    static constexpr std::size_t scan_width = 16;

    // The best swap of an item of pack h, which is over budget, for one of another pack.
    repair_swap best_swap(memory_repair_state& s, std::uint32_t h) const {
        repair_swap best;
        const std::uint32_t roomiest = m_tree.empty() ? h : m_tree[1];
        if (roomiest == h) return best;
        const double most_room = s.budget() - s.pack_memory(roomiest);
        if (!(most_room > 0.0)) return best;
        const double need = s.pack_memory(h) - s.budget();
        const std::span<const double> desc = s.memories();
        const auto consider = [&](std::size_t x, std::size_t y) {
            const std::uint32_t p = s.pack(y);
            const double freed = s.memory(x) - s.memory(y);
            if (!(freed > 0.0) || s.pack_memory(p) + freed > s.budget()) return;
            const double moved = s.cost(x) - s.cost(y);
            const double damage = std::max(s.pack_cost(h) - moved, s.pack_cost(p) + moved);
            const bool reaches = freed >= need;
            const bool better =
                best.x == repair_swap::none || (reaches && !best.reaches) ||
                (reaches == best.reaches &&
                 (reaches ? damage < best.damage
                          : freed > best.freed || (freed == best.freed && damage < best.damage)));
            if (better) best = {x, y, reaches, freed, damage};
        };
        const std::span<const std::uint32_t> room = s.members(roomiest);
        for (const std::size_t x : s.members(h)) {
            // A partner of at most `target` brings h within budget; one below `lowest` fits
            // no pack.
            const double target = s.memory(x) - need;
            const double lowest = s.memory(x) - most_room;
            // (a) The items just below the target, in whatever pack they are.
            if (target >= lowest) {
                auto r = static_cast<std::size_t>(
                    std::partition_point(desc.begin(), desc.end(),
                                         [target](double v) { return v > target; }) -
                    desc.begin());
                for (const std::size_t last = std::min(s.items(), r + scan_width); r < last; ++r) {
                    if (desc[r] < lowest) break;
                    if (s.pack(r) != h) consider(x, r);
                }
            }
            // (b) The pack with the most room: its largest item at most the target, else its
            // smallest that still fits (the most memory it can take).
            const auto at = std::partition_point(
                room.begin(), room.end(), [&](std::uint32_t y) { return s.memory(y) > target; });
            if (at != room.end()) consider(x, *at);
            const auto fits = std::partition_point(
                room.begin(), room.end(), [&](std::uint32_t y) { return s.memory(y) >= lowest; });
            if (fits != room.begin()) consider(x, *(fits - 1));
            s.add_work(2 * scan_width);
        }
        return best;
    }

    // A winner tree over the packs: m_tree[1] is the pack with the least memory (ties to the
    // lowest id); leaf p is node leaves + p.
    void build_tree(const memory_repair_state& state) {
        const std::size_t k = state.packs();
        m_leaves = std::bit_ceil(k);
        m_tree.resize(2 * m_leaves);
        for (std::size_t p = 0; p < m_leaves; ++p)
            m_tree[m_leaves + p] = static_cast<std::uint32_t>(std::min(p, k - 1));
        for (std::size_t node = m_leaves; node-- > 1;) replay(state, node);
    }

    void update_tree(const memory_repair_state& state, std::uint32_t p) noexcept {
        for (std::size_t node = (m_leaves + p) / 2; node >= 1; node /= 2) replay(state, node);
    }

    void replay(const memory_repair_state& state, std::size_t node) noexcept {
        const std::uint32_t left = m_tree[2 * node];
        const std::uint32_t right = m_tree[2 * node + 1];
        m_tree[node] = state.pack_memory(right) < state.pack_memory(left) ? right : left;
    }

    std::vector<std::uint32_t> m_over; // packs over budget, a heap by memory
    std::vector<std::uint32_t> m_tree; // winner tree, least memory
    std::size_t m_leaves = 1;
};

} // namespace bcl::detail
