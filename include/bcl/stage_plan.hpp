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
#include <bcl/detail/stages/step_restager.hpp>
#include <bcl/detail/stages/step_stages.hpp>
#include <bcl/error.hpp>
#include <bcl/global_plan.hpp>
#include <bcl/held_batch.hpp>

#include <algorithm>
#include <cmath>
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
    /// Which plan's micro-steps were kept: -1 the summed cost's, d stage d's alone.
    int steps_from_stage = -1;

    /// total / (R * objective): 1 when every stage of every micro-step is level.
    [[nodiscard]] double efficiency() const noexcept {
        return objective > 0.0 ? total / (static_cast<double>(ranks) * objective) : 1.0;
    }
};

/// A dense table of stage costs by dataset index: record i's D costs at costs[i*D .. i*D+D).
struct stage_table_view {
    std::span<const double> costs;
    std::size_t stages = 1;

    /// The records: costs / D (rows a partial row would not count).
    [[nodiscard]] std::size_t records() const noexcept {
        return stages == 0 ? 0 : costs.size() / stages;
    }
};

/// A table of stage costs read by dataset index, as epoch plans read it: `stages` (D) costs a
/// record, `row_of(index, row)` writing record `index`'s into `row` (a std::span<double> of D),
/// or throwing bcl::error for an index the table does not hold.
template <class RowOf>
struct stage_rows {
    std::size_t stages = 1;
    RowOf row_of;
};

// (Spelt out: not every compiler deduces an aggregate's arguments yet.)
template <class RowOf>
stage_rows(std::size_t, RowOf) -> stage_rows<RowOf>;

template <class T>
inline constexpr bool is_stage_rows = false;
template <class RowOf>
inline constexpr bool is_stage_rows<stage_rows<RowOf>> = true;

/// Throws bcl::error (prefixed with `who`) unless `values` costs are whole rows of `stages`, D
/// from 1 to max_plan_stages. O(1).
inline void check_stage_shape(std::size_t values, std::size_t stages, std::string_view who) {
    if (stages == 0 || stages > max_plan_stages)
        throw error(std::string(who) + ": " + std::to_string(stages) +
                    " stages; a record has 1 to " + std::to_string(max_plan_stages));
    if (values % stages != 0)
        throw error(std::string(who) + ": " + std::to_string(values) + " costs are not rows of " +
                    std::to_string(stages) + " stages");
}

/// Checks a table of stage costs (rows of `stages` costs, record i's at costs[i*D .. i*D+D)) and
/// returns its records. Throws bcl::error (prefixed with `who`) for D of 0 or above
/// max_plan_stages, costs not a whole number of rows, or a bad cost, naming its record and
/// stage. O(n * D).
inline std::size_t check_stage_costs(std::span<const double> costs, std::size_t stages,
                                     std::string_view who) {
    check_stage_shape(costs.size(), stages, who);
    for (std::size_t k = 0; k < costs.size(); ++k)
        if (!valid_cost(costs[k])) [[unlikely]]
            throw_invalid_cost(std::string(who) + ": record " + std::to_string(k / stages) +
                                   "'s cost of stage " + std::to_string(k % stages) + " is ",
                               costs[k]);
    return costs.size() / stages;
}

