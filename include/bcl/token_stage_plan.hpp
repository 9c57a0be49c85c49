#pragma once
// Token-budget micro-batches of records with a cost per stage (a vision encoder's and a language
// model's) for a model whose stages synchronise separately: a micro-step lasts the sum over
// stages of its dearest micro-batch in that stage. The budget stays on tokens. The micro-steps
// are those of bcl::token_planner's plan of the records' summed costs or of one stage's alone
// (stage_plan.hpp says why a stage alone), whichever admits the least objective; then each
// micro-step's records move between its micro-batches (detail::stages::cell_stages) where the
// budget allows and the objective falls.

#include <bcl/detail/config.hpp>

#include <bcl/cost_check.hpp>
#include <bcl/detail/stages/cell_stages.hpp>
#include <bcl/detail/stages/step_stages.hpp>
#include <bcl/error.hpp>
#include <bcl/stage_plan.hpp>
#include <bcl/token_budget.hpp>
#include <bcl/token_plan.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bcl {

/// What a token plan of stage costs promises, in cost units, beside the token plan's own summary
/// (`plan`: its micro-steps, tokens, padding; its cost figures those of the numbers its
/// micro-steps were planned on).
struct token_stage_summary {
    token_plan_summary plan;
    std::size_t stages = 1;         ///< D
    double total = 0.0;             ///< every record's every stage
    double objective = 0.0;         ///< sum over micro-steps and stages of the dearest micro-batch
    double summed_objective = 0.0;  ///< the same of the plan of the summed costs, not restaged
    double lower_bound = 0.0;       ///< sum over micro-steps and stages of max(mean, dearest)
    std::size_t steps_restaged = 0; ///< micro-steps whose micro-batches the stages changed
    int steps_from_stage = -1;      ///< whose plan's micro-steps: -1 the summed costs', d stage d's

    /// total / (R * objective): 1 when every stage of every micro-step is level.
    [[nodiscard]] double efficiency() const noexcept {
        return objective > 0.0 ? total / (static_cast<double>(plan.ranks) * objective) : 1.0;
    }
};

/// Plans held batches of token-budget micro-batches of stage costs, keeping its scratch.
class token_stage_planner {
public:
    /// Plans as bcl::token_planner::plan_held does (its contract: every rank as many
    /// micro-batches in every step, a multiple of m, none empty but where allowed, at most T
    /// tokens each, every record once), record i with the D = `stages` costs
    /// costs[i*D .. i*D+D): the micro-steps of the plan of the summed costs or of one stage's
    /// alone, whichever admits the least objective (ties to the summed costs; with D > 1 the
    /// numbers planned on are the stage table's integers), then each micro-step's records moved
    /// and swapped between its micro-batches while the sum over stages of the dearest
    /// micro-batch falls and every micro-batch keeps a record and at most T tokens (records of
    /// a group of several, and micro-batches above T, stay as they are). The objective is never
    /// above that of the plan of the summed costs. With D = 1 the slots are token_planner's.
    ///
    /// Throws bcl::error (prefixed with `who`), changing nothing, for what check_stage_costs
    /// refuses (naming the record and stage), costs not N rows of D, and what
    /// token_planner::plan_held throws.
    token_stage_summary plan_held(std::span<const std::uint64_t> tokens,
                                  std::span<const double> costs, std::size_t stages,
                                  std::span<const std::uint64_t> groups, const token_budget& budget,
                                  std::size_t steps, const token_plan_options& opt,
                                  std::span<micro_slot> out,
                                  std::string_view who = "bcl::token_stage_planner") {
        const std::size_t n = tokens.size();
        if (check_stage_costs(costs, stages, who) != n)
            throw error(std::string(who) + ": " + std::to_string(costs.size() / stages) +
                        " rows of stage costs for " + std::to_string(n) + " records");
        if (out.size() != n)
            throw error(std::string(who) + ": the plan has " + std::to_string(out.size()) +
                        " slots for " + std::to_string(n) + " records");
        m_table.assign(costs, stages);
        m_scalar.resize(n);
        m_slots.resize(n);
        m_tried.resize(n);
        scalars_of(costs, n, summed);
        token_plan_summary plan =
            m_tokens.plan_held(tokens, m_scalar, groups, budget, steps, opt, m_slots, who);
        const std::uint64_t summed_objective = objective_of(m_slots, plan);
        int chosen = -1;
        if (stages > 1) {
            std::uint64_t least = bound_of(m_slots, plan);
            for (std::size_t d = 0; d < stages; ++d) {
                scalars_of(costs, n, d);
                const token_plan_summary p =
                    m_tokens.plan_held(tokens, m_scalar, groups, budget, steps, opt, m_tried, who);
                const std::uint64_t b = bound_of(m_tried, p);
                if (b < least) {
                    least = b;
                    chosen = static_cast<int>(d);
                    m_slots.swap(m_tried);
                    plan = p;
                }
            }
        }
        m_frozen.assign(n, false);
        freeze_groups(groups);
        detail::stages::restage_figures f = restage(tokens, budget, opt, plan);
        if (f.objective > summed_objective) { // (only a stage's own micro-steps can be above)
            scalars_of(costs, n, summed);
            plan = m_tokens.plan_held(tokens, m_scalar, groups, budget, steps, opt, m_slots, who);
            f = restage(tokens, budget, opt, plan);
            chosen = -1;
        }
        std::copy(m_slots.begin(), m_slots.end(), out.begin());
        plan.digest = token_plan_digest(out);
        token_stage_summary s;
        s.plan = plan;
        s.stages = stages;
        const double unit = m_table.unit;
        s.total = static_cast<double>(f.total) * unit;
        s.objective = static_cast<double>(f.objective) * unit;
        s.summed_objective = static_cast<double>(summed_objective) * unit;
        s.lower_bound = static_cast<double>(f.lower_bound) * unit;
        s.steps_restaged = f.steps_restaged;
        s.steps_from_stage = chosen;
        return s;
    }

private:
    static constexpr std::size_t summed = detail::stages::max_stages;

