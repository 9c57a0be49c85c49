#pragma once
// Internal: equal-size groups by balanced Karmarkar-Karp on integer costs, the way verl balances
// a global batch across ranks: a candidate plan for a window of one step, and for a held batch.

#include <bcl/detail/config.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace bcl::detail::plan {

/// Splits n records (n a multiple of k) into k groups of n / k by largest differencing, as
/// verl's balance_batch does (get_seqlen_balanced_partitions with equal_size): the records,
/// sorted by (cost, index) ascending, are cut into runs of k, each run a state of k one-record
/// groups, heaviest first (ties: the higher index first); the two states of largest spread
/// (heaviest group minus lightest; ties: the state made first) merge, the i-th heaviest group of
/// the first with the i-th lightest of the second, and the merged groups are sorted heaviest
/// first (ties keep their order), until one state is left. Every comparison is on integers, so
/// the groups are the same on every platform.
///
/// A group is a linked list of records, so a merge is O(k log k) and nothing is copied.
/// O(n log n) in all; the scratch is kept, so once it has split its largest input it allocates
/// nothing.
class kk_groups {
public:
    /// Sizes the scratch for n records now.
    void reserve(std::size_t n) {
        m_order.reserve(n);
        m_next.reserve(n);
        m_group.reserve(n);
        m_heap.reserve(n);
    }

    /// Groups `cost` (by record index) into k groups, heaviest first: then members(g) lists
    /// group g's records in ascending index, and load(g) is its cost.
    void split(std::span<const std::uint64_t> cost, std::size_t k) {
        const std::size_t n = cost.size();
        m_k = k;
        const std::size_t states = k == 0 ? 0 : n / k;
        m_order.resize(n);
        for (std::size_t i = 0; i < n; ++i) m_order[i] = static_cast<std::uint32_t>(i);
        std::sort(m_order.begin(), m_order.end(), [&](std::uint32_t a, std::uint32_t b) {
            return cost[a] < cost[b] || (cost[a] == cost[b] && a < b);
        });
        m_next.assign(n, none);
        m_group.resize(states * k);
        m_heap.clear();
        for (std::size_t s = 0; s < states; ++s) {
            for (std::size_t g = 0; g < k; ++g) {
                // Heaviest first: a run's last record is its dearest (the higher index on a tie).
                const std::uint32_t r = m_order[s * k + (k - 1 - g)];
                m_group[s * k + g] = {cost[r], r, r, 0};
            }
            push(s, s);
        }
        std::size_t made = states;
        while (m_heap.size() > 1) {
            const std::size_t a = pop();
            const std::size_t b = pop();
            part* ga = &m_group[a * k];
            const part* gb = &m_group[b * k];
            for (std::size_t g = 0; g < k; ++g) {
                const part& other = gb[k - 1 - g];
                ga[g].sum += other.sum;
                m_next[ga[g].tail] = other.head;
                ga[g].tail = other.tail;
                ga[g].before_sort = static_cast<std::uint32_t>(g);
            }
            // Heaviest first, ties in their merged order: a stable sort that allocates nothing.
            std::sort(ga, ga + k, [](const part& x, const part& y) {
                return x.sum > y.sum || (x.sum == y.sum && x.before_sort < y.before_sort);
            });
            push(a, made++);
        }
        m_last = m_heap.empty() ? 0 : m_heap.front().state;
        m_states = states;
    }

    /// Group g's records, in ascending index, written to `out` (resized). O(n/k log(n/k)).
    void members(std::size_t g, std::vector<std::uint32_t>& out) const {
        out.clear();
        if (m_states == 0) return;
        for (std::uint32_t r = m_group[m_last * m_k + g].head; r != none; r = m_next[r])
            out.push_back(r);
        std::sort(out.begin(), out.end());
    }

    /// Group g's cost. O(1).
    [[nodiscard]] std::uint64_t load(std::size_t g) const noexcept {
        return m_states == 0 ? 0 : m_group[m_last * m_k + g].sum;
    }

private:
    static constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();

    struct part {
        std::uint64_t sum;
        std::uint32_t head; // a linked list of records through m_next
        std::uint32_t tail;
        std::uint32_t before_sort; // its position in the merged state, before the sort
    };
    struct queued {
        std::uint64_t spread;
        std::size_t made; // the order states were made in: ties go to the first made
        std::size_t state;
    };

    void push(std::size_t state, std::size_t made) {
        const std::uint64_t spread = m_group[state * m_k].sum - m_group[state * m_k + m_k - 1].sum;
        m_heap.push_back({spread, made, state});
        std::push_heap(m_heap.begin(), m_heap.end(), later);
    }
    std::size_t pop() {
        std::pop_heap(m_heap.begin(), m_heap.end(), later);
        const std::size_t s = m_heap.back().state;
        m_heap.pop_back();
        return s;
    }
    // Heap order: the largest spread first, ties to the state made first.
    static bool later(const queued& x, const queued& y) noexcept {
        return x.spread < y.spread || (x.spread == y.spread && x.made > y.made);
    }

    std::size_t m_k = 0;
    std::size_t m_states = 0;
    std::size_t m_last = 0;
    std::vector<std::uint32_t> m_order;
    std::vector<std::uint32_t> m_next; // the next record of a record's group
    std::vector<part> m_group;         // state s's groups at [s*k, s*k + k)
    std::vector<queued> m_heap;
};

} // namespace bcl::detail::plan
