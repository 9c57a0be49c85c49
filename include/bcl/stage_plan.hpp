#pragma once
// A held batch of records with a cost per stage (a vision encoder's and a language model's, D
// stages in all), planned into micro-batches of B records on each of R ranks for a model whose
// stages synchronise separately: under FSDP or ZeRO-3 the ranks meet at every layer's all-gather,
// so a micro-step lasts the sum over stages of the slowest rank in that stage, not the slowest
// rank's sum. The held batch is first planned on each record's summed cost (the global plan of
// one window, bcl::held_batch_planner), which decides the micro-steps; then each micro-step's
// records are shared among the ranks again stage by stage, and the lighter of the two kept.

#include <bcl/detail/config.hpp>

#include <bcl/cost_check.hpp>
#include <bcl/detail/stages/step_stages.hpp>
#include <bcl/error.hpp>
#include <bcl/global_plan.hpp>
#include <bcl/held_batch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bcl {

/// The most stages a record may have (D).
inline constexpr std::size_t max_plan_stages = detail::stages::max_stages;

/// What a plan of stage costs promises, in cost units.
struct stage_plan_summary {
    std::size_t stages = 1;         ///< D
    std::size_t ranks = 0;          ///< R
    std::size_t micro_steps = 0;    ///< micro-batches each rank runs
    double total = 0.0;             ///< every record's every stage
    double objective = 0.0;         ///< the sum over micro-steps and stages of the slowest rank
    double summed_objective = 0.0;  ///< the same of the plan on the summed cost alone
    double lower_bound = 0.0;       ///< sum over micro-steps and stages of max(mean, dearest)
    std::size_t steps_restaged = 0; ///< micro-steps whose ranks the stages changed

    /// total / (R * objective): 1 when every stage of every micro-step is level.
    [[nodiscard]] double efficiency() const noexcept {
        return objective > 0.0 ? total / (static_cast<double>(ranks) * objective) : 1.0;
    }
};