namespace detail::stages {

/// What plans of stage costs share: the choice of the micro-steps and their restaging.
///
/// Which records share a micro-step is decided by a plan of one number a record (the summed
/// cost, or one stage's alone; with D > 1 the stage table's integers, exact everywhere); then each
/// micro-step's records are shared among the ranks by stage. The summed cost is not always the
/// number to align steps on: where one stage is heavy-tailed (an encoder over a few huge images)
/// and another smooth (the language model's tokens), a plan on the summed cost scatters the
/// heavy-tailed stage's dearest records over many micro-steps, and each of them then waits for its
/// own; a plan on that stage alone puts them together, and the smooth stage is levelled within each
/// micro-step by the restaging. So the summed cost and each stage alone are tried, and the one
/// whose micro-steps admit the least objective (their bound, step_stages::bound summed over
/// micro-steps; ties to the earlier: the summed cost first) is restaged. Should its restaged
/// objective exceed the summed plan's own, the summed plan is restaged instead: never above the
/// summed plan.
class stage_planner_base {
protected:
    /// Plans the n rows of `costs` (checked before): `plan_flat(scalars, slots)` plans one
    /// number a record into slots and returns its bcl::plan_summary (its steps the same for
    /// every scalar). The plan is left in m_slots, its flat summary in m_flat.
    template <class PlanFlat>
    stage_plan_summary plan_stages(std::span<const double> costs, std::size_t stages,
                                   std::size_t ranks, std::size_t n, PlanFlat&& plan_flat) {
        m_table.assign(costs, stages);
        m_scalar.resize(n);
        scalars_of(costs, stages, n, summed);
        m_slots.resize(n);
        m_flat = plan_flat(std::span<const double>(m_scalar), std::span<plan_slot>(m_slots));
        const std::size_t steps = m_flat.steps;
        const std::uint64_t summed_objective = objective_of(m_slots, ranks, steps);
        std::size_t chosen = stages; // the summed cost; d < stages: stage d alone
        // (With one micro-step every plan holds every record in it: nothing to choose.)
        if (stages > 1 && steps > 1) {
            std::uint64_t least = bound_of(m_slots, ranks, steps);
            m_tried.resize(n);
            for (std::size_t d = 0; d < stages; ++d) {
                scalars_of(costs, stages, n, d);
                const plan_summary f =
                    plan_flat(std::span<const double>(m_scalar), std::span<plan_slot>(m_tried));
                const std::uint64_t b = bound_of(m_tried, ranks, steps);
                if (b < least) {
                    least = b;
                    chosen = d;
                    m_slots.swap(m_tried);
                    m_flat = f;
                }
            }
        }
        restage_figures f =
            m_restager.restage(m_table, std::span<plan_slot>(m_slots), ranks, steps);
        if (f.objective > summed_objective) { // (only a stage's own steps can be above it)
            scalars_of(costs, stages, n, summed);
            m_flat = plan_flat(std::span<const double>(m_scalar), std::span<plan_slot>(m_slots));
            f = m_restager.restage(m_table, std::span<plan_slot>(m_slots), ranks, steps);
            chosen = stages;
        }
        f.summed_objective = summed_objective;
        m_figures = f;
        m_aligned_on = chosen;
        const double unit = m_table.unit;
        stage_plan_summary summary;
        summary.stages = stages;
        summary.ranks = ranks;
        summary.micro_steps = steps;
        summary.total = static_cast<double>(f.total) * unit;
        summary.objective = static_cast<double>(f.objective) * unit;
        summary.summed_objective = static_cast<double>(f.summed_objective) * unit;
        summary.lower_bound = static_cast<double>(f.lower_bound) * unit;
        summary.steps_restaged = f.steps_restaged;
        summary.steps_from_stage = chosen < stages ? static_cast<int>(chosen) : -1;
        return summary;
    }

    std::vector<plan_slot> m_slots; // the last plan
    plan_summary m_flat;            // the flat plan its micro-steps come from
    stage_table m_table;
    restage_figures m_figures; // of the last plan, in m_table's units
    std::size_t m_aligned_on = 0;

private:
    static constexpr std::size_t summed = max_stages; // scalars_of's "every stage"

    // Each record's number to plan on, into m_scalar: its summed cost (`stage` summed) or its
    // cost of one stage. One stage: the costs themselves, so that D = 1 plans as one cost a
    // record, bit for bit. More: the stage table's integers (below 2^32 for a record, so exact
    // as doubles), never a double sum, which could round differently under other flags, or
    // exceed bcl::max_estimate though no stage does.
    void scalars_of(std::span<const double> costs, std::size_t stages, std::size_t n,
                    std::size_t stage) {
        if (stages == 1) {
            std::copy(costs.begin(), costs.end(), m_scalar.begin());
            return;
        }
        for (std::size_t i = 0; i < n; ++i)
            m_scalar[i] =
                static_cast<double>(stage == summed ? m_table.sum(i) : m_table.of(i)[stage]);
    }

    // Per micro-step and stage, the ranks' loads' sum, the largest rank load and the dearest
    // record, into m_sums, m_top and m_dearest; m_load by step, rank, stage.
    void tally(std::span<const plan_slot> slots, std::size_t ranks, std::size_t steps) {
        const std::size_t d = m_table.stages;
        m_load.assign(steps * ranks * d, 0);
        m_dearest.assign(steps * d, 0);
        for (std::size_t i = 0; i < slots.size(); ++i) {
            const auto c = m_table.of(i);
            const std::size_t step = slots[i].step;
            for (std::size_t s = 0; s < d; ++s) {
                m_load[(step * ranks + slots[i].rank) * d + s] += c[s];
                m_dearest[step * d + s] = std::max(m_dearest[step * d + s], c[s]);
            }
        }
    }
    // The sum over micro-steps and stages of the slowest rank: the objective of `slots`.
    std::uint64_t objective_of(std::span<const plan_slot> slots, std::size_t ranks,
                               std::size_t steps) {
        tally(slots, ranks, steps);
        const std::size_t d = m_table.stages;
        std::uint64_t sum = 0;
        for (std::size_t step = 0; step < steps; ++step)
            for (std::size_t s = 0; s < d; ++s) {
                std::uint64_t top = 0;
                for (std::size_t r = 0; r < ranks; ++r)
                    top = std::max(top, m_load[(step * ranks + r) * d + s]);
                sum += top;
            }
        return sum;
    }
    // The least objective any sharing of `slots`' micro-steps among the ranks can have.
    std::uint64_t bound_of(std::span<const plan_slot> slots, std::size_t ranks, std::size_t steps) {
        tally(slots, ranks, steps);
        const std::size_t d = m_table.stages;
        std::uint64_t sum = 0;
        for (std::size_t step = 0; step < steps; ++step)
            for (std::size_t s = 0; s < d; ++s) {
                std::uint64_t total = 0;
                for (std::size_t r = 0; r < ranks; ++r) total += m_load[(step * ranks + r) * d + s];
                sum += std::max((total + ranks - 1) / ranks, m_dearest[step * d + s]);
            }
        return sum;
    }

