#pragma once
// Token-budget epochs: an epoch's global order walked in stream windows of K steps of M
// micro-batches of at most T tokens on every rank (bcl::token_planner::plan_stream), and one
// rank's share of it kept. The samplers' token mode (libtorch and Python) and the simulator use
// it, so that the windows, the epoch's end and the digest chain are derived once.

#include <bcl/detail/config.hpp>

#include <bcl/detail/table_index.hpp>
#include <bcl/detail/tokens/stream_window.hpp>
#include <bcl/detail/tokens/token_records.hpp>
#include <bcl/error.hpp>
#include <bcl/token_budget.hpp>
#include <bcl/token_plan.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace bcl {

/// What the windows of a token-budget epoch planned so far promise, summed window by window.
struct token_epoch_summary {
    std::uint64_t digest = 0;          ///< the chain of the windows' token_plan_digest
    std::size_t windows = 0;           ///< windows planned
    std::size_t micro_steps = 0;       ///< micro-batches each rank runs
    std::size_t micro_steps_bound = 0; ///< the sum of the windows' token bounds
    std::size_t oversized = 0;         ///< records above T, alone in a micro-batch
    std::size_t padding = 0;           ///< empty micro-batches of every rank (allow_empty_...)
    std::size_t repeated = 0;          ///< records of the order's start planned again at its end
    double total = 0.0;                ///< the records' costs, in cost units
    double objective = 0.0;            ///< the sum over micro-steps of the dearest micro-batch

    /// Counts one more window, whose plan's slots are `slots` and summary `s`.
    void add(std::span<const micro_slot> slots, const token_plan_summary& s) noexcept {
        digest = token_plan_digest(slots, digest);
        ++windows;
        micro_steps += s.micro_steps;
        micro_steps_bound += s.micro_steps_bound;
        oversized += s.oversized;
        padding += s.padding;
        total += s.cost_of(s.total);
        objective += s.cost_of(s.objective);
    }
    /// total / (R * objective), for the R the epoch was planned with.
    [[nodiscard]] double efficiency(std::size_t ranks) const noexcept {
        return objective > 0.0 ? total / (static_cast<double>(ranks) * objective) : 1.0;
    }
};

/// One rank's share of a token-budget epoch: its micro-batches, step after step (M each; the
/// epoch's last step holds what is left, fewer if need be), and what the epoch's plans promise.
/// Micro-batch i is records[offsets[i], offsets[i + 1]).
template <class Index>
struct token_epoch_share : token_epoch_summary {
    std::vector<Index> records;       ///< this rank's records, micro-batch after micro-batch
    std::vector<std::size_t> offsets; ///< where each micro-batch starts (and the end)
    std::vector<std::size_t> steps;   ///< the first micro-batch of each step (and the end)

    [[nodiscard]] std::size_t micro_batches() const noexcept { return offsets.size() - 1; }
    /// Micro-batch i (i < micro_batches()). O(1).
    [[nodiscard]] std::span<const Index> micro_batch(std::size_t i) const noexcept {
        return std::span<const Index>(records).subspan(offsets[i], offsets[i + 1] - offsets[i]);
    }
};

/// One window of a token-budget epoch as token_epoch_planner::plan_window planned it: its
/// summary, and whether its candidates reached the order's end (`last`: it was planned as the
/// stream's end, and the epoch ends with it if it took every record left). Its records are the
/// order's positions [first, first + summary.records), but for the last window of an epoch padded
/// by repeating: there record i at or past the order's end n (first + i >= n) is the
/// (first + i - n)-th record planned again, one of the first `repeated` that plan_window's
/// `repeat_of` names (the order's own first records, for an epoch planned whole).
struct token_window {
    token_plan_summary summary;
    bool last = false;
    std::size_t repeated = 0;

    /// Whether the epoch ends with this window, planned from `first` in an order of `n`.
    [[nodiscard]] bool ends(std::size_t first, std::size_t n) const noexcept {
        return summary.records >= n - first;
    }
};

