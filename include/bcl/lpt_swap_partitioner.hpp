#pragma once
// The default partitioner: capped LPT followed by pairwise swap refinement.

#include <bcl/error.hpp>
#include <bcl/lower_bound.hpp>
#include <bcl/partitioner.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace bcl {

/// Capped LPT + swap refinement.
///
/// 1. Sort the items by cost, high to low (ties by position, so the result is deterministic).
/// 2. Capped LPT: each item, largest first, goes to the lightest pack that still has a free slot.
/// 3. Swap refinement: take the heaviest pack; against every other pack, lightest first, look for
///    the pair (one item from each) whose swap lowers the larger of the two packs the most; apply
///    the first pack's best pair and repeat. Stop when no swap helps the heaviest pack, or as soon
///    as the heaviest pack meets pack_lower_bound_sorted: the partition is then provably optimal.
///
/// Each swap strictly lowers the sum of squared pack costs, so refinement terminates; it is also
/// capped at 2n + 2K rounds. Cost: O(n log n) for the sort, O(n log K) for LPT, O(K log K + n) per
/// refinement round (two-pointer pair search over packs kept sorted). Scratch space is kept
/// between calls: after the first call of the largest size it allocates nothing.
/// Throws bcl::error if the shape does not fit the number of items.
class lpt_swap_partitioner {
public:
    partition_summary operator()(std::span<const double> costs, pack_shape shape,
                                 std::span<std::uint32_t> pack_of) {
        const std::size_t n = costs.size();
        check_shape(n, shape, pack_of.size());
        if (n == 0) return {};
        const std::size_t k = shape.packs;
        const std::size_t b = shape.pack_size;

        sort_items(costs);
        const double lower_bound = pack_lower_bound_sorted(m_sorted, shape);

        m_load.assign(k, 0.0);
        m_count.assign(k, 0);
        m_members.resize(k * b);
        assign_lpt(shape, n);
        if (k > 1 && heaviest_pack() > lower_bound) refine(lower_bound, n, b);

        double heaviest = 0.0;
        for (std::size_t p = 0; p < k; ++p) {
            double load = 0.0;
            for (std::size_t s = 0; s < m_count[p]; ++s) {
                const item& it = m_items[m_members[p * b + s]];
                pack_of[it.index] = static_cast<std::uint32_t>(p);
                load += it.cost;
            }
            heaviest = std::max(heaviest, load);
        }
        return {heaviest, lower_bound};
    }

private:
    struct item {
        double cost;
        std::uint32_t index;
    };

    static void check_shape(std::size_t n, pack_shape shape, std::size_t out_size) {
        if (out_size != n)
            throw error("bcl::lpt_swap_partitioner: pack_of has " + std::to_string(out_size) +
                        " slots for " + std::to_string(n) + " costs");
        if (n == 0) return;
        if (shape.packs == 0 || shape.pack_size == 0 ||
            n > shape.packs * shape.pack_size || n <= (shape.packs - 1) * shape.pack_size)
            throw error("bcl::lpt_swap_partitioner: " + std::to_string(n) +
                        " items do not fill " + std::to_string(shape.packs) + " packs of " +
                        std::to_string(shape.pack_size) + " (only the last pack may be short)");
    }

    void sort_items(std::span<const double> costs) {
        m_items.resize(costs.size());
        for (std::size_t i = 0; i < costs.size(); ++i)
            m_items[i] = {costs[i], static_cast<std::uint32_t>(i)};
        std::sort(m_items.begin(), m_items.end(), [](const item& x, const item& y) {
            return x.cost > y.cost || (x.cost == y.cost && x.index < y.index);
        });
        m_sorted.resize(costs.size());
        for (std::size_t i = 0; i < costs.size(); ++i) m_sorted[i] = m_items[i].cost;
    }

    // Largest first to the lightest pack with a free slot; a min-heap on (load, pack id) keeps the
    // choice deterministic when loads tie.
    void assign_lpt(pack_shape shape, std::size_t n) {
        const std::size_t b = shape.pack_size;
        m_heap.clear();
        for (std::size_t p = 0; p < shape.packs; ++p)
            m_heap.emplace_back(0.0, static_cast<std::uint32_t>(p));
        // Already a valid min-heap: all loads are zero and ids ascend.
        constexpr auto heavier = std::greater<>{};
        for (std::size_t r = 0; r < n; ++r) {
            std::pop_heap(m_heap.begin(), m_heap.end(), heavier);
            auto& [load, p] = m_heap.back();
            m_members[p * b + m_count[p]] = static_cast<std::uint32_t>(r);
            ++m_count[p];
            load += m_items[r].cost;
            m_load[p] = load;
            if (m_count[p] < shape.capacity(p, n))
                std::push_heap(m_heap.begin(), m_heap.end(), heavier);
            else
                m_heap.pop_back();
        }
    }

