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

/// One rank's share of a token-budget epoch: its micro-batches, step after step (M each; the
/// epoch's last step holds what is left, fewer if need be). Micro-batch i is
/// records[offsets[i], offsets[i + 1]).
template <class Index>
struct token_epoch_share {
    std::vector<Index> records;        ///< this rank's records, micro-batch after micro-batch
    std::vector<std::size_t> offsets;  ///< where each micro-batch starts (and the end)
    std::vector<std::size_t> steps;    ///< the first micro-batch of each step (and the end)
    std::uint64_t digest = 0;          ///< the chain of the windows' token_plan_digest
    std::size_t windows = 0;           ///< windows planned
    std::size_t micro_steps = 0;       ///< micro-batches each rank runs
    std::size_t micro_steps_bound = 0; ///< the sum of the windows' token bounds
    std::size_t oversized = 0;         ///< records above T, alone in a micro-batch
    std::size_t padding = 0;           ///< empty micro-batches of every rank (allow_empty_...)
    std::size_t repeated = 0;          ///< records of the order's start planned again at its end
    double total = 0.0;                ///< the records' costs, in cost units
    double objective = 0.0;            ///< the sum over micro-steps of the dearest micro-batch

    [[nodiscard]] std::size_t micro_batches() const noexcept { return offsets.size() - 1; }
    /// Micro-batch i (i < micro_batches()). O(1).
    [[nodiscard]] std::span<const Index> micro_batch(std::size_t i) const noexcept {
        return std::span<const Index>(records).subspan(offsets[i], offsets[i + 1] - offsets[i]);
    }
    /// total / (R * objective), for the R the epoch was planned with.
    [[nodiscard]] double efficiency(std::size_t ranks) const noexcept {
        return objective > 0.0 ? total / (static_cast<double>(ranks) * objective) : 1.0;
    }
};

/// Plans token-budget epochs, keeping its scratch between them.
class token_epoch_planner {
public:
    /// Plans the epoch whose order is `order` (dataset indices, each below tokens.size()), over
    /// the tables `tokens` and `costs` (by dataset index; costs empty for the default
    /// L + L^2/24576): windows of `lookahead` (K) steps of `micro_batches` (M) micro-batches on
    /// every rank, each window the records of the order that fill it
    /// (bcl::token_planner::plan_stream), the last window what is left in as few micro-steps as
    /// fit (with the window before it, when what is left is too few records to plan alone).
    /// `on_window(records, slots, summary)` for each window in turn: slots[i] is where
    /// records[i] (a dataset index) goes, `summary` the window's.
    /// An epoch that still cannot fill every rank's micro-batches (e.g. an odd count of records
    /// of T tokens each on two ranks) gets empty micro-batches with
    /// opt.allow_empty_micro_batches; else, with `repeat_to_fill`, its last window takes the
    /// order's first records again, as DistributedSampler pads its order: the fewest that plan
    /// (tried one by one up to R*m, one of which makes the count a multiple of R*m, then
    /// doubling), only that window planned again for each; else it is refused. Returns how many
    /// records were repeated so. Throws bcl::error (prefixed with `who`) for an index without
    /// tokens, costs of another length than tokens, and what plan_stream throws; whatever
    /// on_window throws propagates. Every rank that passes the same arguments gets the same
    /// windows. O(N log N).
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
        // The window's candidates: the records of the order whose tokens fit its capacity (the
        // planner then takes up to max_fill of it).
        const detail::tokens::window_rule rule(budget, micro_batches, lookahead,
                                               opt.pad_to_multiple_of);
        std::size_t repeated_count = 0;
        std::size_t first = 0;
        while (first < n) {
            const bool last = gather_window(tokens, costs, order, first, rule, who);
            m_slots.resize(m_tokens.size());
            std::span<const Index> window = order.subspan(first);
            std::vector<Index> repeated; // the last window's records and the order's first
            token_plan_summary s;
            try {
                s = m_planner.plan_stream(m_tokens, m_costs, budget, micro_batches, lookahead, last,
                                          opt, m_slots, who);
            } catch (const error&) {
                if (!last || !repeat_to_fill) throw;
                const std::size_t count = fill_by_repeating(tokens, costs, order, first, budget,
                                                            micro_batches, lookahead, opt, who);
                if (count == 0) throw;
                repeated.assign(window.begin(), window.end());
                repeated.insert(repeated.end(), order.begin(),
                                order.begin() + static_cast<std::ptrdiff_t>(count));
                window = repeated;
                repeated_count = count;
                s = m_planner.summary();
            }
            on_window(window.first(s.records),
                      std::span<const micro_slot>(m_slots).first(s.records), s);
            first += std::min(s.records, n - first);
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
            share.digest = token_plan_digest(slots, share.digest);
            ++share.windows;
            share.micro_steps += s.micro_steps;
            share.micro_steps_bound += s.micro_steps_bound;
            share.oversized += s.oversized;
            share.padding += s.padding;
            share.total += s.cost_of(s.total);
            share.objective += s.cost_of(s.objective);
            keep_rank(window, slots, s, rank, share);
        };
        share.repeated = plan(tokens, costs, order, budget, micro_batches, lookahead, opt, keep,
                              who, repeat_to_fill);
        out = std::move(share);
    }

