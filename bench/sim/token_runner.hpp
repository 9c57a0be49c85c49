#pragma once
// What every runner of micro-batch mode (--max-tokens) shares: the records it reads in the global
// sampler order, the steps it gives back (token_block) and the builder that tallies them, and the
// runner interface. The runners: token_peer_runner.hpp (the peers), token_global_runner.hpp
// (global) and token_fixed_runner.hpp (global_fixed).

#include "input.hpp"
#include "policy_runner.hpp"
#include "token_metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
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

/// A record's length as the library's token plans take it: a whole number of tokens (workload.hpp
/// reads and draws whole lengths only, so the conversion is exact).
[[nodiscard]] inline std::uint64_t tokens_of(const sample& x) noexcept {
    return static_cast<std::uint64_t>(x.length);
}

} // namespace bcl_sim