/// Plans token-budget epochs, keeping its scratch between them.
class token_epoch_planner {
public:
    /// Plans the window of an epoch's order from position `first` (below n, the order's length):
    /// `index_of(q)` is the dataset index at position q, `repeat_of(k)` the k-th record an
    /// epoch's end repeats (k below `repeatable`; for an epoch planned whole, index_of(k) below
    /// n: the order's first records), `tokens_of(index)` its tokens and, with
    /// `with_costs`, `cost_of(index)` its cost (else the default L + L^2/24576). The window
    /// holds K (`lookahead`) steps of M (`micro_batches`) micro-batches on every rank, its
    /// records the order's that fill it (bcl::token_planner::plan_stream); the last window takes
    /// what is left in as few micro-steps as fit (with the window before it, when what is left
    /// is too few records to plan alone). The epoch's last window that still cannot fill every
    /// rank's micro-batches gets empty micro-batches with opt.allow_empty_micro_batches; else,
    /// with `repeat_to_fill`, it takes repeat_of's first records again, as DistributedSampler
    /// pads its order: the fewest that plan (tried one by one up to R*m, one of which makes the
    /// count a multiple of R*m, then doubling, up to `repeatable`), only that window planned
    /// again for each; else it is refused. The plan's slots are slots(), by the window's record.
    /// Throws bcl::error (prefixed with `who`) for what plan_stream throws, and what the accessors
    /// throw. Every rank that passes the same arguments gets the same window. Reads the window's
    /// records and the first it refuses: O(W log W) for a window of W records.
    template <class IndexOf, class RepeatOf, class TokensOf, class CostOf>
    token_window
    plan_window(std::size_t first, std::size_t n, IndexOf&& index_of, RepeatOf&& repeat_of,
                std::size_t repeatable, TokensOf&& tokens_of, CostOf&& cost_of, bool with_costs,
                const token_budget& budget, std::size_t micro_batches, std::size_t lookahead,
                const token_plan_options& opt, std::string_view who, bool repeat_to_fill = false) {
        check_token_budget(budget, lookahead, who);
        check_token_window(budget, micro_batches, lookahead, who);
        check_token_options(opt, budget, who);
        const detail::tokens::window_rule rule(budget, micro_batches, lookahead,
                                               opt.pad_to_multiple_of);
        const auto take_index = [&](std::uint64_t index, std::uint64_t tokens) {
            m_indices.push_back(index);
            m_tokens.push_back(tokens);
            if (with_costs) m_costs.push_back(cost_of(index));
        };
        const auto take = [&](std::size_t q) {
            const auto index = static_cast<std::uint64_t>(index_of(q));
            take_index(index, tokens_of(index));
        };
        const auto take_again = [&](std::size_t k) {
            const auto index = static_cast<std::uint64_t>(repeat_of(k));
            take_index(index, tokens_of(index));
        };
        // The window's candidates: the records of the order whose tokens fit its capacity (the
        // planner then takes up to max_fill of it), and a short tail after them (fewer records
        // than the window's micro-batches): plan_stream() decides whether the tail can be
        // planned alone, and otherwise plans the window and the tail together.
        m_indices.clear();
        m_tokens.clear();
        m_costs.clear();
        std::uint64_t running = 0;
        std::size_t end = first;
        for (; end < n; ++end) {
            const auto index = static_cast<std::uint64_t>(index_of(end));
            const std::uint64_t tokens = tokens_of(index);
            const std::uint64_t t = rule.counted(tokens);
            if (!rule.takes(running, t, end - first)) break;
            running += t;
            take_index(index, tokens);
        }
        if (end < n && n - end < rule.cells())
            for (; end < n; ++end) take(end);
        token_window w;
        w.last = end == n;
        m_slots.resize(m_tokens.size());
        try {
            w.summary = m_planner.plan_stream(m_tokens, m_costs, budget, micro_batches, lookahead,
                                              w.last, opt, m_slots, who);
        } catch (const error&) {
            if (!w.last || !repeat_to_fill) throw;
            // The fewest of the order's first records that, planned again after the window's,
            // let it plan: 1, 2, ... up to R*m, then doubling, up to the order's length.
            const std::size_t rest = n - first;
            const std::size_t one_by_one = budget.ranks * budget.multiple_of;
            for (std::size_t count = 1; count <= repeatable;
                 count = count < one_by_one ? count + 1 : 2 * count) {
                m_indices.resize(rest);
                m_tokens.resize(rest);
                m_costs.resize(with_costs ? rest : 0);
                for (std::size_t k = 0; k < count; ++k) take_again(k);
                m_slots.resize(m_tokens.size());
                try {
                    w.summary = m_planner.plan_stream(m_tokens, m_costs, budget, micro_batches,
                                                      lookahead, true, opt, m_slots, who);
                    w.repeated = count;
                    return w;
                } catch (const error&) {
                    // This count does not plan: the next.
                }
            }
            throw;
        }
        return w;
    }

    /// The slots of the last window planned: slots()[i] is where its record i goes.
    [[nodiscard]] std::span<const micro_slot> slots() const noexcept { return m_slots; }
    /// The dataset indices of the last window planned: indices()[i] is its record i's.
    [[nodiscard]] std::span<const std::uint64_t> indices() const noexcept { return m_indices; }

