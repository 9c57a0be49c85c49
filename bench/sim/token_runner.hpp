#pragma once
// The policies of micro-batch mode (--max-tokens): where each step's records lie in the global
// order (held batches or a stream of steps), bcl's plans (global: bcl::token_planner;
// global_fixed: bcl's fixed-B global plan) and the peers of token_peers.hpp run step by step.

#include "input.hpp"
#include "policy_runner.hpp"
#include "token_metrics.hpp"
#include "token_peers.hpp"

#include <bcl/epoch_plan.hpp>
#include <bcl/global_plan.hpp>
#include <bcl/token_epoch_plan.hpp>
#include <bcl/token_plan.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace bcl_sim {

/// Reads rank `rank`'s index-th record as fetch() does. Throws input_error for a record above
/// --max-tokens unless --oversized alone.
[[nodiscard]] inline sample token_fetch(const sim_context& ctx, std::size_t rank,
                                        std::uint64_t index) {
    const sample x = fetch(ctx, rank, index);
    const auto t = static_cast<double>(ctx.tokens.max_tokens.value_or(0));
    if (x.length > t && !ctx.tokens.oversized_alone)
        throw input_error(fmt::format(
            "record {} of rank {} has {} tokens, above --max-tokens {}; pass --oversized alone to "
            "give such a record a micro-batch of its own, or a larger --max-tokens",
            index, rank, x.length, t));
    return x;
}

/// The global sampler order, read forward: position p is rank p mod R's record p / R, as in
/// fixed-B mode, so a step of R*N positions from a multiple of R gives every rank N records of
/// its own stream.
class global_reader {
public:
    explicit global_reader(const sim_context& ctx) : m_ctx(ctx) {}

    /// The record at position p (not before the last release_before()).
    [[nodiscard]] const sample& at(std::uint64_t p) {
        while (m_base + m_items.size() <= p) {
            const std::uint64_t q = m_base + m_items.size();
            m_items.push_back(token_fetch(m_ctx, q % m_ctx.ranks, q / m_ctx.ranks));
        }
        return m_items[p - m_base];
    }
    /// Forgets the records before position p.
    void release_before(std::uint64_t p) {
        for (; m_base < p && !m_items.empty(); ++m_base) m_items.pop_front();
    }

private:
    sim_context m_ctx;
    std::deque<sample> m_items; // positions m_base, m_base + 1, ...
    std::uint64_t m_base = 0;
};

/// What a token-mode policy gives for a stretch of steps: the steps, and the token bound of the
/// unit they were planned as (a step, a pool of held batches, or a stream window).
struct token_block {
    std::vector<token_step> steps;
    std::size_t bound = 0;
};

/// What a token-mode policy reports besides its micro-batches.
struct token_extras {
    /// The most steps a record ran away from the step it was drawn in (token_runner.hpp's runners
    /// say which step that is).
    std::uint64_t max_delay_steps = 0;
    std::uint64_t records = 0; ///< records trained
    std::string note;          ///< anything the reader should know about this run of the policy
};

/// One micro-batch-mode policy, advanced a planning unit at a time.
class token_runner {
public:
    virtual ~token_runner() = default;
    /// Runs the steps from `first` on (consecutive calls from step 0): at least one and at most
    /// `limit` of them.
    virtual token_block run(std::size_t first, std::size_t limit) = 0;
    [[nodiscard]] virtual token_extras extras() const = 0;
    /// Whether the policy may give a rank an empty (padding) micro-batch; bcl's plans never do.
    [[nodiscard]] virtual bool pads() const noexcept { return true; }
};

/// Builds a token_block's steps and tallies delay and records: the common bookkeeping of every
/// runner. Each record is put once per piece; the first piece of a record is observed (the
/// emit observer) and counts for delay.
class token_block_builder {
public:
    token_block_builder(const sim_context& ctx, std::size_t first, std::size_t steps)
        : m_ctx(&ctx), m_first(first) {
        m_block.steps.resize(steps);
        for (token_step& s : m_block.steps) s.ranks.resize(ctx.ranks);
    }

    /// Rank `rank` runs `micro` micro-batches in step `t` of the block.
    void set_count(std::size_t t, std::size_t rank, std::size_t micro) {
        m_block.steps[t].ranks[rank].resize(micro);
    }
    /// Gives every rank `micro` micro-batches in step `t`.
    void set_count(std::size_t t, std::size_t micro) {
        for (std::size_t r = 0; r < m_ctx->ranks; ++r) set_count(t, r, micro);
    }

