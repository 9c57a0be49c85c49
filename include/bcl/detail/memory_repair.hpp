#pragma once
// Makes a cost-balanced partition fit a per-pack memory budget, giving up as little cost balance
// as it can.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include <bcl/partitioner.hpp>

namespace bcl::detail {

/// Repairs `pack_of` so that every pack's total memory is at most `budget`.
///
/// While some pack is over budget, take the one with the most memory and swap one of its items
/// for a smaller one of another pack that stays within budget: a swap that brings the pack within
/// budget if there is one (the one that raises the larger of the two packs' costs the least),
/// otherwise the one that frees the most memory. If no swap helps, restart from a memory-first
/// assignment (largest memory first to the pack with the least memory and a free slot) and repair
/// that. Pack sizes never change. O(B * n) per swap, at most 4n swaps; allocates nothing once warm.
class memory_repair {
public:
    /// Returns the largest pack memory after the repair: at most `budget` unless no assignment
    /// was found that fits (the caller reports that as an error).
    double operator()(std::span<const double> costs, std::span<const double> memory,
                      pack_shape shape, std::span<std::uint32_t> pack_of, double budget) {
        sum_packs(costs, memory, shape.packs, pack_of);
        if (swap_until_fits(costs, memory, pack_of, budget)) return heaviest_memory();
        assign_by_memory(memory, shape, pack_of);
        sum_packs(costs, memory, shape.packs, pack_of);
        swap_until_fits(costs, memory, pack_of, budget);
        return heaviest_memory();
    }

private:
    void sum_packs(std::span<const double> costs, std::span<const double> memory, std::size_t packs,
                   std::span<const std::uint32_t> pack_of) {
        m_cost.assign(packs, 0.0);
        m_memory.assign(packs, 0.0);
        for (std::size_t i = 0; i < costs.size(); ++i) {
            m_cost[pack_of[i]] += costs[i];
            m_memory[pack_of[i]] += memory[i];
        }
    }

    [[nodiscard]] double heaviest_memory() const {
        return m_memory.empty() ? 0.0 : *std::max_element(m_memory.begin(), m_memory.end());
    }

    bool swap_until_fits(std::span<const double> costs, std::span<const double> memory,
                         std::span<std::uint32_t> pack_of, double budget) {
        const std::size_t n = costs.size();
        for (std::size_t round = 0; round < 4 * n + 4; ++round) {
            const auto h = static_cast<std::uint32_t>(
                std::max_element(m_memory.begin(), m_memory.end()) - m_memory.begin());
            if (m_memory[h] <= budget) return true;
            const double need = m_memory[h] - budget;
            std::size_t best_x = n;
            std::size_t best_y = n;
            bool best_reaches = false;
            double best_freed = 0.0;
            double best_damage = 0.0;
            for (std::size_t x = 0; x < n; ++x) {
                if (pack_of[x] != h) continue;
                for (std::size_t y = 0; y < n; ++y) {
                    const std::uint32_t p = pack_of[y];
                    if (p == h) continue;
                    const double freed = memory[x] - memory[y];
                    if (freed <= 0.0 || m_memory[p] + freed > budget) continue;
                    const double moved = costs[x] - costs[y];
                    const double damage = std::max(m_cost[h] - moved, m_cost[p] + moved);
                    const bool reaches = freed >= need;
                    const bool better =
                        best_x == n || (reaches && !best_reaches) ||
                        (reaches == best_reaches &&
                         (reaches ? damage < best_damage
                                  : freed > best_freed || (freed == best_freed && damage < best_damage)));
                    if (!better) continue;
                    best_x = x;
                    best_y = y;
                    best_reaches = reaches;
                    best_freed = freed;
                    best_damage = damage;
                }
            }
            if (best_x == n) return false;
            const std::uint32_t p = pack_of[best_y];
            const double moved = costs[best_x] - costs[best_y];
            m_cost[h] -= moved;
            m_cost[p] += moved;
            m_memory[h] -= best_freed;
            m_memory[p] += best_freed;
            std::swap(pack_of[best_x], pack_of[best_y]);
        }
        return heaviest_memory() <= budget;
    }

    // Largest memory first to the pack with the least memory that has a free slot.
    void assign_by_memory(std::span<const double> memory, pack_shape shape,
                          std::span<std::uint32_t> pack_of) {
        const std::size_t n = memory.size();
        m_order.resize(n);
        for (std::size_t i = 0; i < n; ++i) m_order[i] = static_cast<std::uint32_t>(i);
        std::sort(m_order.begin(), m_order.end(), [&memory](std::uint32_t x, std::uint32_t y) {
            return memory[x] > memory[y] || (memory[x] == memory[y] && x < y);
        });
        m_memory.assign(shape.packs, 0.0);
        m_count.assign(shape.packs, 0);
        for (const std::uint32_t item : m_order) {
            std::size_t best = shape.packs;
            for (std::size_t p = 0; p < shape.packs; ++p)
                if (m_count[p] < shape.capacity(p, n) && (best == shape.packs || m_memory[p] < m_memory[best]))
                    best = p;
            pack_of[item] = static_cast<std::uint32_t>(best);
            m_memory[best] += memory[item];
            ++m_count[best];
        }
    }

    std::vector<double> m_cost;
    std::vector<double> m_memory;
    std::vector<std::size_t> m_count;
    std::vector<std::uint32_t> m_order;
};

} // namespace bcl::detail