private:
    // The fewest of the order's first records that, planned again after the records from
    // `first` on (the epoch's last window), let it plan: 1, 2, ... up to R*m, then doubling, up
    // to the order's length. 0 if none does. The plan of the count found is left in m_planner
    // and m_slots.
    template <class Index>
    std::size_t fill_by_repeating(std::span<const std::uint64_t> tokens,
                                  std::span<const double> costs, std::span<const Index> order,
                                  std::size_t first, const token_budget& budget,
                                  std::size_t micro_batches, std::size_t lookahead,
                                  const token_plan_options& opt, std::string_view who) {
        const std::size_t rest = order.size() - first;
        const std::size_t one_by_one = budget.ranks * budget.multiple_of;
        for (std::size_t count = 1; count <= order.size();
             count = count < one_by_one ? count + 1 : 2 * count) {
            m_tokens.resize(rest);
            m_costs.resize(costs.empty() ? 0 : rest);
            for (std::size_t k = 0; k < count; ++k) {
                const std::size_t index = checked_index(order[k], tokens.size(), who);
                m_tokens.push_back(tokens[index]);
                if (!costs.empty()) m_costs.push_back(costs[index]);
            }
            m_slots.resize(m_tokens.size());
            try {
                (void)m_planner.plan_stream(m_tokens, m_costs, budget, micro_batches, lookahead,
                                            true, opt, m_slots, who);
                return count;
            } catch (const error&) {
                // This count does not plan: the next.
            }
        }
        return 0;
    }

    // Reads the window from `first` into m_tokens and m_costs: the records of the order whose
    // tokens fit its capacity (window_rule), and a short tail after them (fewer records than
    // the window's micro-batches): plan_stream() decides whether the tail can be planned alone,
    // and otherwise plans the window and the tail together. True if it reaches the order's end.
    template <class Index>
    bool gather_window(std::span<const std::uint64_t> tokens, std::span<const double> costs,
                       std::span<const Index> order, std::size_t first,
                       const detail::tokens::window_rule& rule, std::string_view who) {
        const std::size_t n = order.size();
        m_tokens.clear();
        m_costs.clear();
        const auto take = [&](std::size_t i) {
            const std::size_t index = checked_index(order[i], tokens.size(), who);
            m_tokens.push_back(tokens[index]);
            if (!costs.empty()) m_costs.push_back(costs[index]);
        };
        std::uint64_t running = 0;
        std::size_t end = first;
        for (; end < n; ++end) {
            const std::size_t index = checked_index(order[end], tokens.size(), who);
            const std::uint64_t t = rule.counted(tokens[index]);
            if (!rule.takes(running, t, end - first)) break;
            running += t;
            take(end);
        }
        if (end < n && n - end < rule.cells())
            for (; end < n; ++end) take(end);
        return end == n;
    }

    template <class Index>
    [[nodiscard]] static std::size_t checked_index(Index index, std::size_t table,
                                                   std::string_view who) {
        return detail::table_index(index, table, "tokens", "the table", who);
    }

    // This rank's micro-batches of a window, step by step, each in the order's order.
    template <class Index>
    void keep_rank(std::span<const Index> window, std::span<const micro_slot> slots,
                   const token_plan_summary& s, std::size_t rank, token_epoch_share<Index>& share) {
        const std::size_t cells = s.micro_steps;
        m_cell_count.assign(cells, 0);
        for (std::size_t i = 0; i < s.records; ++i)
            if (slots[i].rank == rank)
                ++m_cell_count[s.first_micro_step(slots[i].step) + slots[i].micro];
        const std::size_t base = share.records.size();
        m_cell_start.resize(cells);
        std::size_t at = base;
        for (std::size_t c = 0; c < cells; ++c) {
            m_cell_start[c] = at;
            at += m_cell_count[c];
            share.offsets.push_back(at);
        }
        share.records.resize(at);
        for (std::size_t i = 0; i < s.records; ++i)
            if (slots[i].rank == rank)
                share.records[m_cell_start[s.first_micro_step(slots[i].step) + slots[i].micro]++] =
                    window[i];
        for (std::size_t step = 0; step < s.steps; ++step)
            share.steps.push_back(share.steps.back() + s.micro_batches_in(step));
    }

    token_planner m_planner;
    std::vector<std::uint64_t> m_tokens;
    std::vector<double> m_costs;
    std::vector<micro_slot> m_slots;
    std::vector<std::size_t> m_cell_count;
    std::vector<std::size_t> m_cell_start;
};

} // namespace bcl
