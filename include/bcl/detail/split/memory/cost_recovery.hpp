#pragma once
// Internal: step 3 of a memory repair, swaps that win back cost balance within the budget.

#include <bcl/detail/config.hpp>

#include <bcl/detail/split/memory/memory_repair_state.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <span>
#include <vector>

namespace bcl::detail {

/// Wins back cost balance, once every pack fits the budget, by swaps that keep every pack within
/// it: the costliest pack against the others, cheapest first, taking the swap that comes closest
/// to halving their cost gap (binary searches in the partner's items by cost and by memory).
/// Every swap lowers the costlier of its two packs, so the loop cannot cycle; it stops once the
/// costliest pack is no costlier than a target (the partition given to the repair: there is no
/// point in beating it), when no swap helps, after 2n + 2K swaps or once the state's work count
/// passes its limit. O(B (log B + cost_scan_width)) per pair of packs tried.
class cost_recovery {
public:
    /// Sizes the scratch space for rounds of up to `items` items in up to `packs` packs.
    void reserve(std::size_t items, std::size_t packs) {
        m_sorted.reserve(items);
        for (auto* v : {&m_order, &m_order_pos}) v->reserve(packs + 1);
    }

    /// Improves the cost balance of the partition in `state`, every pack of which must be within
    /// budget; they all stay so (by the running sums).
    void run(memory_repair_state& state, double target_cost) {
        const std::size_t n = state.items();
        const std::size_t k = state.packs();
        m_order.resize(k);
        for (std::size_t p = 0; p < k; ++p) m_order[p] = static_cast<std::uint32_t>(p);
        std::sort(m_order.begin(), m_order.end(),
                  [&state](std::uint32_t a, std::uint32_t b) { return cheaper(state, a, b); });
        m_order_pos.resize(k);
        for (std::size_t i = 0; i < k; ++i) m_order_pos[m_order[i]] = static_cast<std::uint32_t>(i);
        state.reset_work();
        for (std::size_t round = 0; round < 2 * n + 2 * k && !state.out_of_work(); ++round) {
            const std::uint32_t h = m_order[k - 1];
            if (state.pack_cost(h) <= target_cost) return; // as balanced as the partition given
            bool moved = false;
            for (std::size_t i = 0; i + 1 < k && !state.out_of_work(); ++i) {
                const std::uint32_t p = m_order[i];
                if (!(state.pack_cost(h) > state.pack_cost(p))) break;
                const repair_swap c = best_swap(state, h, p);
                if (c.x == repair_swap::none) continue;
                state.exchange(c.x, c.y);
                reorder(state, h);
                reorder(state, p);
                moved = true;
                break;
            }
            if (!moved) return;
        }
    }

private:
    // Items compared on each side of the ideal partner.
    static constexpr std::size_t cost_scan_width = 8;

    [[nodiscard]] static bool cheaper(const memory_repair_state& state, std::uint32_t a,
                                      std::uint32_t b) noexcept {
        return state.pack_cost(a) < state.pack_cost(b) ||
               (state.pack_cost(a) == state.pack_cost(b) && a < b);
    }

    // Moves pack q to its place in m_order after its cost changed.
    void reorder(memory_repair_state& state, std::uint32_t q) noexcept {
        const std::size_t k = state.packs();
        std::size_t i = m_order_pos[q];
        for (; i > 0 && cheaper(state, q, m_order[i - 1]); --i) {
            m_order[i] = m_order[i - 1];
            m_order_pos[m_order[i]] = static_cast<std::uint32_t>(i);
        }
        for (; i + 1 < k && cheaper(state, m_order[i + 1], q); ++i) {
            m_order[i] = m_order[i + 1];
            m_order_pos[m_order[i]] = static_cast<std::uint32_t>(i);
        }
        m_order[i] = q;
        m_order_pos[q] = static_cast<std::uint32_t>(i);
        state.add_work(1);
    }

    // The swap of an item of h for one of p that keeps both within budget and brings their costs
    // closest together, if it lowers the costlier of the two.
    repair_swap best_swap(memory_repair_state& s, std::uint32_t h, std::uint32_t p) {
        const std::span<const std::uint32_t> partner = s.members(p);
        m_sorted.assign(partner.begin(), partner.end());
        std::sort(m_sorted.begin(), m_sorted.end(), [&s](std::uint32_t a, std::uint32_t b) {
            return s.cost(a) < s.cost(b) || (s.cost(a) == s.cost(b) && a < b);
        });
        s.add_work(m_sorted.size() * 4);
        const double budget = s.budget();
        const double top = s.pack_cost(h);
        const double gap = top - s.pack_cost(p);
        const double half = gap / 2;
        repair_swap best;
        double best_distance = std::numeric_limits<double>::infinity();
        const auto consider = [&](std::size_t x, std::size_t y, double moved) {
            const double freed = s.memory(x) - s.memory(y);
            if (s.pack_memory(h) - freed > budget || s.pack_memory(p) + freed > budget)
                return false;
            const double distance = std::abs(moved - half);
            if (moved > 0.0 && moved < gap && distance < best_distance &&
                std::max(top - moved, s.pack_cost(p) + moved) < top) {
                best_distance = distance;
                best = {x, y};
            }
            return true;
        };
        const auto sorted_begin = m_sorted.begin();
        const auto sorted_end = m_sorted.end();
        for (const std::size_t x : s.members(h)) {
            const double cx = s.cost(x);
            const double ideal = cx - half; // the partner cost that would even the two out
            const auto at = std::partition_point(
                sorted_begin, sorted_end, [&](std::uint32_t y) { return s.cost(y) < ideal; });
            // Upward: partners dearer than ideal move less than half the gap.
            auto up = at;
            for (std::size_t step = 0; up != sorted_end && step < cost_scan_width; ++up, ++step) {
                const double moved = cx - s.cost(*up);
                if (!(moved > 0.0) || std::abs(moved - half) >= best_distance) break;
                if (consider(x, *up, moved)) break;
            }
            // Downward: cheaper partners move more than half the gap.
            auto down = at;
            for (std::size_t step = 0; down != sorted_begin && step < cost_scan_width; ++step) {
                --down;
                const double moved = cx - s.cost(*down);
                if (!(moved < gap) || std::abs(moved - half) >= best_distance) break;
                if (consider(x, *down, moved)) break;
            }
            // The partners whose memory keeps both packs within budget, from either end of that
            // window: under a tight budget the cost-ideal ones above rarely fit.
            const double most = s.memory(x) + (budget - s.pack_memory(h));
            const double least = s.memory(x) - (budget - s.pack_memory(p));
            auto lo = std::partition_point(partner.begin(), partner.end(),
                                           [&](std::uint32_t y) { return s.memory(y) > most; });
            auto hi = std::partition_point(lo, partner.end(),
                                           [&](std::uint32_t y) { return s.memory(y) >= least; });
            for (std::size_t step = 0; hi != lo && step < cost_scan_width; ++step) {
                --hi;
                consider(x, *hi, cx - s.cost(*hi));
            }
            for (std::size_t step = 0; lo != hi && step < cost_scan_width; ++step, ++lo)
                consider(x, *lo, cx - s.cost(*lo));
            s.add_work(4 * cost_scan_width);
        }
        return best;
    }

    std::vector<std::uint32_t> m_order; // packs by cost, ascending
    std::vector<std::uint32_t> m_order_pos;
    std::vector<std::uint32_t> m_sorted; // the partner's members by cost
};

} // namespace bcl::detail