    // The numbers a plan is made on, into m_scalar: as stage_planner_base's.
    void scalars_of(std::span<const double> costs, std::size_t n, std::size_t stage) {
        if (m_table.stages == 1) {
            std::copy(costs.begin(), costs.end(), m_scalar.begin());
            return;
        }
        for (std::size_t i = 0; i < n; ++i)
            m_scalar[i] =
                static_cast<double>(stage == summed ? m_table.sum(i) : m_table.of(i)[stage]);
    }

    // Records of a group of several stay where the plan put them: a group keeps to one rank (and
    // one micro-batch with group_together).
    void freeze_groups(std::span<const std::uint64_t> groups) {
        if (groups.empty()) return;
        m_order.resize(groups.size());
        for (std::size_t i = 0; i < groups.size(); ++i) m_order[i] = static_cast<std::uint32_t>(i);
        std::sort(m_order.begin(), m_order.end(), [&](std::uint32_t a, std::uint32_t b) {
            return groups[a] != groups[b] ? groups[a] < groups[b] : a < b;
        });
        for (std::size_t k = 0; k + 1 < m_order.size(); ++k)
            if (groups[m_order[k]] == groups[m_order[k + 1]])
                m_frozen[m_order[k]] = m_frozen[m_order[k + 1]] = true;
    }

    // Micro-step of each slot, into m_step_of; returns the micro-steps.
    std::size_t micro_steps_of(std::span<const micro_slot> slots, const token_plan_summary& p) {
        m_step_of.resize(slots.size());
        for (std::size_t i = 0; i < slots.size(); ++i)
            m_step_of[i] =
                static_cast<std::uint32_t>(p.first_micro_step(slots[i].step) + slots[i].micro);
        return p.micro_steps;
    }