    std::vector<double> m_scalar;
    std::vector<plan_slot> m_tried;
    std::vector<std::uint64_t> m_load, m_dearest;
    step_restager m_restager;
};

} // namespace detail::stages

/// Plans held batches of stage costs, keeping its scratch between them.
class held_stage_planner : detail::stages::stage_planner_base {
public:
    /// Plans the held batch whose record i has the D = `stages` costs costs[i*D .. i*D+D) (n
    /// records, n a multiple of R) into out[i] = {micro-step, rank}: the micro-steps of
    /// bcl::held_batch_planner::plan's plan of the records' summed costs or of one stage's
    /// alone, whichever admits the least objective (every rank m = n / R records in
    /// ceil(m / B) micro-steps of B but the last; stage_planner_base says how), then each
    /// micro-step's records shared among its ranks again, every rank keeping its count, where
    /// that lowers the micro-step's sum over stages of the largest rank load (a deal by stage
    /// and swaps, from the plan's ranks and afresh; the lighter kept, ties to the plan's). The
    /// objective is never above the summed plan's. With D = 1 it is held_batch_planner's plan,
    /// unchanged. With D > 1 every choice is made on the stage table's integers: the same on
    /// every rank, compiler and flag.
    ///
    /// Throws bcl::error (prefixed with `who`) for what check_stage_costs refuses (naming the
    /// record and stage), and what held_batch_planner::plan throws, changing nothing.
    /// O(n log n + n * R * B * D) per pass.
    stage_plan_summary plan(std::span<const double> costs, std::size_t stages, std::size_t ranks,
                            std::size_t batch, const plan_options& opt, std::span<plan_slot> out,
                            std::string_view who = "bcl::held_stage_planner") {
        const std::size_t n = check_stage_costs(costs, stages, who);
        if (out.size() != n)
            throw error(std::string(who) + ": the plan has " + std::to_string(out.size()) +
                        " slots for " + std::to_string(n) + " records");
        const stage_plan_summary summary = plan_stages(
            costs, stages, ranks, n, [&](std::span<const double> scalars, std::span<plan_slot> to) {
                return m_held.plan(scalars, ranks, batch, opt, to, who);
            });
        std::copy(m_slots.begin(), m_slots.end(), out.begin());
        return summary;
    }

private:
    held_batch_planner m_held;
};

/// Plans windows of a global plan of stage costs (a stream's R*K*B records at a time), keeping
/// its scratch between them.
class stage_window_planner : detail::stages::stage_planner_base {
public:
    /// Plans the window whose record i has the D = `stages` costs costs[i*D .. i*D+D) into
    /// out[i] = {step, rank}: the steps of bcl::global_planner::plan's plan in `shape` of the
    /// summed costs or of one stage's alone, whichever admits the least objective (B records a
    /// rank a step but the last), then each step's records shared among its ranks again by
    /// stage as held_stage_planner shares a micro-step's. With D = 1 it is global_planner's
    /// plan, unchanged. window_summary() gives the same figures as a
    /// bcl::plan_summary (of the stage objective, in this plan's fixed point), for an epoch's
    /// sums.
    ///
    /// Throws bcl::error (prefixed with `who`) for what check_stage_costs and
    /// global_planner::plan refuse, changing nothing. O(n log n + n * R * B * D) per pass.
    stage_plan_summary plan(std::span<const double> costs, std::size_t stages,
                            const plan_shape& shape, const plan_options& opt,
                            std::span<plan_slot> out,
                            std::string_view who = "bcl::stage_window_planner") {
        const std::size_t n = check_stage_costs(costs, stages, who);
        if (out.size() != n)
            throw error(std::string(who) + ": the plan has " + std::to_string(out.size()) +
                        " slots for " + std::to_string(n) + " records");
        const stage_plan_summary summary =
            plan_stages(costs, stages, shape.ranks, n,
                        [&](std::span<const double> scalars, std::span<plan_slot> to) {
                            return m_global.plan(scalars, shape, opt, to);
                        });
        std::copy(m_slots.begin(), m_slots.end(), out.begin());
        m_stages = stages;
        return summary;
    }

    /// The last plan's figures as a bcl::plan_summary: with D = 1 global_planner's own; else its
    /// digest plan_digest of the plan, its total, objective and lower bound the stage figures
    /// in the stage table's fixed point (its unit 2^-scale), heaviest the dearest step.
    [[nodiscard]] plan_summary window_summary() const {
        if (m_stages == 1) return m_flat;
        plan_summary s = m_flat;
        s.digest = plan_digest(m_slots);
        s.scale = -std::ilogb(m_table.unit);
        s.total = m_figures.total;
        s.objective = m_figures.objective;
        s.lower_bound = m_figures.lower_bound;
        s.heaviest = m_figures.heaviest;
        return s;
    }

private:
    global_planner m_global;
    std::size_t m_stages = 1;
};

} // namespace bcl
