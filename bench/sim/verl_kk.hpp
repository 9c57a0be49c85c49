#pragma once
// The verl_kk baseline: verl's balance_batch, Karmarkar-Karp over each step's global batch
// (karmarkar_karp_equal, verl_kk_runner).

#include "policy_runner.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

namespace bcl_sim {

namespace detail {

// One state of the largest differencing method: k sets, each a singly linked list over the items
// (so merging two sets moves no item), kept heaviest first.
class kk_state {
public:
    struct set {
        double sum = 0.0;
        std::uint32_t count = 0;
        std::uint32_t head = 0; // first item (in the order the items were added)
        std::uint32_t tail = 0; // last item
    };

    std::vector<set> sets;

    [[nodiscard]] double spread() const noexcept { return sets.front().sum - sets.back().sum; }
};

// The items of all states: each item's value and the item after it in its set.
struct kk_items {
    std::span<const double> value;
    std::vector<std::uint32_t> next;
    static constexpr std::uint32_t end = 0xffffffffU;

    // verl's Set.__lt__: by sum, then by number of items, then by the items themselves as a list
    // of (index, value) pairs in the order they were added, compared lexicographically.
    [[nodiscard]] bool less(const kk_state::set& a, const kk_state::set& b) const noexcept {
        if (a.sum != b.sum) return a.sum < b.sum;
        if (a.count != b.count) return a.count < b.count;
        std::uint32_t i = a.head;
        std::uint32_t j = b.head;
        // Items are unique, so the first pair that differs differs in its index (and a set only
        // equals itself).
        for (std::uint32_t n = 0; n < a.count; ++n, i = next[i], j = next[j])
            if (i != j) return i < j;
        return false;
    }

    // verl's State.__lt__, the order of its min-heap: the state with the larger spread first;
    // at equal spreads, the state whose heaviest set is the greater.
    [[nodiscard]] bool state_less(const kk_state& a, const kk_state& b) const noexcept {
        const double sa = a.spread();
        const double sb = b.spread();
        if (sa != sb) return sa > sb;
        return less(b.sets.front(), a.sets.front());
    }

    // Sorts a state's sets heaviest first; sets that compare equal keep their order, as Python's
    // sorted(..., reverse=True) keeps it.
    void sort_sets(kk_state& s) const {
        std::stable_sort(
            s.sets.begin(), s.sets.end(),
            [this](const kk_state::set& a, const kk_state::set& b) { return less(b, a); });
    }

    // verl's State.merge: set i of `a` takes set k-1-i of `b` (heaviest with lightest), adding the
    // items' values one at a time as verl's Set.merge does; then the sets are sorted again.
    void merge(kk_state& a, const kk_state& b) {
        const std::size_t k = a.sets.size();
        for (std::size_t i = 0; i < k; ++i) {
            kk_state::set& into = a.sets[i];
            const kk_state::set& from = b.sets[k - 1 - i];
            if (from.count == 0) continue; // an empty set (verl's equal_size=False) adds nothing
            for (std::uint32_t j = from.head, n = 0; n < from.count; j = next[j], ++n)
                into.sum += value[j];
            if (into.count == 0)
                into.head = from.head;
            else
                next[into.tail] = from.head;
            into.tail = from.tail;
            into.count += from.count;
        }
        sort_sets(a);
    }
};

// Python's heapq on a vector of states ordered by `less`: the same pushes and pops in the same
// order leave the same heap, so the states merge in exactly the order verl's loop merges them,
// ties included.
template <class Less>
void py_sift_down(std::vector<kk_state>& heap, std::size_t start, std::size_t pos,
                  const Less& less) {
    kk_state item = std::move(heap[pos]);
    while (pos > start) {
        const std::size_t parent = (pos - 1) / 2;
        if (!less(item, heap[parent])) break;
        heap[pos] = std::move(heap[parent]);
        pos = parent;
    }
    heap[pos] = std::move(item);
}

template <class Less>
void py_heap_push(std::vector<kk_state>& heap, kk_state item, const Less& less) {
    heap.push_back(std::move(item));
    py_sift_down(heap, 0, heap.size() - 1, less);
}

template <class Less>
[[nodiscard]] kk_state py_heap_pop(std::vector<kk_state>& heap, const Less& less) {
    kk_state last = std::move(heap.back());
    heap.pop_back();
    if (heap.empty()) return last;
    kk_state top = std::move(heap.front());
    heap.front() = std::move(last);
    // heapq._siftup: walk the smaller child up to a leaf, then sift the item down from there.
    const std::size_t end = heap.size();
    std::size_t pos = 0;
    kk_state item = std::move(heap[0]);
    std::size_t child = 1;
    while (child < end) {
        const std::size_t right = child + 1;
        if (right < end && !less(heap[child], heap[right])) child = right;
        heap[pos] = std::move(heap[child]);
        pos = child;
        child = 2 * pos + 1;
    }
    heap[pos] = std::move(item);
    py_sift_down(heap, 0, pos, less);
    return top;
}

} // namespace detail

/// Partitions `values` into k groups by the Karmarkar-Karp largest differencing method, exactly as
/// verl's get_seqlen_balanced_partitions(values, k, equal_size) does it
/// (verl/utils/seqlen_balancing.py, karmarkar_karp). The items sorted by (value, index) become
/// states: with `equal_size`, runs of k, each a state of k one-item sets; without, one state per
/// item, the item in one set beside k-1 empty ones. The two states of largest spread (a Python
/// heapq, ties broken as verl's comparisons break them) merge, the heaviest set of one with the
/// lightest of the other, until one state is left. Returns its sets heaviest first (verl's order),
/// each as item indices in increasing order. Throws std::invalid_argument unless k >= 1 and there
/// are at least k values (with `equal_size`, a multiple of k), and, as verl asserts, if a group
/// comes out empty. O(n log n + (states) (n + k log k)).
[[nodiscard]] inline std::vector<std::vector<std::uint32_t>>
karmarkar_karp(std::span<const double> values, std::size_t k, bool equal_size) {
    const std::size_t n = values.size();
    if (k == 0 || n < k || (equal_size && n % k != 0) || n >= detail::kk_items::end)
        throw std::invalid_argument(
            equal_size ? "karmarkar_karp: the item count must be a positive multiple of k"
                       : "karmarkar_karp: there must be at least k items");
    std::vector<std::uint32_t> order(n);
    std::iota(order.begin(), order.end(), std::uint32_t{0});
    std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
        return values[a] < values[b] || (values[a] == values[b] && a < b);
    });

    detail::kk_items items{values, std::vector<std::uint32_t>(n, detail::kk_items::end)};
    const auto less = [&items](const detail::kk_state& a, const detail::kk_state& b) {
        return items.state_less(a, b);
    };
    std::vector<detail::kk_state> heap;
    const std::size_t run = equal_size ? k : 1; // items per starting state
    heap.reserve(n / run);
    for (std::size_t offset = 0; offset < n; offset += run) {
        detail::kk_state s;
        s.sets.resize(k);
        for (std::size_t i = 0; i < run; ++i) {
            const std::uint32_t item = order[offset + i];
            s.sets[i] = {values[item], 1, item, item};
        }
        items.sort_sets(s);
        detail::py_heap_push(heap, std::move(s), less);
    }
    while (heap.size() > 1) {
        detail::kk_state first = detail::py_heap_pop(heap, less);
        const detail::kk_state second = detail::py_heap_pop(heap, less);
        items.merge(first, second);
        detail::py_heap_push(heap, std::move(first), less);
    }

    std::vector<std::vector<std::uint32_t>> groups(k);
    for (std::size_t g = 0; g < k; ++g) {
        const detail::kk_state::set& s = heap.front().sets[g];
        if (s.count == 0)
            throw std::invalid_argument("karmarkar_karp: a group came out empty (verl asserts)");
        groups[g].reserve(s.count);
        for (std::uint32_t j = s.head, c = 0; c < s.count; j = items.next[j], ++c)
            groups[g].push_back(j);
        std::sort(groups[g].begin(), groups[g].end()); // as get_seqlen_balanced_partitions returns
    }
    return groups;
}