    // Per micro-step and stage: the ranks' loads, their sum and the dearest record.
    void tally(std::span<const micro_slot> slots, const token_plan_summary& p) {
        const std::size_t steps = micro_steps_of(slots, p);
        const std::size_t d = m_table.stages;
        const std::size_t r = p.ranks;
        m_load.assign(steps * r * d, 0);
        m_dearest.assign(steps * d, 0);
        for (std::size_t i = 0; i < slots.size(); ++i) {
            const auto c = m_table.of(i);
            for (std::size_t s = 0; s < d; ++s) {
                m_load[(m_step_of[i] * r + slots[i].rank) * d + s] += c[s];
                m_dearest[m_step_of[i] * d + s] = std::max(m_dearest[m_step_of[i] * d + s], c[s]);
            }
        }
    }
    std::uint64_t objective_of(std::span<const micro_slot> slots, const token_plan_summary& p) {
        tally(slots, p);
        return sum_over_steps(p, false);
    }
    std::uint64_t bound_of(std::span<const micro_slot> slots, const token_plan_summary& p) {
        tally(slots, p);
        return sum_over_steps(p, true);
    }
    // Sum over micro-steps and stages of the dearest micro-batch, or (`bound`) of the larger of
    // the ranks' mean and the dearest record.
    std::uint64_t sum_over_steps(const token_plan_summary& p, bool bound) const {
        const std::size_t d = m_table.stages;
        const std::size_t r = p.ranks;
        std::uint64_t sum = 0;
        for (std::size_t step = 0; step < p.micro_steps; ++step)
            for (std::size_t s = 0; s < d; ++s) {
                std::uint64_t top = 0;
                std::uint64_t total = 0;
                for (std::size_t k = 0; k < r; ++k) {
                    top = std::max(top, m_load[(step * r + k) * d + s]);
                    total += m_load[(step * r + k) * d + s];
                }
                sum += bound ? std::max((total + r - 1) / r, m_dearest[step * d + s]) : top;
            }
        return sum;
    }

    // Each micro-step's records moved between its micro-batches (cell_stages), in m_slots.
    detail::stages::restage_figures restage(std::span<const std::uint64_t> tokens,
                                            const token_budget& budget,
                                            const token_plan_options& opt,
                                            const token_plan_summary& p) {
        const std::size_t steps = micro_steps_of(m_slots, p);
        const std::uint64_t pad = std::max<std::uint64_t>(opt.pad_to_multiple_of, 1);
        m_first.assign(steps + 1, 0);
        for (const std::uint32_t s : m_step_of) ++m_first[s + 1];
        for (std::size_t k = 1; k < m_first.size(); ++k) m_first[k] += m_first[k - 1];
        m_records.resize(m_slots.size());
        m_fill.assign(m_first.begin(), m_first.end() - 1);
        for (std::size_t i = 0; i < m_slots.size(); ++i)
            m_records[m_fill[m_step_of[i]]++] = static_cast<std::uint32_t>(i);
        detail::stages::restage_figures f;
        for (const std::uint64_t c : m_table.cost) f.total += c;
        m_padded.resize(m_slots.size());
        for (std::size_t i = 0; i < m_slots.size(); ++i)
            m_padded[i] = (tokens[i] + pad - 1) / pad * pad;
        for (std::size_t step = 0; step < steps; ++step) {
            const std::span<const std::uint32_t> records =
                std::span<const std::uint32_t>(m_records).subspan(m_first[step], m_first[step + 1] -
                                                                                     m_first[step]);
            m_rank_of.resize(records.size());
            for (std::size_t k = 0; k < records.size(); ++k)
                m_rank_of[k] = m_slots[records[k]].rank;
            const detail::stages::cell_stages::outcome o = m_cells.improve(
                records, m_rank_of, m_padded, m_frozen, budget.ranks, budget.max_tokens, m_table);
            if (o.after < o.before) {
                for (std::size_t k = 0; k < records.size(); ++k)
                    m_slots[records[k]].rank = m_rank_of[k];
                ++f.steps_restaged;
            }
            f.objective += o.after;
            f.summed_objective += o.before;
            f.lower_bound += detail::stages::step_stages::bound(records, budget.ranks, m_table);
        }
        return f;
    }

    token_planner m_tokens;
    detail::stages::stage_table m_table;
    detail::stages::cell_stages m_cells;
    std::vector<double> m_scalar;
    std::vector<micro_slot> m_slots, m_tried;
    std::vector<bool> m_frozen;
    std::vector<std::uint32_t> m_order, m_step_of, m_records, m_rank_of;
    std::vector<std::size_t> m_first, m_fill;
    std::vector<std::uint64_t> m_load, m_dearest, m_padded;
};

} // namespace bcl