    /// `tokens` of record `x` in step t's micro-batch j of rank r, drawn in step `drawn` of the
    /// run. `first_piece`: the first (or only) piece of the record.
    void put(std::size_t t, std::size_t rank, std::size_t j, const sample& x, double tokens,
             std::uint64_t drawn, bool first_piece = true) {
        std::vector<micro_load>& mbs = m_block.steps[t].ranks[rank];
        if (j >= mbs.size())
            throw std::logic_error(fmt::format("micro-batch {} of rank {} in step {}: the step "
                                               "has {}",
                                               j, rank, m_first + t, mbs.size()));
        micro_load& mb = mbs[j];
        mb.tokens += tokens;
        mb.cost += tokens == x.length ? x.cost : m_ctx->cost(tokens);
        ++mb.pieces;
        mb.heavy += 2 * tokens > static_cast<double>(*m_ctx->tokens.max_tokens) ? 1 : 0;
        if (!first_piece) return;
        ++m_records;
        const std::uint64_t step = m_first + t;
        m_max_delay = std::max(m_max_delay, step > drawn ? step - drawn : drawn - step);
        observe(*m_ctx, step, rank, x.id);
    }

    void set_bound(std::size_t bound) noexcept { m_block.bound = bound; }

    [[nodiscard]] token_block take() { return std::move(m_block); }
    [[nodiscard]] std::uint64_t max_delay() const noexcept { return m_max_delay; }
    [[nodiscard]] std::uint64_t records() const noexcept { return m_records; }

private:
    const sim_context* m_ctx;
    std::size_t m_first;
    token_block m_block;
    std::uint64_t m_max_delay = 0;
    std::uint64_t m_records = 0;
};

/// ceil(tokens / (R*T)): the fewest micro-steps that hold `tokens` on R ranks.
[[nodiscard]] inline std::size_t token_bound(double tokens, std::size_t ranks,
                                             std::uint64_t max_tokens) {
    return static_cast<std::size_t>(
        std::ceil(tokens / (static_cast<double>(ranks) * static_cast<double>(max_tokens))));
}

/// A record's tokens as a plan counts them toward a window: at most T (a record above T takes a
/// micro-batch of its own).
[[nodiscard]] inline double window_tokens(const sample& x, std::uint64_t max_tokens) noexcept {
    return std::min(x.length, static_cast<double>(max_tokens));
}

/// Where the steps of a policy that runs step by step lie in the global order. Held batches:
/// step s is positions [s R N, (s+1) R N). A stream of steps: each step the next records from
/// where the last ended, R at a time (every rank as many), as long as their tokens, each counted
/// at most T, fit the step's R*M*T (at least R records).
class step_cursor {
public:
    step_cursor(const sim_context& ctx, global_reader& reader) : m_ctx(&ctx), m_reader(&reader) {}

    /// The positions [begin, end) of step `step` (steps asked in order from 0).
    [[nodiscard]] std::pair<std::uint64_t, std::uint64_t> next(std::size_t step) {
        const std::size_t r = m_ctx->ranks;
        const token_settings& t = m_ctx->tokens;
        if (t.held()) {
            const std::uint64_t n = std::uint64_t{r} * *t.step_records;
            return {step * n, (step + 1) * n};
        }
        const double capacity =
            static_cast<double>(r * *t.micro_batches) * static_cast<double>(*t.max_tokens);
        std::uint64_t end = m_next;
        double tokens = 0.0;
        for (;;) {
            double group = 0.0;
            for (std::size_t k = 0; k < r; ++k)
                group += window_tokens(m_reader->at(end + k), *t.max_tokens);
            if (end > m_next && tokens + group > capacity) break;
            tokens += group;
            end += r;
        }
        const std::pair<std::uint64_t, std::uint64_t> out{m_next, end};
        m_next = end;
        return out;
    }

private:
    const sim_context* m_ctx;
    global_reader* m_reader;
    std::uint64_t m_next = 0;
};

/// How a peer plans a step: its records' lengths and costs in sampler order (a multiple of R of
/// them) to every rank's micro-batches.
using peer_plan = std::function<rank_micro_batches(
    std::span<const double> lengths, std::span<const double> costs, const sim_context& ctx)>;

/// A peer (token_peers.hpp), step by step on step_cursor's records: every record runs in the
/// step it was drawn in (no delay).
class token_peer_runner final : public token_runner {
public:
    token_peer_runner(const sim_context& ctx, peer_plan plan, std::string note)
        : m_ctx(ctx), m_reader(m_ctx), m_cursor(m_ctx, m_reader), m_plan(std::move(plan)),
          m_note(std::move(note)) {}