/// karmarkar_karp with equal_size: k groups of exactly values.size() / k items each, as verl's
/// balance_batch splits a global batch across ranks. Throws std::invalid_argument unless k >= 1
/// and values.size() is a positive multiple of k.
[[nodiscard]] inline std::vector<std::vector<std::uint32_t>>
karmarkar_karp_equal(std::span<const double> values, std::size_t k) {
    return karmarkar_karp(values, k, true);
}

/// `verl_kk`: verl's balance_batch (verl/trainer/ppo/ray_trainer.py, RayPPOTrainer._balance_batch).
/// Each step's R*B records, global positions [s*R*B, (s+1)*R*B) (the records fixed-count batching
/// uses in that step, in sampler order), are split by karmarkar_karp_equal over their costs (the
/// cost the run uses; verl balances calculate_workload, 24576*L + L^2, which is the default cost
/// times 24576) into R groups of exactly B records, and group i goes to rank i, as verl
/// concatenates the groups and its dispatch deals them out in order. A coordinated policy: the
/// driver sees the whole global batch every step, and records change ranks (never steps).
class verl_kk_runner final : public policy_runner {
public:
    explicit verl_kk_runner(const sim_context& ctx)
        : m_ctx(ctx), m_items(ctx.ranks * ctx.batch), m_costs(ctx.ranks * ctx.batch) {}

    void run(std::size_t first, std::size_t count, step_block out) override {
        const std::size_t R = m_ctx.ranks;
        const std::size_t B = m_ctx.batch;
        for (std::size_t s = first; s < first + count; ++s) {
            // Global position s*R*B + j is rank j mod R's record s*B + j / R.
            for (std::size_t j = 0; j < R * B; ++j) {
                m_items[j] = fetch(m_ctx, j % R, std::uint64_t{s} * B + j / R);
                m_costs[j] = m_items[j].cost;
            }
            const auto groups = karmarkar_karp_equal(m_costs, R);
            for (std::size_t rank = 0; rank < R; ++rank)
                for (const std::uint32_t j : groups[rank]) {
                    out.charge(s - first, rank, R, m_items[j]);
                    m_capped += m_items[j].capped ? 1 : 0;
                    observe(m_ctx, s, rank, m_items[j].id);
                }
        }
    }

    [[nodiscard]] policy_extras extras() const override {
        policy_extras e;
        e.capped = m_capped; // records stay in their step: no delay
        return e;
    }

private:
    sim_context m_ctx;
    std::vector<sample> m_items;
    std::vector<double> m_costs;
    std::uint64_t m_capped = 0;
};

} // namespace bcl_sim
