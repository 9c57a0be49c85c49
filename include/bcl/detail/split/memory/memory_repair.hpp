#pragma once
// Makes a cost-balanced partition fit a per-pack memory budget: the coordinator of its steps.

#include <bcl/detail/config.hpp>

#include <bcl/detail/split/memory/cost_recovery.hpp>
#include <bcl/detail/split/memory/memory_fit_search.hpp>
#include <bcl/detail/split/memory/memory_repair_state.hpp>
#include <bcl/detail/split/memory/memory_shedding.hpp>
#include <bcl/partition/lpt_swap.hpp>
#include <bcl/partition/partitioner.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

namespace bcl::detail {

/// Repairs `pack_of`, a partition of a round into `shape` (every pack at its capacity), so that
/// every pack's total memory is at most `budget`, giving up as little cost balance as it can.
///
/// Promises:
///   - a partition that already fits comes back untouched (an O(n) check, nothing else runs);
///   - pack sizes never change: every move exchanges two items of different packs;
///   - the returned value is the largest pack memory of what is left in `pack_of`, summed item by
///     item in index order, and it is at most `budget` whenever a fit was found. Otherwise it is
///     above `budget` and `pack_of` holds the split with the smallest largest pack memory among
///     those tried, for the caller's error message;
///   - on rounds of at most exact_items items it fails only when no split fits (exhaustive
///     search); on larger ones it is a heuristic;
///   - the result is a pure function of the inputs; after the first call of a given size
///     (which sizes all scratch space and warms up the memory-first partitioner) nothing is
///     allocated.
///
/// How, and why in this order (each step is a component over a shared memory_repair_state, the
/// partition in rank space):
///   1. memory_shedding: shed memory from the cost-balanced partition by swaps, so that a budget
///      that is rarely hit costs a few swaps and little balance.
///   2. If that gets stuck (a cost-balanced start can scatter the free room over packs that
///      cannot take what the full ones must give), start again from a memory-first split:
///      bcl::lpt_swap_partitioner on the memories (largest memory first into the pack with the
///      least memory and a free slot, then swaps that lower the largest pack memory), a split
///      that fits unless memory is very tight; step 1 then sheds what is left over.
///   3. cost_recovery: once everything fits, win back cost balance by swaps that keep every pack
///      within budget, until the costliest pack is no costlier than in the partition given.
///   4. memory_fit_search: still over budget, a depth-first search for any split that fits, run
///      to the end on rounds of at most exact_items items and bounded on larger ones; step 3
///      then wins back what cost balance it can.
/// Work: every search step is counted, and steps 1, 3 and 4 each stop after 64 n + 65536
/// steps, so a round costs O(n log n) whatever the data, plus step 2, which costs what the
/// default partitioner costs (O(n log K) and its refinement). Throws bcl::error if a memory
/// value is negative, infinite or NaN.
class memory_repair {
public:
    /// Rounds of up to this many items that no swap fits are searched exhaustively: small enough
    /// that the search is always short.
    static constexpr std::size_t exact_items = memory_fit_search::exact_items;

    /// Returns the largest pack memory after the repair: at most `budget` unless no assignment
    /// was found that fits (the caller reports that as an error).
    double operator()(std::span<const double> costs, std::span<const double> memory,
                      pack_shape shape, std::span<std::uint32_t> pack_of, double budget) {
        reserve(memory, shape);
        const double given = heaviest(memory, shape.packs, pack_of);
        if (given <= budget) return given;
        m_memory = memory;
        m_state.start(costs, memory, shape, budget);
        m_items.resize(costs.size());
        m_best.assign(pack_of.begin(), pack_of.end());
        m_best_heaviest = given;

        // 1. Shed memory from the cost-balanced partition.
        m_state.load(pack_of);
        m_target_cost = *std::ranges::max_element(m_state.pack_costs());
        if (settle(m_shedding.run(m_state), pack_of)) return m_result;
        // 2. Start again from a memory-first partition.
        m_partitioner(memory, shape, std::span<std::uint32_t>(m_items));
        m_state.load(m_items);
        if (settle(m_shedding.run(m_state), pack_of)) return m_result;
        // 4. Depth-first search (3 runs inside settle, on success).
        if (m_fit_search.run(m_state, m_items)) {
            m_state.load(m_items);
            if (settle(true, pack_of)) return m_result;
        }
        std::copy(m_best.begin(), m_best.end(), pack_of.begin());
        return m_best_heaviest;
    }

    /// At a new largest size, sizes every scratch vector and runs the memory-first partitioner
    /// once, so that no later call of this size allocates. Every call makes it first; a caller
    /// that skips the repair for a round that fits makes it for that round.
    void reserve(std::span<const double> memory, pack_shape shape) {
        const std::size_t n = memory.size();
        const std::size_t k = shape.packs;
        if (n <= m_warm_items && k <= m_warm_packs) return;
        m_warm_items = std::max(m_warm_items, n);
        m_warm_packs = std::max(m_warm_packs, k);
        m_state.reserve(m_warm_items, m_warm_packs);
        m_shedding.reserve(m_warm_packs);
        m_recovery.reserve(m_warm_items, m_warm_packs);
        m_fit_search.reserve(m_warm_items, m_warm_packs);
        for (auto* v : {&m_items, &m_best}) v->reserve(m_warm_items);
        m_exact.reserve(m_warm_packs);
        m_items.resize(n);
        m_partitioner(memory, shape, std::span<std::uint32_t>(m_items));
    }

private:
    // The largest pack memory of `pack_of`, summed in item order.
    double heaviest(std::span<const double> memory, std::size_t packs,
                    std::span<const std::uint32_t> pack_of) {
        m_exact.assign(packs, 0.0);
        for (std::size_t i = 0; i < memory.size(); ++i) m_exact[pack_of[i]] += memory[i];
        return m_exact.empty() ? 0.0 : *std::max_element(m_exact.begin(), m_exact.end());
    }

    // After a step: if it fit (checked again on exact sums, which may differ in the last bits
    // from the running ones), win back cost balance and report success; otherwise remember the
    // split if it is the best so far.
    bool settle(bool fits, std::span<std::uint32_t> pack_of) {
        const double budget = m_state.budget();
        m_state.write(std::span<std::uint32_t>(m_items));
        const double h = heaviest(m_memory, m_state.packs(), m_items);
        if (!fits || h > budget) {
            if (h < m_best_heaviest) {
                m_best.assign(m_items.begin(), m_items.end());
                m_best_heaviest = h;
            }
            return false;
        }
        m_state.save();
        m_recovery.run(m_state, m_target_cost);
        m_state.write(pack_of);
        m_result = heaviest(m_memory, m_state.packs(), pack_of);
        if (m_result > budget) { // rounding in the running sums: keep the split checked above
            m_state.restore();
            m_state.write(pack_of);
            m_result = h;
        }
        return true;
    }

    std::span<const double> m_memory; // the round's memories, by item
    memory_repair_state m_state;
    memory_shedding m_shedding;
    cost_recovery m_recovery;
    memory_fit_search m_fit_search;
    lpt_swap_partitioner m_partitioner; // step 2: the memory-first split

    std::vector<std::uint32_t> m_items; // scratch: a split by item
    std::vector<std::uint32_t> m_best;  // the split with the least largest memory so far
    double m_best_heaviest = 0.0;
    std::vector<double> m_exact; // exact per-pack memory sums
    double m_result = 0.0;
    double m_target_cost = 0.0; // the costliest pack of the partition given

    std::size_t m_warm_items = 0;
    std::size_t m_warm_packs = 0;
};

} // namespace bcl::detail