    token_block run(std::size_t first, std::size_t) override {
        const auto [begin, end] = m_cursor.next(first);
        const std::size_t n = static_cast<std::size_t>(end - begin);
        m_items.resize(n);
        m_lengths.resize(n);
        m_costs.resize(n);
        double tokens = 0.0;
        for (std::size_t i = 0; i < n; ++i) {
            m_items[i] = m_reader.at(begin + i);
            m_lengths[i] = m_items[i].length;
            m_costs[i] = m_items[i].cost;
            tokens += m_lengths[i];
        }
        const rank_micro_batches plan = m_plan(m_lengths, m_costs, m_ctx);
        token_block_builder out(m_ctx, first, 1);
        std::vector<double> placed(n, 0.0);
        for (std::size_t r = 0; r < plan.size() && r < m_ctx.ranks; ++r) {
            out.set_count(0, r, plan[r].size());
            for (std::size_t j = 0; j < plan[r].size(); ++j)
                for (const piece& p : plan[r][j]) {
                    out.put(0, r, j, m_items[p.item], p.tokens, first, placed[p.item] == 0.0);
                    placed[p.item] += p.tokens;
                }
        }
        for (std::size_t i = 0; i < n; ++i)
            if (placed[i] != m_lengths[i])
                throw std::logic_error(fmt::format("step {}: a peer placed {} of record {}'s {} "
                                                   "tokens",
                                                   first, placed[i], m_items[i].id, m_lengths[i]));
        out.set_bound(token_bound(tokens, m_ctx.ranks, *m_ctx.tokens.max_tokens));
        m_records += out.records();
        m_reader.release_before(end);
        return out.take();
    }

    [[nodiscard]] token_extras extras() const override { return {0, m_records, m_note}; }

private:
    sim_context m_ctx;
    global_reader m_reader;
    step_cursor m_cursor;
    peer_plan m_plan;
    std::string m_note;
    std::vector<sample> m_items;
    std::vector<double> m_lengths;
    std::vector<double> m_costs;
    std::uint64_t m_records = 0;
};

/// `global`: bcl's token plan. Held batches: every rank computes the same
/// bcl::token_planner::plan_held of K held batches pooled (the step's global batch alone at
/// K = 1) and keeps its share; records move between ranks and, with K > 1, between the pool's
/// steps (a record's delay: how far from the step it was drawn in). A stream of steps: windows of
/// K steps planned by plan_stream over the shared order, each taking as many records from where
/// the last window ended as it packs into K steps of M micro-batches on every rank, the window's
/// candidates being the records whose tokens (each counted at most T) fit its R*K*M*T, as
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
        const token_settings& t = m_ctx.tokens;
        const std::size_t r = m_ctx.ranks;
        m_items.clear();
        bcl::token_plan_summary s;
        if (t.held()) {
            const std::uint64_t n = std::uint64_t{r} * *t.step_records * steps;
            const std::uint64_t begin = std::uint64_t{first} * r * *t.step_records;
            for (std::uint64_t i = 0; i < n; ++i) m_items.push_back(m_reader.at(begin + i));
            read_window();
            s = m_planner.plan_held(m_tokens, m_costs, {}, m_budget, steps, m_opt, m_slots,
                                    "global");
            m_next = begin + n;
        } else {
            const double capacity = static_cast<double>(r * steps * *t.micro_batches) *
                                    static_cast<double>(*t.max_tokens);
            double tokens = 0.0;
            for (std::uint64_t p = m_next;; ++p) {
                const sample& x = m_reader.at(p);
                tokens += window_tokens(x, *t.max_tokens);
                if (tokens > capacity) break;
                m_items.push_back(x);
            }
            read_window();
            s = m_planner.plan_stream(m_tokens, m_costs, m_budget, *t.micro_batches, steps, false,
                                      m_opt, m_slots, "global");
            m_items.resize(s.records);
            m_next += s.records;
        }
        if (s.steps != steps || s.micro_steps != steps * s.micro_batches)
            throw std::logic_error(fmt::format("global: a plan of {} steps gave {} steps, {} "
                                               "micro-steps",
                                               steps, s.steps, s.micro_steps));
        token_block_builder out(m_ctx, first, steps);
        for (std::size_t k = 0; k < steps; ++k) out.set_count(k, s.micro_batches);
        const double per_step = t.held() ? 0.0
                                         : static_cast<double>(r * *t.micro_batches) *
                                               static_cast<double>(*t.max_tokens);
        double before = 0.0; // a stream window's tokens before record i
        for (std::size_t i = 0; i < m_items.size(); ++i) {
            const bcl::micro_slot& slot = m_slots[i];
            const std::uint64_t drawn =
                t.held() ? first + i / (r * *t.step_records)
                         : first + std::min<std::uint64_t>(
                                       steps - 1, static_cast<std::uint64_t>(before / per_step));
            before += m_items[i].length;
            out.put(slot.step, slot.rank, slot.micro, m_items[i], m_items[i].length, drawn);
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
    void read_window() {
        m_tokens.resize(m_items.size());
        m_costs.resize(m_items.size());
        m_slots.resize(m_items.size());
        for (std::size_t i = 0; i < m_items.size(); ++i) {
            m_tokens[i] = static_cast<std::uint64_t>(m_items[i].length);
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
    std::uint64_t m_next = 0; // the first position not yet planned
    std::uint64_t m_max_delay = 0;
    std::uint64_t m_records = 0;
    std::size_t m_oversized = 0;
};

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
