#pragma once
// Where a stream's steps and global's windows end in the global order: the library's window rule
// (bcl::detail::tokens::window_rule, the one bcl::token_planner and bcl::token_epoch_planner
// apply, in integers), so that a peer's step and global's window hold the records a loader built
// on bcl would hand them. The simulator's only reach into bcl::detail::tokens.

#include "policy_runner.hpp"
#include "token_runner.hpp"

#include <bcl/detail/tokens/stream_window.hpp>
#include <bcl/token_budget.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>

namespace bcl_sim {

/// The rule of a window of `steps` steps of `micro_per_step` micro-batches on every rank: its
/// whole capacity R*K*M*T, each record counted as its length and at most T (a record above T
/// fills its micro-batch alone). The whole capacity, not --max-fill's share: these are the
/// candidates, as bcl::token_epoch_planner hands its planner, which then fills up to max_fill.
[[nodiscard]] inline bcl::detail::tokens::window_rule
stream_window_rule(const sim_context& ctx, std::size_t micro_per_step, std::size_t steps) {
    const bcl::token_budget budget{ctx.ranks, *ctx.tokens.max_tokens, ctx.tokens.multiple_of};
    return {budget, micro_per_step, steps, bcl::token_plan_options{}.pad_to_multiple_of};
}

/// How many records from position `first` of the global order global's stream window of `steps`
/// steps takes as candidates (stream_window_rule). Reads those and the first it refuses.
[[nodiscard]] inline std::size_t stream_window_records(const sim_context& ctx,
                                                       global_reader& reader, std::uint64_t first,
                                                       std::size_t steps) {
    return stream_window_rule(ctx, *ctx.tokens.micro_batches, steps)
        .records(std::numeric_limits<std::size_t>::max(),
                 [&](std::size_t i) { return tokens_of(reader.at(first + i)); });
}

/// Where the steps of a policy that runs step by step lie in the global order. Held batches:
/// step s is positions [s R N, (s+1) R N). A stream of steps: each step the next records from
/// where the last ended, R at a time (every rank draws as many), while the window rule of one
/// step of M micro-batches takes them (stream_window_rule); the first R whatever their tokens,
/// so that no step is empty.
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
        const bcl::detail::tokens::window_rule rule =
            stream_window_rule(*m_ctx, *t.micro_batches, 1);
        std::uint64_t end = m_next;
        std::uint64_t running = 0; // the step's tokens, as the rule counts them
        // A group of R records is taken whole or not at all: the rule's test of its tokens
        // against the room left (at the whole capacity, the count already taken plays no part).
        for (;;) {
            std::uint64_t group = 0;
            for (std::size_t k = 0; k < r; ++k)
                group += rule.counted(tokens_of(m_reader->at(end + k)));
            if (end > m_next && !rule.takes(running, group, static_cast<std::size_t>(end - m_next)))
                break;
            running += group;
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

} // namespace bcl_sim
