#pragma once
// A global batch a trainer already holds (RL rollouts: every rank's records of one optimizer
// step), planned into micro-batches of B records on each of R ranks, aligned across ranks by
// cost, and never worse per micro-step than the way verl splits such a batch.

#include <bcl/detail/config.hpp>

#include <bcl/detail/plan/kk_groups.hpp>
#include <bcl/detail/plan/quantize.hpp>
#include <bcl/error.hpp>
#include <bcl/global_plan.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bcl {

/// Plans held batches, keeping its scratch between them.
class held_batch_planner {
public:
    /// Plans the held batch `costs` (n records, n a multiple of R) into out[i] = {micro-step,
    /// rank} of record i: every rank gets m = n / R records in ceil(m / B) micro-steps (at least
    /// one), B each but the last, which holds the rest on every rank. The plan is the global
    /// plan of one window of those micro-steps (global_planner::plan, K = ceil(m / B)), or,
    /// where it is lighter, the way verl's balance_batch splits the batch (R groups of m by
    /// balanced Karmarkar-Karp, bcl::detail::plan::kk_groups, each rank's micro-batches its
    /// group's records in input order): the sum over micro-steps of the slowest rank's
    /// micro-batch is never above that of verl's split (packed batching; padded plans are optimal
    /// already). Integers only, ties to the global plan: the same on every rank, compiler and
    /// flag. The summary describes the plan kept.
    ///
    /// Throws bcl::error (prefixed with `who`) for R or B of 0, n not a multiple of R, a plan of
    /// more than bcl::max_plan_records records, out.size() != n, and whatever global_planner
    /// refuses (a bad cost, named by its index and value; bad options), changing nothing.
    /// O(n log n).
    plan_summary plan(std::span<const double> costs, std::size_t ranks, std::size_t batch,
                      const plan_options& opt, std::span<plan_slot> out,
                      std::string_view who = "bcl::held_batch_planner") {
        const std::size_t n = costs.size();
        if (ranks == 0 || batch == 0)
            throw error(std::string(who) + ": the ranks (" + std::to_string(ranks) +
                        ") and the micro-batch size (" + std::to_string(batch) +
                        ") must be at least 1");
        if (n % ranks != 0)
            throw error(std::string(who) + ": " + std::to_string(n) +
                        " records do not split equally over " + std::to_string(ranks) +
                        " ranks; give a multiple of the ranks");
        const std::size_t per_rank = n / ranks;
        const std::size_t steps = std::max<std::size_t>(1, (per_rank + batch - 1) / batch);
        if (batch > max_plan_records / ranks || steps > max_plan_records / (ranks * batch))
            throw error(std::string(who) + ": " + std::to_string(n) +
                        " records in micro-batches "
                        "of " +
                        std::to_string(batch) + " on " + std::to_string(ranks) +
                        " ranks make a plan of more than the " + std::to_string(max_plan_records) +
                        " records one plan may hold");
        const plan_shape shape{.ranks = ranks, .steps = steps, .batch = batch};
        plan_summary summary = m_planner.plan(costs, shape, opt, out);
        if (opt.batching == batch_cost::packed && steps > 1)
            verl_if_lighter(costs, shape, opt, out, summary);
        return summary;
    }

private:
    // verl's split of the batch, in the summary's fixed-point units: it replaces the plan in
    // `out` when its objective is smaller.
    void verl_if_lighter(std::span<const double> costs, const plan_shape& shape,
                         const plan_options& opt, std::span<plan_slot> out, plan_summary& summary) {
        namespace qz = detail::plan;
        const std::size_t n = costs.size();
        // The planner's own quantization: the same cap, largest cost and capacity.
        const std::uint64_t cap = qz::cap_bits(opt.cap, "bcl::held_batch_planner");
        const std::uint64_t largest = qz::checked_largest(costs, cap, "bcl::held_batch_planner");
        const qz::fixed_point scale =
            qz::scale_for(largest, shape.ranks * shape.steps * shape.batch);
        m_q.resize(n);
        qz::quantize(costs, cap, scale, m_q);
        m_kk.split(m_q, shape.ranks);
        // Micro-step j of rank r: the j-th B records of group r, in input order.
        m_step_top.assign(shape.steps, 0);
        for (std::size_t r = 0; r < shape.ranks; ++r) {
            m_kk.members(r, m_members);
            for (std::size_t first = 0, j = 0; first < m_members.size();
                 first += shape.batch, ++j) {
                std::uint64_t load = 0;
                const std::size_t last = std::min(first + shape.batch, m_members.size());
                for (std::size_t i = first; i < last; ++i) load += m_q[m_members[i]];
                m_step_top[j] = std::max(m_step_top[j], load);
            }
        }
        std::uint64_t objective = 0;
        std::uint64_t heaviest = 0;
        for (const std::uint64_t top : m_step_top) {
            objective += top;
            heaviest = std::max(heaviest, top);
        }
        if (objective >= summary.objective) return;
        for (std::size_t r = 0; r < shape.ranks; ++r) {
            m_kk.members(r, m_members);
            for (std::size_t i = 0; i < m_members.size(); ++i)
                out[m_members[i]] = {static_cast<std::uint32_t>(i / shape.batch),
                                     static_cast<std::uint32_t>(r)};
        }
        summary.objective = objective;
        summary.heaviest = heaviest;
        summary.digest = plan_digest(out);
    }

    global_planner m_planner;
    detail::plan::kk_groups m_kk;
    std::vector<std::uint64_t> m_q;
    std::vector<std::uint32_t> m_members;
    std::vector<std::uint64_t> m_step_top;
};

/// The plan of one held batch, as held_batch_planner::plan() computes it (see there).
[[nodiscard]] inline std::vector<plan_slot> plan_held_batch(std::span<const double> costs,
                                                            std::size_t ranks, std::size_t batch,
                                                            const plan_options& opt = {}) {
    std::vector<plan_slot> out(costs.size());
    held_batch_planner planner;
    (void)planner.plan(costs, ranks, batch, opt, out);
    return out;
}

} // namespace bcl