/// Plans held batches of stage costs, keeping its scratch between them.
class held_stage_planner {
public:
    /// Plans the held batch whose record i has the D = `stages` costs costs[i*D .. i*D+D) (n
    /// records, n a multiple of R) into out[i] = {micro-step, rank}, as
    /// bcl::held_batch_planner::plan plans the records' summed costs (every rank m = n / R
    /// records in ceil(m / B) micro-steps of B but the last), then each micro-step's records
    /// shared among its ranks again, every rank keeping its count, where that lowers the
    /// micro-step's sum over stages of the largest rank load (a deal by stage and swaps, from
    /// the summed plan's ranks and afresh; the lighter kept, ties to the summed plan). So the
    /// objective is never above the summed plan's. With D = 1 it is held_batch_planner's plan,
    /// unchanged. Integers only: the same on every rank, compiler and flag.
    ///
    /// Throws bcl::error (prefixed with `who`) for D of 0 or above max_plan_stages, costs not a
    /// whole number of rows, a bad cost (naming its record and stage), and what
    /// held_batch_planner::plan throws, changing nothing. O(n log n + n * R * B * D) per pass.
    stage_plan_summary plan(std::span<const double> costs, std::size_t stages, std::size_t ranks,
                            std::size_t batch, const plan_options& opt, std::span<plan_slot> out,
                            std::string_view who = "bcl::held_stage_planner") {
        if (stages == 0 || stages > max_plan_stages)
            throw error(std::string(who) + ": " + std::to_string(stages) +
                        " stages; a record has 1 to " + std::to_string(max_plan_stages));
        if (costs.size() % stages != 0)
            throw error(std::string(who) + ": " + std::to_string(costs.size()) +
                        " costs are not rows of " + std::to_string(stages) + " stages");
        const std::size_t n = costs.size() / stages;
        for (std::size_t k = 0; k < costs.size(); ++k)
            if (!valid_cost(costs[k])) [[unlikely]]
                throw_invalid_cost(std::string(who) + ": record " + std::to_string(k / stages) +
                                       "'s cost of stage " + std::to_string(k % stages) + " is ",
                                   costs[k]);
        m_summed.resize(n);
        for (std::size_t i = 0; i < n; ++i) {
            double s = 0.0;
            for (std::size_t d = 0; d < stages; ++d) s += costs[i * stages + d];
            m_summed[i] = s;
        }
        if (out.size() != n)
            throw error(std::string(who) + ": the plan has " + std::to_string(out.size()) +
                        " slots for " + std::to_string(n) + " records");
        m_slots.resize(n);
        const plan_summary flat = m_held.plan(m_summed, ranks, batch, opt, m_slots, who);
        stage_plan_summary summary;
        summary.stages = stages;
        summary.ranks = ranks;
        summary.micro_steps = flat.steps;
        m_table.assign(costs, stages);
        restage(ranks, summary);
        std::copy(m_slots.begin(), m_slots.end(), out.begin());
        return summary;
    }

private:
    // Each micro-step's records shared among the ranks by stage (D > 1), and the summary's
    // figures, in cost units.
    void restage(std::size_t ranks, stage_plan_summary& summary) {
        const std::size_t n = m_slots.size();
        const std::size_t d = m_table.stages;
        const double unit = m_table.unit;
        // The records of each micro-step, in input order.
        m_first.assign(summary.micro_steps + 1, 0);
        for (const plan_slot& s : m_slots) ++m_first[s.step + 1];
        for (std::size_t k = 1; k < m_first.size(); ++k) m_first[k] += m_first[k - 1];
        m_records.resize(n);
        m_fill.assign(m_first.begin(), m_first.end() - 1);
        for (std::size_t i = 0; i < n; ++i)
            m_records[m_fill[m_slots[i].step]++] = static_cast<std::uint32_t>(i);
        for (std::size_t step = 0; step < summary.micro_steps; ++step) {
            const std::span<const std::uint32_t> records =
                std::span<const std::uint32_t>(m_records).subspan(m_first[step], m_first[step + 1] -
                                                                                     m_first[step]);
            m_kept.resize(records.size());
            m_counts.assign(ranks, 0);
            for (std::size_t k = 0; k < records.size(); ++k) {
                m_kept[k] = m_slots[records[k]].rank;
                ++m_counts[m_kept[k]];
            }
            const std::uint64_t flat = m_stages.objective(records, m_kept, ranks, m_table);
            const std::uint64_t least = detail::stages::step_stages::bound(records, ranks, m_table);
            std::uint64_t best = flat;
            // A step at its bound has nothing to gain; the fresh deal is tried only where the
            // summed plan's ranks, improved, stay above it.
            if (d > 1 && flat > least) {
                m_tried.assign(m_kept.begin(), m_kept.end());
                const std::uint64_t kept = m_stages.improve(records, m_tried, ranks, m_table);
                std::uint64_t fresh = kept;
                if (kept > least) {
                    m_fresh.resize(records.size());
                    m_stages.deal(records, m_counts, m_fresh, m_table);
                    fresh = m_stages.improve(records, m_fresh, ranks, m_table);
                }
                const bool take_fresh = fresh < kept;
                if (std::min(kept, fresh) < flat) {
                    const std::vector<std::uint32_t>& better = take_fresh ? m_fresh : m_tried;
                    for (std::size_t k = 0; k < records.size(); ++k)
                        m_slots[records[k]].rank = better[k];
                    best = std::min(kept, fresh);
                    ++summary.steps_restaged;
                }
            }
            summary.objective += static_cast<double>(best) * unit;
            summary.summed_objective += static_cast<double>(flat) * unit;
            summary.lower_bound += static_cast<double>(least) * unit;
        }
        for (const std::uint64_t c : m_table.cost) summary.total += static_cast<double>(c) * unit;
    }

    held_batch_planner m_held;
    detail::stages::stage_table m_table;
    detail::stages::step_stages m_stages;
    std::vector<double> m_summed;
    std::vector<plan_slot> m_slots;
    std::vector<std::size_t> m_first, m_fill, m_counts;
    std::vector<std::uint32_t> m_records, m_kept, m_tried, m_fresh;
};

} // namespace bcl
