#pragma once
// A round's partition: the partitioner, the check of what it returned, and the memory budget.

#include <bcl/detail/config.hpp>

#include <bcl/detail/number_text.hpp>
#include <bcl/detail/split/memory/memory_repair.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>
#include <bcl/partition/detail/target_selection.hpp>
#include <bcl/partition/padded_cut.hpp>
#include <bcl/partition/partitioner.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace bcl::detail {

/// Splits a round's records into packs and hands back, for each, its pack, and each pack's cost
/// and memory. A partitioner that breaks its contract (a pack id out of range, a pack of the wrong
/// size: the batch-size contract would break silently) and a round that no split fits within the
/// memory budget are bcl::errors. Everything it writes is its own scratch, so a throw leaves the
/// balancer as it was.
///
/// Each pack's cost is summed once: by the partitioner if it reports its pack loads (the default
/// does), otherwise in the pass that checks the pack sizes, which also sums the memory. The memory
/// repair runs only for a round that is over budget, and sums afresh what it changed.
///
/// Under batch_cost::padded the partition is detail::padded_cut (records of similar cost
/// together), a pack's cost and memory are its size times its largest, and no repair is needed:
/// every record fits the budget B times over (record_estimator checks that).
template <class Partitioner, bool tracks_memory>
class partition_step {
public:
    explicit partition_step(Partitioner partitioner, batch_cost batching = batch_cost::packed)
        : m_partitioner(std::move(partitioner)), m_padded(batching == batch_cost::padded) {}

    void reserve(std::size_t window, std::size_t packs) {
        m_pack_of.reserve(window);
        m_rest.reserve(window);
        m_rest_cost.reserve(window);
        m_rest_pack.reserve(window);
        m_chosen.reserve(window);
        m_selector.reserve(window);
        m_count.reserve(packs);
        m_pack_cost.reserve(packs);
        m_pack_memory.reserve(packs);
    }

    /// Partitions `costs` (and `memory`, when tracked) into `shape`. `budget` > 0 bounds each
    /// pack's memory; `round` names the round in an error; `heavy` holds the targets of the
    /// heavy slots (detail::heavy_slots; 0 for a slot left to the partitioner). Returns the
    /// partitioner's summary, its heaviest pack recomputed when the budget moved records; see
    /// claims_bound() for whether its lower bound applies to that heaviest pack.
    partition_summary run(std::span<const double> costs, std::span<const double> memory,
                          pack_shape shape, double budget, std::uint64_t round,
                          std::span<const double> heavy = {}) {
        const std::size_t n = costs.size();
        m_pack_of.resize(n);
        const std::span<std::uint32_t> pack_of(m_pack_of);
        const bool shaped = !m_padded && !heavy.empty() && heavy[0] > 0.0 && shape.packs > 1 &&
                            n == shape.packs * shape.pack_size;
        partition_summary summary = m_padded ? m_cut(costs, shape, pack_of)
                                    : shaped ? shape_heavy(costs, shape, pack_of, heavy)
                                             : m_partitioner(costs, shape, pack_of);
        m_claims_bound = !m_padded;
        const bool loads_given = summary.pack_loads.size() == shape.packs;
        if (loads_given) m_pack_cost.assign(summary.pack_loads.begin(), summary.pack_loads.end());
        check_and_sum(shape, costs, memory, !loads_given);
        if constexpr (tracks_memory) {
            const double most =
                budget > 0.0 ? *std::max_element(m_pack_memory.begin(), m_pack_memory.end()) : 0.0;
            if (m_padded && most > budget) {
                // Cannot happen: every record fits B times over (record_estimator checks it).
                throw_over_budget(memory, shape.packs, most, budget, round);
            } else if (most > budget) {
                const double heaviest = m_repair(costs, memory, shape, m_pack_of, budget);
                if (heaviest > budget)
                    throw_over_budget(memory, shape.packs, heaviest, budget, round);
                check_and_sum(shape, costs, memory, true);
                summary.heaviest = *std::max_element(m_pack_cost.begin(), m_pack_cost.end());
                // Shaped, the bound is of the rest's records, which the repair may have mixed
                // with the heavy slots': no pack is then known to be one the bound covers.
                m_claims_bound = !shaped;
            } else if (budget > 0.0 && !m_padded) {
                m_repair.reserve(memory, shape); // so a later round that needs it allocates nothing
            }
        }
        return summary;
    }

