#pragma once
// The global policy: bcl::global_planner over all ranks' records of each K-step window.

#include "policy_runner.hpp"

#include <bcl/epoch_plan.hpp>
#include <bcl/global_plan.hpp>
#include <bcl/statistics.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace bcl_sim {

/// The library's cap for a global plan: a fixed cap that clips (the plan balances min(cost, cap),
/// records untouched); nothing otherwise. A truncating cap has already shortened the records
/// (make_baseline's stream_cap); a quantile cap has no fixed value to give a plan that every rank
/// must compute alike, so the plan runs uncapped.
[[nodiscard]] inline double global_plan_cap(const bcl::cap_options& cap) noexcept {
    return cap.kind == bcl::cap_kind::fixed && cap.action == bcl::cap_action::clip ? cap.value
                                                                                   : 0.0;
}

/// `global`: every rank computes the same bcl::global_planner plan of the window's K steps from
/// the shared permutation and cost table, and keeps its own share: coordinated, with no
/// communication. For each window of K steps, rank r's records are its K*B-record window (the
/// records tumbling and sliding see), all R ranks' together in rank order; each record is charged
/// to the (step, rank) the plan gives it. Records move between ranks and within the window, never
/// beyond it (a record waits at most K-1 steps). `level_steps` is bcl::plan_options::level_steps
/// (the policy `global_flat` runs without it).
class global_runner final : public policy_runner {
public:
    global_runner(const sim_context& ctx, bool level_steps) : m_ctx(ctx) {
        m_opt.batching = ctx.batching;
        m_opt.cap = global_plan_cap(ctx.cap);
        m_opt.level_steps = level_steps;
        m_order.resize(ctx.ranks * ctx.lookahead * ctx.batch);
        for (std::size_t i = 0; i < m_order.size(); ++i) m_order[i] = i;
    }

    void run(std::size_t first, std::size_t count, step_block out) override {
        const std::size_t R = m_ctx.ranks;
        const std::size_t B = m_ctx.batch;
        const std::size_t window = m_ctx.lookahead * B;
        const std::size_t n = R * window;
        m_items.resize(n);
        m_costs.resize(n);
        for (std::size_t r = 0; r < R; ++r)
            for (std::size_t i = 0; i < window; ++i) {
                m_items[r * window + i] = fetch(m_ctx, r, std::uint64_t{first} * B + i);
                m_costs[r * window + i] = m_items[r * window + i].cost;
            }
        // The window is an epoch of one window: its records in rank order, every rank's K*B.
        (void)m_planner.plan(std::span<const double>(m_costs),
                             std::span<const std::size_t>(m_order), shape(), m_opt,
                             [&](std::size_t, std::span<const bcl::plan_slot> slots,
                                 const bcl::plan_summary& summary) {
                                 m_gap.add(summary.gap());
                                 charge(first, count, slots, out);
                             });
    }

    [[nodiscard]] policy_extras extras() const override {
        policy_extras e;
        e.mean_gap_to_lb = m_gap.mean();
        e.max_delay_batches = m_max_delay;
        e.capped = m_capped;
        return e;
    }

private:
    // Charges each record of the window to the (step, rank) the plan gave it.
    void charge(std::size_t first, std::size_t count, std::span<const bcl::plan_slot> plan,
                step_block out) {
        const std::size_t R = m_ctx.ranks;
        const std::size_t B = m_ctx.batch;
        const std::size_t window = m_ctx.lookahead * B;
        for (std::size_t i = 0; i < plan.size(); ++i) {
            const std::size_t t = plan[i].step;
            const std::size_t r = plan[i].rank;
            if (t >= count) continue; // past the end of the run
            out.charge(t, r, R, m_items[i]);
            // Truncated by the stream, or clipped by the plan's cap.
            m_capped += m_items[i].capped || (m_opt.cap > 0.0 && m_items[i].cost > m_opt.cap);
            const std::size_t s = first + t;
            observe(m_ctx, s, r, m_items[i].id);
            const std::uint64_t arrival =
                arrival_step(m_ctx, std::uint64_t{first} * B + i % window);
            if (s > arrival) m_max_delay = std::max<std::uint64_t>(m_max_delay, s - arrival);
        }
    }

    [[nodiscard]] bcl::epoch_shape shape() const noexcept {
        return {.ranks = m_ctx.ranks, .lookahead = m_ctx.lookahead, .batch = m_ctx.batch};
    }

    sim_context m_ctx;
    bcl::plan_options m_opt;
    bcl::epoch_planner m_planner;
    std::vector<std::size_t> m_order; // 0, 1, ..., R*K*B - 1: a window's records in rank order
    std::vector<sample> m_items;
    std::vector<double> m_costs;
    bcl::running_stats m_gap;
    std::uint64_t m_max_delay = 0;
    std::uint64_t m_capped = 0;
};

} // namespace bcl_sim
