#pragma once
// The peers of micro-batch mode (token_peers.hpp: none, verl_dynamic, skyrl, nemo_rl,
// fixed_length) run step by step: each step's records, where step_cursor puts them, planned by
// the peer's own rules.

#include "policy_runner.hpp"
#include "token_peers.hpp"
#include "token_runner.hpp"
#include "token_windows.hpp"

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace bcl_sim {

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

} // namespace bcl_sim