    [[nodiscard]] double heaviest_pack() const noexcept {
        return *std::max_element(m_load.begin(), m_load.end());
    }

    void refine(double lower_bound, std::size_t n, std::size_t b) {
        const std::size_t k = m_load.size();
        const double optimal = lower_bound * (1.0 + 1e-12);
        m_order.resize(k);
        const std::size_t max_rounds = 2 * n + 2 * k;
        for (std::size_t round = 0; round < max_rounds; ++round) {
            const auto h = static_cast<std::size_t>(
                std::max_element(m_load.begin(), m_load.end()) - m_load.begin());
            const double top = m_load[h];
            if (top <= optimal) return;
            for (std::size_t p = 0; p < k; ++p) m_order[p] = static_cast<std::uint32_t>(p);
            std::sort(m_order.begin(), m_order.end(), [this](std::uint32_t x, std::uint32_t y) {
                return m_load[x] < m_load[y] || (m_load[x] == m_load[y] && x < y);
            });
            bool improved = false;
            for (const std::uint32_t p : m_order) {
                const double gap = top - m_load[p];
                if (gap <= top * 1e-12) break; // this pack and all later ones are as heavy as h
                if (try_swap(h, p, gap, b)) {
                    improved = true;
                    break;
                }
            }
            if (!improved) return;
        }
    }

    // Finds the pair (x in pack h, y in pack p) with cost difference d in (0, gap) closest to
    // gap/2, i.e. the swap that lowers max(load h, load p) the most, and applies it. Both member
    // lists are sorted by rank, i.e. by cost high to low, so one two-pointer pass suffices.
    bool try_swap(std::size_t h, std::size_t p, double gap, std::size_t b) {
        std::uint32_t* hm = &m_members[h * b];
        std::uint32_t* pm = &m_members[p * b];
        const std::size_t hn = m_count[h];
        const std::size_t pn = m_count[p];
        if (hn == 0 || pn == 0) return false;
        const double half = gap / 2;
        double best_gain = gap * 1e-12;
        std::size_t best_h = hn;
        std::size_t best_p = pn;
        const auto consider = [&](std::size_t i, double x, std::size_t c) {
            const double d = x - m_items[pm[c]].cost;
            const double gain = std::min(d, gap - d);
            if (d > 0 && gain > best_gain) {
                best_gain = gain;
                best_h = i;
                best_p = c;
            }
        };
        std::size_t j = pn - 1; // index into pm, moving from cheapest toward dearest
        for (std::size_t i = hn; i-- > 0;) {
            const double x = m_items[hm[i]].cost;
            const double want = x - half;
            while (j > 0 && m_items[pm[j - 1]].cost <= want) --j;
            // pm[j] is the dearest item costing at most `want` (or the cheapest of all), pm[j-1]
            // the cheapest costing more: the best partner for x is one of the two.
            consider(i, x, j);
            if (j > 0) consider(i, x, j - 1);
        }
        if (best_h == hn) return false;
        const std::uint32_t from_h = hm[best_h];
        const std::uint32_t from_p = pm[best_p];
        const double d = m_items[from_h].cost - m_items[from_p].cost;
        m_load[h] -= d;
        m_load[p] += d;
        replace_sorted(hm, hn, best_h, from_p);
        replace_sorted(pm, pn, best_p, from_h);
        return true;
    }

    // Puts `rank` at position `at` of an ascending list of ranks and restores the order.
    static void replace_sorted(std::uint32_t* list, std::size_t size, std::size_t at,
                               std::uint32_t rank) noexcept {
        list[at] = rank;
        while (at > 0 && list[at - 1] > list[at]) {
            std::swap(list[at - 1], list[at]);
            --at;
        }
        while (at + 1 < size && list[at + 1] < list[at]) {
            std::swap(list[at + 1], list[at]);
            ++at;
        }
    }

    std::vector<item> m_items;           // sorted by cost, high to low; a rank is an index here
    std::vector<double> m_sorted;        // m_items' costs, for the lower bound
    std::vector<double> m_load;          // cost per pack
    std::vector<std::uint32_t> m_count;  // items per pack
    std::vector<std::uint32_t> m_members; // ranks of pack p at [p*B, p*B + count[p]), ascending
    std::vector<std::pair<double, std::uint32_t>> m_heap;
    std::vector<std::uint32_t> m_order; // packs by load, for one refinement round
};

} // namespace bcl