    [[nodiscard]] std::span<const std::uint32_t> pack_of() const noexcept { return m_pack_of; }
    [[nodiscard]] std::span<const double> pack_cost() const noexcept { return m_pack_cost; }
    [[nodiscard]] std::span<const double> pack_memory() const noexcept { return m_pack_memory; }
    /// Whether the last run()'s summary bounds its heaviest pack: the summary's heaviest pack is
    /// then one of the packs its lower bound is about, so their ratio is at most the number of
    /// those packs. False for padded batches, which claim no bound, and for a shaped round whose
    /// records the memory budget moved.
    [[nodiscard]] bool claims_bound() const noexcept { return m_claims_bound; }

    /// A full round's gap to the lower bound of its packed cost (heaviest / bound - 1), where
    /// the last run() claims a bound, joins `gaps` (statistics::gap_to_lower_bound).
    template <class Gaps>
    void add_gap(const partition_summary& split, bool full, Gaps& gaps) const noexcept {
        if (!full || !m_claims_bound) return;
        gaps.add(split.lower_bound > 0.0 ? std::max(0.0, split.heaviest / split.lower_bound - 1.0)
                                         : 0.0);
    }

private:
    // The heavy slots first: pack s takes the costliest item left and B-1 others that bring it
    // to heavy[s] (the selection the sliding policy uses for its rounds); the partitioner
    // balances the rest over the remaining packs. The summary is the partitioner's, of the rest.
    partition_summary shape_heavy(std::span<const double> costs, pack_shape shape,
                                  std::span<std::uint32_t> pack_of, std::span<const double> heavy) {
        const std::size_t b = shape.pack_size;
        m_rest.resize(costs.size());
        for (std::size_t i = 0; i < m_rest.size(); ++i) m_rest[i] = static_cast<std::uint32_t>(i);
        std::size_t slot = 0;
        for (; slot < heavy.size() && heavy[slot] > 0.0 && slot + 1 < shape.packs; ++slot) {
            std::size_t top = 0; // the costliest item left, the first of equals
            for (std::size_t j = 1; j < m_rest.size(); ++j)
                if (costs[m_rest[j]] > costs[m_rest[top]]) top = j;
            pack_of[m_rest[top]] = static_cast<std::uint32_t>(slot);
            const double room = heavy[slot] - costs[m_rest[top]];
            m_rest.erase(m_rest.begin() + static_cast<std::ptrdiff_t>(top));
            m_rest_cost.resize(m_rest.size());
            for (std::size_t j = 0; j < m_rest.size(); ++j) m_rest_cost[j] = costs[m_rest[j]];
            m_chosen.resize(m_rest.size());
            m_selector(m_rest_cost, 0, b - 1, room, std::span<std::uint8_t>(m_chosen));
            std::size_t kept = 0;
            for (std::size_t j = 0; j < m_rest.size(); ++j) {
                if (m_chosen[j])
                    pack_of[m_rest[j]] = static_cast<std::uint32_t>(slot);
                else
                    m_rest[kept++] = m_rest[j];
            }
            m_rest.resize(kept);
        }
        m_rest_cost.resize(m_rest.size());
        for (std::size_t j = 0; j < m_rest.size(); ++j) m_rest_cost[j] = costs[m_rest[j]];
        m_rest_pack.resize(m_rest.size());
        const partition_summary rest =
            m_partitioner(std::span<const double>(m_rest_cost), pack_shape{shape.packs - slot, b},
                          std::span<std::uint32_t>(m_rest_pack));
        for (std::size_t j = 0; j < m_rest.size(); ++j)
            pack_of[m_rest[j]] = m_rest_pack[j] + static_cast<std::uint32_t>(slot);
        return {rest.heaviest, rest.lower_bound, {}};
    }

