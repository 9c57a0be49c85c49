#pragma once
// `global_fixed` of micro-batch mode: bcl's fixed-B global plan on the same records as the token
// policies, micro-batches of B records whatever their tokens: the paper's shape beside the token
// shape.

#include "policy_runner.hpp"
#include "token_runner.hpp"

#include <bcl/epoch_plan.hpp>
#include <bcl/global_plan.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace bcl_sim {

/// global_fixed's B when --batch is not given: the records of the workload's mean length that
/// fit T, at least 1. A trainer without a token budget picks its micro-batch size so.
[[nodiscard]] inline std::size_t fixed_batch_for(std::uint64_t max_tokens, double mean_length) {
    if (!(mean_length > 0.0)) return 1;
    return std::max<std::size_t>(
        1, static_cast<std::size_t>(std::floor(static_cast<double>(max_tokens) / mean_length)));
}

/// `global_fixed`: bcl's fixed-B global plan (bcl::epoch_planner, bcl::global_planner) with
/// micro-batches of B records (token_settings::fixed_batch), which may exceed T (counted in
/// over_budget). Held batches: the K pooled held batches' K*N records a rank are one window of
/// Q = ceil(K*N / B) micro-steps (the last short), micro-step q in step floor(q K / Q). A stream
/// of steps: windows of K steps of M micro-batches of B records, R*K*M*B records each, so a step
/// takes R*M*B records (drawn in step position / (R*M*B)).
class token_fixed_runner final : public token_runner {
public:
    explicit token_fixed_runner(const sim_context& ctx) : m_ctx(ctx), m_reader(m_ctx) {}

    token_block run(std::size_t first, std::size_t limit) override {
        const std::size_t steps = std::min(m_ctx.lookahead, limit);
        const token_settings& t = m_ctx.tokens;
        const std::size_t r = m_ctx.ranks;
        const std::size_t b = t.fixed_batch;
        const std::size_t per_step = t.held() ? *t.step_records : *t.micro_batches * b;
        const std::size_t per_rank = per_step * steps;
        const std::size_t micro_steps =
            t.held() ? (per_rank + b - 1) / b : steps * *t.micro_batches;
        const std::uint64_t begin = std::uint64_t{first} * r * per_step;
        const std::size_t n = r * per_rank;
        m_items.resize(n);
        m_costs.resize(n);
        m_order.resize(n);
        double tokens = 0.0;
        for (std::size_t i = 0; i < n; ++i) {
            m_items[i] = m_reader.at(begin + i);
            m_costs[i] = m_items[i].cost;
            m_order[i] = i;
            tokens += m_items[i].length;
        }
        // Micro-step q's step and micro-batch in it.
        m_step_of.resize(micro_steps);
        m_micro_of.resize(micro_steps);
        token_block_builder out(m_ctx, first, steps);
        for (std::size_t q = 0, count = 0; q < micro_steps; ++q) {
            m_step_of[q] = t.held() ? q * steps / micro_steps : q / *t.micro_batches;
            count = q > 0 && m_step_of[q] == m_step_of[q - 1] ? count + 1 : 0;
            m_micro_of[q] = count;
            out.set_count(m_step_of[q], count + 1);
        }
        const bcl::epoch_shape shape{.ranks = r, .lookahead = micro_steps, .batch = b};
        (void)m_planner.plan(
            std::span<const double>(m_costs), std::span<const std::size_t>(m_order), shape,
            bcl::plan_options{},
            [&](std::size_t, std::span<const bcl::plan_slot> slots, const bcl::plan_summary&) {
                for (std::size_t i = 0; i < slots.size(); ++i) {
                    const std::size_t q = slots[i].step;
                    out.put(m_step_of[q], slots[i].rank, m_micro_of[q], m_items[i],
                            m_items[i].length, first + i / (r * per_step));
                }
            });
        out.set_bound(token_bound(tokens, r, *t.max_tokens));
        m_max_delay = std::max(m_max_delay, out.max_delay());
        m_records += out.records();
        m_reader.release_before(begin + n);
        return out.take();
    }

    [[nodiscard]] token_extras extras() const override {
        return {m_max_delay, m_records,
                fmt::format("micro-batches of B = {} records (bcl::epoch_planner), whatever "
                            "their tokens",
                            m_ctx.tokens.fixed_batch)};
    }

private:
    sim_context m_ctx;
    global_reader m_reader;
    bcl::epoch_planner m_planner;
    std::vector<sample> m_items;
    std::vector<double> m_costs;
    std::vector<std::size_t> m_order;
    std::vector<std::size_t> m_step_of;
    std::vector<std::size_t> m_micro_of;
    std::uint64_t m_max_delay = 0;
    std::uint64_t m_records = 0;
};

} // namespace bcl_sim