    /// Plans the epoch whose order is `order` (dataset indices, each below tokens.size()), over
    /// the tables `tokens` and `costs` (by dataset index; costs empty for the default
    /// L + L^2/24576), window after window (plan_window, from the order's start).
    /// `on_window(records, slots, summary)` for each window in turn: slots[i] is where
    /// records[i] (a dataset index) goes, `summary` the window's. Returns how many records the
    /// last window repeated. Throws bcl::error (prefixed with `who`) for an index without
    /// tokens, costs of another length than tokens, and what plan_window throws; whatever
    /// on_window throws propagates. O(N log N).
    template <class Index, class OnWindow>
    std::size_t
    plan(std::span<const std::uint64_t> tokens, std::span<const double> costs,
         std::span<const Index> order, const token_budget& budget, std::size_t micro_batches,
         std::size_t lookahead, const token_plan_options& opt, OnWindow&& on_window,
         std::string_view who = "bcl::token_epoch_planner", bool repeat_to_fill = false) {
        static_assert(std::is_integral_v<Index>, "dataset indices are integers");
        if (!costs.empty() && costs.size() != tokens.size())
            throw error(std::string(who) + ": " + std::to_string(costs.size()) + " costs for " +
                        std::to_string(tokens.size()) + " dataset indices");
        check_token_budget(budget, lookahead, who);
        check_token_window(budget, micro_batches, lookahead, who);
        check_token_options(opt, budget, who);
        const std::size_t n = order.size();
        const auto index_of = [&](std::size_t q) {
            return detail::table_index(order[q], tokens.size(), "tokens", "the table", who);
        };
        const auto tokens_of = [&](std::size_t index) { return tokens[index]; };
        const auto cost_of = [&](std::size_t index) { return costs[index]; };
        std::size_t first = 0;
        std::size_t repeated_count = 0;
        std::vector<Index> repeated; // the last window's records and the order's first
        while (first < n) {
            const token_window w =
                plan_window(first, n, index_of, index_of, n, tokens_of, cost_of, !costs.empty(),
                            budget, micro_batches, lookahead, opt, who, repeat_to_fill);
            std::span<const Index> window = order.subspan(first);
            if (w.repeated > 0) {
                repeated.assign(window.begin(), window.end());
                repeated.insert(repeated.end(), order.begin(),
                                order.begin() + static_cast<std::ptrdiff_t>(w.repeated));
                window = repeated;
            }
            on_window(window.first(w.summary.records), slots().first(w.summary.records), w.summary);
            repeated_count = w.repeated;
            first += std::min(w.summary.records, n - first);
        }
        return repeated_count;
    }

    /// Rank `rank`'s share of the epoch plan() plans from the same arguments: `out` is written
    /// only on success. Throws what plan() throws, and bcl::error for a rank not below R.
    template <class Index>
    void share(std::span<const std::uint64_t> tokens, std::span<const double> costs,
               std::span<const Index> order, const token_budget& budget, std::size_t micro_batches,
               std::size_t lookahead, std::size_t rank, const token_plan_options& opt,
               token_epoch_share<Index>& out, std::string_view who = "bcl::token_epoch_planner",
               bool repeat_to_fill = false) {
        if (rank >= budget.ranks)
            throw error(std::string(who) + ": rank " + std::to_string(rank) + " of " +
                        std::to_string(budget.ranks) + " ranks: the rank must be below them");
        token_epoch_share<Index> share;
        share.offsets.assign(1, 0);
        share.steps.assign(1, 0);
        const auto keep = [&](std::span<const Index> window, std::span<const micro_slot> slots,
                              const token_plan_summary& s) {
            share.add(slots, s);
            keep_rank(
                s, rank, [&](std::size_t i) { return window[i]; }, share.records, share.offsets,
                share.steps);
        };
        share.repeated = plan(tokens, costs, order, budget, micro_batches, lookahead, opt, keep,
                              who, repeat_to_fill);
        out = std::move(share);
    }

    /// Appends rank `rank`'s micro-batches of the last window planned (whose summary is `s`) to
    /// `records` and `offsets` (where each starts: offsets' last entry is records' size), each
    /// in the window's order, `record_of(i)` the window's record i; and the starts of the
    /// window's steps (the first micro-batch of each, counted as `offsets` counts) to `steps`,
    /// whose last entry is offsets' micro-batch count. O(window).
    template <class Index, class RecordOf>
    void keep_rank(const token_plan_summary& s, std::size_t rank, RecordOf&& record_of,
                   std::vector<Index>& records, std::vector<std::size_t>& offsets,
                   std::vector<std::size_t>& steps) {
        const std::size_t cells = s.micro_steps;
        const std::span<const micro_slot> slots = this->slots();
        m_cell_count.assign(cells, 0);
        for (std::size_t i = 0; i < s.records; ++i)
            if (slots[i].rank == rank)
                ++m_cell_count[s.first_micro_step(slots[i].step) + slots[i].micro];
        const std::size_t base = records.size();
        m_cell_start.resize(cells);
        std::size_t at = base;
        for (std::size_t c = 0; c < cells; ++c) {
            m_cell_start[c] = at;
            at += m_cell_count[c];
            offsets.push_back(at);
        }
        records.resize(at);
        for (std::size_t i = 0; i < s.records; ++i)
            if (slots[i].rank == rank)
                records[m_cell_start[s.first_micro_step(slots[i].step) + slots[i].micro]++] =
                    static_cast<Index>(record_of(i));
        for (std::size_t step = 0; step < s.steps; ++step)
            steps.push_back(steps.back() + s.micro_batches_in(step));
    }

private:
    token_planner m_planner;
    std::vector<std::uint64_t> m_indices;
    std::vector<std::uint64_t> m_tokens;
    std::vector<double> m_costs;
    std::vector<micro_slot> m_slots;
    std::vector<std::size_t> m_cell_count;
    std::vector<std::size_t> m_cell_start;
};

} // namespace bcl
