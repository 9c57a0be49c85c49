#pragma once
// Internal: one micro-step of a token-budget plan, its records moved and swapped between its
// micro-batches (one a rank) so that the sum over stages of the dearest micro-batch falls, each
// micro-batch keeping at most T tokens and at least one record. Unlike a step of fixed batches
// (step_stages), the micro-batches' counts may change: the budget is on tokens, not records.

#include <bcl/detail/config.hpp>

#include <bcl/detail/stages/stage_loads.hpp>
#include <bcl/detail/stages/step_stages.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace bcl::detail::stages {

/// Improves one micro-step's micro-batches by stage; scratch kept between calls.
class cell_stages {
public:
    struct outcome {
        std::uint64_t before = 0; // the objective as given
        std::uint64_t after = 0;  // as left: never above `before`
    };

    /// `records` (indices into `t`, `tokens` and `frozen`), rank_of[k] the rank of records[k]'s
    /// micro-batch among `ranks`. Pass after pass (at most `passes`) over the records of a rank
    /// that is the slowest of some stage, each moved to another rank's micro-batch, or swapped
    /// with another rank's record, where that lowers the objective, keeps every micro-batch at
    /// most `max_tokens` tokens (counted as `tokens` gives them, padded already) and leaves none
    /// of them empty; the first such change in the order tried is taken. A frozen record stays,
    /// and so does every record of a micro-batch above `max_tokens` (a record alone above T).
    /// Integers only, ties kept: the same everywhere. O(passes * records^2 * stages).
    outcome improve(std::span<const std::uint32_t> records, std::span<std::uint32_t> rank_of,
                    std::span<const std::uint64_t> tokens, const std::vector<bool>& frozen,
                    std::size_t ranks, std::uint64_t max_tokens, const stage_table& t,
                    std::size_t passes = 8) {
        const std::size_t d = t.stages;
        m_loads.reset(ranks, d);
        m_tokens.assign(ranks, 0);
        m_count.assign(ranks, 0);
        for (std::size_t k = 0; k < records.size(); ++k) {
            m_loads.add(rank_of[k], t.of(records[k]));
            m_tokens[rank_of[k]] += tokens[records[k]];
            ++m_count[rank_of[k]];
        }
        m_loads.index();
        outcome o;
        o.before = o.after = m_loads.objective();
        if (d == 1) return o; // one stage: the token plan already levels it
        m_locked.assign(ranks, false);
        for (std::size_t r = 0; r < ranks; ++r) m_locked[r] = m_tokens[r] > max_tokens;
        const auto movable = [&](std::size_t k) {
            return !frozen[records[k]] && !m_locked[rank_of[k]];
        };
        for (std::size_t pass = 0; pass < passes; ++pass) {
            bool changed = false;
            for (std::size_t a = 0; a < records.size(); ++a) {
                if (!movable(a) || !m_loads.slowest(rank_of[a])) continue;
                if (move_somewhere(records, rank_of, tokens, a, max_tokens, t, o) ||
                    swap_somewhere(records, rank_of, tokens, frozen, a, max_tokens, t, o))
                    changed = true;
            }
            if (!changed) break;
        }
        return o;
    }

private:
    // Record a to the first other rank's micro-batch with room where the objective falls.
    bool move_somewhere(std::span<const std::uint32_t> records, std::span<std::uint32_t> rank_of,
                        std::span<const std::uint64_t> tokens, std::size_t a,
                        std::uint64_t max_tokens, const stage_table& t, outcome& o) {
        const std::size_t p = rank_of[a];
        if (m_count[p] < 2) return false;
        const auto ca = t.of(records[a]);
        const std::uint64_t ta = tokens[records[a]];
        for (std::size_t q = 0; q < m_tokens.size(); ++q) {
            if (q == p || m_locked[q] || m_tokens[q] + ta > max_tokens) continue;
            const std::uint64_t after = m_loads.objective_after(
                p, q, [&](std::size_t s) { return m_loads.at(p, s) - ca[s]; },
                [&](std::size_t s) { return m_loads.at(q, s) + ca[s]; });
            if (after >= o.after) continue;
            m_loads.take(p, ca);
            m_loads.add(q, ca);
            m_loads.index();
            m_tokens[p] -= ta;
            m_tokens[q] += ta;
            --m_count[p];
            ++m_count[q];
            rank_of[a] = static_cast<std::uint32_t>(q);
            o.after = after;
            return true;
        }
        return false;
    }

    // Record a swapped with the first record of another rank where both micro-batches keep
    // room and the objective falls.
    bool swap_somewhere(std::span<const std::uint32_t> records, std::span<std::uint32_t> rank_of,
                        std::span<const std::uint64_t> tokens, const std::vector<bool>& frozen,
                        std::size_t a, std::uint64_t max_tokens, const stage_table& t, outcome& o) {
        const std::size_t p = rank_of[a];
        const auto ca = t.of(records[a]);
        const std::uint64_t ta = tokens[records[a]];
        for (std::size_t b = 0; b < records.size(); ++b) {
            const std::size_t q = rank_of[b];
            if (q == p || frozen[records[b]] || m_locked[q]) continue;
            const std::uint64_t tb = tokens[records[b]];
            if (m_tokens[p] - ta + tb > max_tokens || m_tokens[q] - tb + ta > max_tokens) continue;
            const auto cb = t.of(records[b]);
            const std::uint64_t after = m_loads.objective_after(
                p, q, [&](std::size_t s) { return m_loads.at(p, s) - ca[s] + cb[s]; },
                [&](std::size_t s) { return m_loads.at(q, s) - cb[s] + ca[s]; });
            if (after >= o.after) continue;
            m_loads.take(p, ca);
            m_loads.add(p, cb);
            m_loads.take(q, cb);
            m_loads.add(q, ca);
            m_loads.index();
            m_tokens[p] = m_tokens[p] - ta + tb;
            m_tokens[q] = m_tokens[q] - tb + ta;
            rank_of[a] = static_cast<std::uint32_t>(q);
            rank_of[b] = static_cast<std::uint32_t>(p);
            o.after = after;
            return true;
        }
        return false;
    }

    stage_loads m_loads;
    std::vector<std::uint64_t> m_tokens;
    std::vector<std::size_t> m_count;
    std::vector<bool> m_locked;
};

} // namespace bcl::detail::stages
