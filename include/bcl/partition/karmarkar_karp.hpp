#pragma once
// Balanced Karmarkar-Karp: the largest differencing method with exactly B items per pack.
// Deprecated as part of the installed library: a baseline for the tests and benchmarks, it
// moves to bench/partitioners/ (not installed) in the next release; this path works until then.

#include <bcl/detail/config.hpp>

#include <bcl/partition/detail/ranked_window.hpp>
#include <bcl/partition/lower_bound.hpp>
#include <bcl/partition/partitioner.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <utility>
#include <vector>

namespace bcl::detail {

/// Balanced Karmarkar-Karp (largest differencing), the way data-parallel trainers use it to
/// balance micro-batches under an equal-count constraint.
///
/// Sort the items high to low and cut them into B chunks of K consecutive items. Each chunk is a
/// state: K partial packs of one item each. Repeatedly take the two states whose packs differ the
/// most (largest spread: heaviest minus lightest pack) and merge them into one, joining the
/// heaviest pack of one with the lightest of the other, the second heaviest with the second
/// lightest, and so on, so the differences cancel. After B - 1 merges one state is left: K packs
/// of exactly B items, one from each chunk. A short window is dealt as if it were full, with
/// zero-cost placeholders at the end; they are then gathered into the last pack.
///
/// Guarantee: the contract (exactly `shape.capacity(p, n)` items per pack, deterministic); no
/// bound on the gap. Because each pack takes exactly one item from every chunk, a chunk of
/// several large items cannot be split any other way, and on heavy tails the heaviest pack ends
/// percent-level above the lower bound (docs/partitioners.md).
/// `refined<karmarkar_karp_partitioner>` adds swap refinement.
///
/// O(n) radix sort, then B - 1 merges of O(K log K) each and a heap of B states: O(n log K) in
/// all. Scratch space is kept: after the first call of the largest window it allocates nothing.
/// Throws bcl::error if the shape does not fit the costs, pack_of has the wrong length, or a cost
/// is negative, NaN or above bcl::max_estimate.
class karmarkar_karp_partitioner {
public:
    partition_summary operator()(std::span<const double> costs, pack_shape shape,
                                 std::span<std::uint32_t> pack_of) {
        const auto lower_bound =
            m_window.start("bcl::detail::karmarkar_karp_partitioner", costs, shape, pack_of.size());
        if (!lower_bound) return {};
        const std::size_t n = costs.size();
        const std::size_t k = shape.packs;
        const std::size_t chunks = shape.pack_size;
        const std::size_t full = k * chunks;
        const detail::ranked_costs& ranked = m_window.ranked;
        detail::pack_table& packs = m_window.packs;
        const auto cost = [&](std::size_t rank) { return rank < n ? ranked.cost(rank) : 0.0; };

        // State s owns groups [s*K, s*K + K), kept heaviest first; a group is a linked list of
        // ranks (m_next), so a merge joins two lists in O(1).
        m_group.resize(full);
        m_next.resize(full);
        m_heap.clear();
        m_heap.reserve(chunks);
        for (std::size_t s = 0; s < chunks; ++s) {
            for (std::size_t g = 0; g < k; ++g) {
                const auto rank = static_cast<std::uint32_t>(s * k + g);
                m_group[s * k + g] = {cost(rank), rank, rank};
                m_next[rank] = no_rank;
            }
            push_state(s, k);
        }
        while (m_heap.size() > 1) {
            const std::size_t a = pop_state();
            const std::size_t b = pop_state();
            group* ga = &m_group[a * k];
            const group* gb = &m_group[b * k];
            for (std::size_t g = 0; g < k; ++g) { // a's heaviest with b's lightest, and so on
                const group& other = gb[k - 1 - g];
                ga[g].sum += other.sum;
                m_next[ga[g].tail] = other.head;
                ga[g].tail = other.tail;
            }
            std::sort(ga, ga + k, heavier_first);
            push_state(a, k);
        }

        // The last state's groups are the packs; load them into the table in rank order.
        const std::size_t last = m_heap.front().second;
        m_pack_of_rank.resize(full);
        for (std::size_t g = 0; g < k; ++g)
            for (std::uint32_t r = m_group[last * k + g].head; r != no_rank; r = m_next[r])
                m_pack_of_rank[r] = static_cast<std::uint32_t>(g);
        packs.reset(shape, full);
        for (std::size_t r = 0; r < full; ++r)
            packs.append(m_pack_of_rank[r], static_cast<std::uint32_t>(r), cost(r));
        if (n < full) packs.gather_placeholders(n, ranked);
        return {packs.write(ranked, pack_of), *lower_bound};
    }

private:
    static constexpr std::uint32_t no_rank = std::numeric_limits<std::uint32_t>::max();

    struct group {
        double sum;
        std::uint32_t head; // first rank of the list; the lowest rank, so a unique tie-break
        std::uint32_t tail;
    };

    static bool heavier_first(const group& x, const group& y) noexcept {
        return x.sum > y.sum || (x.sum == y.sum && x.head < y.head);
    }

    // Max-heap of (spread, state id): largest spread first, ties to the lower id.
    static bool less_urgent(const std::pair<double, std::size_t>& x,
                            const std::pair<double, std::size_t>& y) noexcept {
        return x.first < y.first || (x.first == y.first && x.second > y.second);
    }

    void push_state(std::size_t s, std::size_t k) {
        const double spread = m_group[s * k].sum - m_group[s * k + k - 1].sum;
        m_heap.emplace_back(spread, s);
        std::push_heap(m_heap.begin(), m_heap.end(), less_urgent);
    }

    std::size_t pop_state() {
        std::pop_heap(m_heap.begin(), m_heap.end(), less_urgent);
        const std::size_t s = m_heap.back().second;
        m_heap.pop_back();
        return s;
    }

    detail::ranked_window m_window;
    std::vector<group> m_group;
    std::vector<std::uint32_t> m_next;
    std::vector<std::uint32_t> m_pack_of_rank;
    std::vector<std::pair<double, std::size_t>> m_heap;
};

} // namespace bcl::detail
