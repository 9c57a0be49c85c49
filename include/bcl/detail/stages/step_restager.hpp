#pragma once
// Internal: a plan made on the records' summed costs, its micro-steps kept, each micro-step's
// records shared among the ranks again stage by stage (step_stages), where that lowers the sum
// over stages of the slowest rank. The held batches and the windows of a global plan of stage
// costs both restage this way, so a window's plan is the held batch's plan of its records.

#include <bcl/detail/config.hpp>

#include <bcl/detail/stages/step_stages.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace bcl::detail::stages {

/// What a restaged plan promises, in the stage_table's fixed-point units.
struct restage_figures {
    std::uint64_t total = 0;            // every record's every stage
    std::uint64_t objective = 0;        // sum over micro-steps and stages of the slowest rank
    std::uint64_t summed_objective = 0; // the same of the plan on the summed cost
    std::uint64_t lower_bound = 0;      // sum over micro-steps of step_stages::bound
    std::uint64_t heaviest = 0;         // the dearest micro-step's objective
    std::size_t steps_restaged = 0;     // micro-steps whose ranks changed
};

/// Restages plans, keeping its scratch between them.
class step_restager {
public:
    /// `slots[i]` (a struct of `.step` and `.rank`) is where record i of `t` goes in a plan of
    /// `steps` micro-steps on `ranks` ranks. Each micro-step's records are shared again among
    /// the ranks that hold them, every rank keeping its count: the summed plan's ranks improved
    /// by swaps (step_stages::improve), and, where that stays more than 1/fresh_gap above the
    /// step's bound, a fresh deal improved; the lighter of the two is kept where it is lighter
    /// than the summed plan's (ties to the summed plan), so the objective is never above it
    /// and never below the bound. With one stage nothing changes. Integers only: the same
    /// everywhere. About O(n * (D + log B) + swaps * (R * D + B * scanned)); see improve().
    template <class Slot>
    restage_figures restage(const stage_table& t, std::span<Slot> slots, std::size_t ranks,
                            std::size_t steps) {
        const std::size_t n = slots.size();
        restage_figures figures;
        // The records of each micro-step, in input order.
        m_first.assign(steps + 1, 0);
        for (const Slot& s : slots) ++m_first[s.step + 1];
        for (std::size_t k = 1; k < m_first.size(); ++k) m_first[k] += m_first[k - 1];
        m_records.resize(n);
        m_fill.assign(m_first.begin(), m_first.end() - 1);
        for (std::size_t i = 0; i < n; ++i)
            m_records[m_fill[slots[i].step]++] = static_cast<std::uint32_t>(i);
        // Scratch for the largest micro-step, the fresh deal's too: a plan whose fresh deals
        // come late allocates no more than one that deals on every step.
        std::size_t largest = 0;
        for (std::size_t step = 0; step < steps; ++step)
            largest = std::max(largest, m_first[step + 1] - m_first[step]);
        m_stages.reserve(largest, ranks, t.stages);
        m_kept.reserve(largest);
        m_tried.reserve(largest);
        m_fresh.reserve(largest);
        for (std::size_t step = 0; step < steps; ++step) {
            const std::span<const std::uint32_t> records =
                std::span<const std::uint32_t>(m_records).subspan(m_first[step], m_first[step + 1] -
                                                                                     m_first[step]);
            m_kept.resize(records.size());
            m_counts.assign(ranks, 0);
            for (std::size_t k = 0; k < records.size(); ++k) {
                m_kept[k] = slots[records[k]].rank;
                ++m_counts[m_kept[k]];
            }
            const std::uint64_t flat = m_stages.objective(records, m_kept, ranks, t);
            const std::uint64_t least = step_stages::bound(records, ranks, t);
            std::uint64_t best = flat;
            // A step at its bound has nothing to gain; the fresh deal is tried only where the
            // summed plan's ranks, improved, stay clearly above it.
            if (t.stages > 1 && flat > least) {
                m_tried.assign(m_kept.begin(), m_kept.end());
                const std::uint64_t kept = m_stages.improve(records, m_tried, ranks, t, least);
                std::uint64_t fresh = kept;
                if (kept - least > least / fresh_gap) {
                    m_fresh.resize(records.size());
                    m_stages.deal(records, m_counts, m_fresh, t);
                    fresh = m_stages.improve(records, m_fresh, ranks, t, least);
                }
                if (std::min(kept, fresh) < flat) {
                    const std::vector<std::uint32_t>& better = fresh < kept ? m_fresh : m_tried;
                    for (std::size_t k = 0; k < records.size(); ++k)
                        slots[records[k]].rank = better[k];
                    best = std::min(kept, fresh);
                    ++figures.steps_restaged;
                }
            }
            figures.objective += best;
            figures.heaviest = std::max(figures.heaviest, best);
            figures.summed_objective += flat;
            figures.lower_bound += least;
        }
        for (const std::uint64_t c : t.cost) figures.total += c;
        return figures;
    }

private:
    // A second start, the fresh deal, is worth its time (as much again as the first) where the
    // first ends more than 1/400 of the bound above it: there it is the lighter on about half
    // the steps, and without it a window of K = 8 at R = 8 loses 0.3% of efficiency; closer,
    // it gains less than a hundredth of a percent (the vision-language mix of
    // tests/stage_plan.test.cpp).
    static constexpr std::uint64_t fresh_gap = 400;

    step_stages m_stages;
    std::vector<std::size_t> m_first, m_fill, m_counts;
    std::vector<std::uint32_t> m_records, m_kept, m_tried, m_fresh;
};

} // namespace bcl::detail::stages