    // O(n): every item in a pack that exists, every pack exactly at its capacity; the same pass
    // sums each pack's memory (padded: its size times its largest), and its cost when
    // `sum_costs`.
    void check_and_sum(pack_shape shape, std::span<const double> costs,
                       std::span<const double> memory, bool sum_costs) {
        const std::size_t n = costs.size();
        m_count.assign(shape.packs, 0);
        if (sum_costs) m_pack_cost.assign(shape.packs, 0.0);
        if constexpr (tracks_memory) m_pack_memory.assign(shape.packs, 0.0);
        for (std::size_t i = 0; i < n; ++i) {
            const std::uint32_t p = m_pack_of[i];
            if (p >= shape.packs) [[unlikely]]
                throw error("bcl::balancer: the partitioner put item " + std::to_string(i) +
                            " in pack " + std::to_string(p) + " of a window of " +
                            std::to_string(shape.packs) + " packs");
            ++m_count[p];
            if (sum_costs) m_pack_cost[p] += costs[i];
            if constexpr (tracks_memory) {
                if (m_padded)
                    m_pack_memory[p] = std::max(m_pack_memory[p], memory[i]);
                else
                    m_pack_memory[p] += memory[i];
            }
        }
        if constexpr (tracks_memory) {
            if (m_padded)
                for (std::size_t p = 0; p < shape.packs; ++p)
                    m_pack_memory[p] *= static_cast<double>(shape.capacity(p, n));
        }
        for (std::size_t p = 0; p < shape.packs; ++p)
            if (m_count[p] != shape.capacity(p, n))
                throw error("bcl::balancer: the partitioner put " + std::to_string(m_count[p]) +
                            " items in pack " + std::to_string(p) + ", which must hold exactly " +
                            std::to_string(shape.capacity(p, n)));
    }

    // When the round's total memory alone exceeds packs * budget no split can fit, and the
    // message says so.
    [[noreturn]] static void throw_over_budget(std::span<const double> memory, std::size_t packs,
                                               double heaviest, double budget,
                                               std::uint64_t round) {
        double total = 0.0;
        for (const double m : memory) total += m;
        const double per_batch = total / static_cast<double>(packs);
        throw error("bcl::balancer: the " + std::to_string(memory.size()) + " records of round " +
                    std::to_string(round) + " could not be split into " + std::to_string(packs) +
                    " batches within memory_budget " + number_text(budget) +
                    " (the best split found has a batch of " + number_text(heaviest) + "; " +
                    (per_batch > budget
                         ? "no split can fit: together they need " + number_text(per_batch) +
                               " per batch on average"
                         : "they need " + number_text(per_batch) + " per batch on average") +
                    "); the records are still buffered");
    }

    Partitioner m_partitioner;
    padded_cut m_cut; // the partition of padded batches
    bool m_padded;
    bool m_claims_bound = true;
    memory_repair m_repair;
    target_selector m_selector;             // heavy slots: the B-1 items beside the top one
    std::vector<std::uint32_t> m_rest;      // heavy slots: items not yet in a heavy pack
    std::vector<double> m_rest_cost;        // their costs
    std::vector<std::uint32_t> m_rest_pack; // their packs, from the partitioner
    std::vector<std::uint8_t> m_chosen;
    std::vector<std::uint32_t> m_pack_of; // each item's pack
    std::vector<std::size_t> m_count;     // items per pack, while checking
    std::vector<double> m_pack_cost;
    std::vector<double> m_pack_memory;
};

} // namespace bcl::detail
