#pragma once
// `global` of micro-batch mode: bcl's token plan (bcl::token_planner), the same plan computed by
// every rank over the shared global order, each rank keeping its share.

#include "policy_runner.hpp"
#include "token_runner.hpp"
#include "token_windows.hpp"

#include <bcl/token_budget.hpp>
#include <bcl/token_plan.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace bcl_sim {

/// `global`: bcl's token plan. Held batches: every rank computes the same
/// bcl::token_planner::plan_held of K held batches pooled (the step's global batch alone at
/// K = 1) and keeps its share; records move between ranks and, with K > 1, between the pool's
/// steps (a record's delay: how far from the step it was drawn in), each step of the pool with
/// its own micro-batch count (token_plan_summary::micro_batches_in). A stream of steps: windows
/// of K steps planned by plan_stream over the shared order, each taking as many records from
/// where the last window ended as it packs into K steps of M micro-batches on every rank, the
/// window's candidates being those the library's window rule lets in (stream_window_records), as
/// bcl::token_epoch_planner walks an epoch. A stream record's drawn step is where the window's
/// records, in order, would fall if each step took R*M*T of their tokens.
class token_global_runner final : public token_runner {
public:
    explicit token_global_runner(const sim_context& ctx) : m_ctx(ctx), m_reader(m_ctx) {
        m_opt.oversized_alone = ctx.tokens.oversized_alone;
        m_opt.max_fill = ctx.tokens.max_fill;
        m_budget = {ctx.ranks, *ctx.tokens.max_tokens, ctx.tokens.multiple_of};
    }

    token_block run(std::size_t first, std::size_t limit) override {
        const std::size_t steps = std::min(m_ctx.lookahead, limit);
        const bcl::token_plan_summary s =
            m_ctx.tokens.held() ? plan_held(first, steps) : plan_window(steps);
        check_counts(s, steps);
        token_block_builder out(m_ctx, first, steps);
        for (std::size_t k = 0; k < steps; ++k) out.set_count(k, s.micro_batches_in(k));
        find_drawn_steps(first, steps);
        for (std::size_t i = 0; i < m_items.size(); ++i) {
            const bcl::micro_slot& slot = m_slots[i];
            out.put(slot.step, slot.rank, slot.micro, m_items[i], m_items[i].length, m_drawn[i]);
        }
        out.set_bound(s.micro_steps_bound);
        m_max_delay = std::max(m_max_delay, out.max_delay());
        m_records += out.records();
        m_oversized += s.oversized;
        m_reader.release_before(m_next);
        return out.take();
    }

    [[nodiscard]] token_extras extras() const override {
        std::string note = m_ctx.tokens.held()
                               ? fmt::format("bcl::token_planner::plan_held of {} held batch{} "
                                             "at a time",
                                             m_ctx.lookahead, m_ctx.lookahead == 1 ? "" : "es")
                               : fmt::format("bcl::token_planner::plan_stream, windows of {} "
                                             "steps",
                                             m_ctx.lookahead);
        if (m_oversized > 0)
            note += fmt::format("; {} records above T, each alone in a micro-batch", m_oversized);
        return {m_max_delay, m_records, note};
    }

    [[nodiscard]] bool pads() const noexcept override { return false; }

private:
    // The K held batches from step `first` on, pooled in one plan.
    bcl::token_plan_summary plan_held(std::size_t first, std::size_t steps) {
        const std::uint64_t per_step = std::uint64_t{m_ctx.ranks} * *m_ctx.tokens.step_records;
        const std::uint64_t begin = first * per_step;
        m_items.clear();
        for (std::uint64_t i = 0; i < per_step * steps; ++i)
            m_items.push_back(m_reader.at(begin + i));
        read_window();
        m_next = begin + per_step * steps;
        return m_planner.plan_held(m_tokens, m_costs, {}, m_budget, steps, m_opt, m_slots,
                                   "global");
    }

    // The stream's next window of K steps: its candidates, of which the plan takes a prefix.
    bcl::token_plan_summary plan_window(std::size_t steps) {
        const std::size_t candidates = stream_window_records(m_ctx, m_reader, m_next, steps);
        m_items.clear();
        for (std::size_t i = 0; i < candidates; ++i) m_items.push_back(m_reader.at(m_next + i));
        read_window();
        const bcl::token_plan_summary s =
            m_planner.plan_stream(m_tokens, m_costs, m_budget, *m_ctx.tokens.micro_batches, steps,
                                  false, m_opt, m_slots, "global");
        m_items.resize(s.records);
        m_next += s.records;
        return s;
    }

    // A plan of `steps` steps whose counts add up to its micro-steps: what the builder's steps
    // are sized by. A mismatch is a misreading of the summary, never a result.
    static void check_counts(const bcl::token_plan_summary& s, std::size_t steps) {
        std::size_t counted = 0;
        for (std::size_t k = 0; k < s.steps; ++k) counted += s.micro_batches_in(k);
        if (s.steps != steps || counted != s.micro_steps)
            throw std::logic_error(fmt::format("global: a plan of {} steps gave {} steps whose "
                                               "counts add up to {}, not its {} micro-steps",
                                               steps, s.steps, counted, s.micro_steps));
    }

    // The step each record of the plan from step `first` on was drawn in: its held batch's; in a
    // stream, where the window's records, in order, would fall if each step took R*M*T of their
    // tokens.
    void find_drawn_steps(std::size_t first, std::size_t steps) {
        const token_settings& t = m_ctx.tokens;
        const std::size_t r = m_ctx.ranks;
        const double per_step = t.held() ? 0.0
                                         : static_cast<double>(r * *t.micro_batches) *
                                               static_cast<double>(*t.max_tokens);
        m_drawn.resize(m_items.size());
        double before = 0.0; // a stream window's tokens before record i
        for (std::size_t i = 0; i < m_items.size(); ++i) {
            m_drawn[i] =
                t.held() ? first + i / (r * *t.step_records)
                         : first + std::min<std::uint64_t>(
                                       steps - 1, static_cast<std::uint64_t>(before / per_step));
            before += m_items[i].length;
        }
    }

    void read_window() {
        m_tokens.resize(m_items.size());
        m_costs.resize(m_items.size());
        m_slots.resize(m_items.size());
        for (std::size_t i = 0; i < m_items.size(); ++i) {
            m_tokens[i] = tokens_of(m_items[i]);
            m_costs[i] = m_items[i].cost;
        }
    }

    sim_context m_ctx;
    global_reader m_reader;
    bcl::token_planner m_planner;
    bcl::token_plan_options m_opt;
    bcl::token_budget m_budget;
    std::vector<sample> m_items;
    std::vector<std::uint64_t> m_tokens;
    std::vector<double> m_costs;
    std::vector<bcl::micro_slot> m_slots;
    std::uint64_t m_next = 0;           // the first position not yet planned
    std::vector<std::uint64_t> m_drawn; // by record: the step it was drawn in
    std::uint64_t m_max_delay = 0;
    std::uint64_t m_records = 0;
    std::size_t m_oversized = 0;
};

} // namespace bcl_sim
