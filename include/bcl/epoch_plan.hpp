#pragma once
// The global plan of a whole epoch, in either batch shape: the epoch's order cut into windows of K
// steps of all R ranks' records, each window planned alike on every rank and the windows' digests
// chained, and one rank's share of it. Fixed batches of B records: the order laid out as torch's
// DistributedSampler lays it out (padded with its first records, or cut under drop_last), each
// window planned by bcl::global_planner. Token-budget micro-batches: each window as many records
// of the order as fill K steps of M micro-batches of at most T tokens on every rank
// (bcl::token_planner). The samplers of the global plan (libtorch and Python) and the simulator
// run this; none derives any of it again.

#include <bcl/detail/config.hpp>

#include <bcl/cost_check.hpp>
#include <bcl/detail/random.hpp>
#include <bcl/error.hpp>
#include <bcl/global_plan.hpp>
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

namespace detail {
/// `index` as a position in a table of `table` entries by dataset index. Throws bcl::error
/// (prefixed with `who`) naming the index when it is negative or past the table: it has no
/// `what` in `table_name`.
template <class Index>
[[nodiscard]] std::size_t table_index(Index index, std::size_t table, std::string_view what,
                                      std::string_view table_name, std::string_view who) {
    bool negative = false;
    if constexpr (std::is_signed_v<Index>) negative = index < 0;
    if (!negative && static_cast<std::size_t>(index) < table) [[likely]]
        return static_cast<std::size_t>(index);
    throw error(std::string(who) + ": dataset index " + std::to_string(index) + " has no " +
                std::string(what) + " (" + std::string(table_name) + " has " +
                std::to_string(table) + " entries)");
}
} // namespace detail

/// The shape of an epoch under the global plan. An aggregate:
/// `bcl::epoch_shape{.ranks = 8, .lookahead = 8, .batch = 16}`.
struct epoch_shape {
    std::size_t ranks = 0;     ///< R, data-parallel ranks
    std::size_t lookahead = 0; ///< K, steps planned together (one window)
    std::size_t batch = 0;     ///< B, records per rank per step
    /// As DistributedSampler's and BatchSampler's together: the records that do not fill every
    /// rank are dropped (instead of the order being padded), and so is each rank's short last
    /// batch.
    bool drop_last = false;
};

/// How an epoch of N records falls to ranks and batches, by torch's rules: DistributedSampler
/// pads the order with its first records (repeated as needed) to a multiple of R, or with
/// drop_last cuts it to one; each rank takes m = (that length) / R records; with drop_last m is
/// also cut to a multiple of B (BatchSampler's drop_last). The record at position i of the laid
/// out order is order[i mod N].
struct epoch_layout {
    std::size_t ranks = 1;    ///< R
    std::size_t batch = 1;    ///< B
    std::size_t padded = 0;   ///< the order's length once padded or cut to a multiple of R
    std::size_t per_rank = 0; ///< m: records each rank takes
    std::size_t batches = 0;  ///< batches each rank gets: ceil(m / B)

    /// The records planned: m * R, the first positions of the laid-out order.
    [[nodiscard]] constexpr std::size_t kept() const noexcept { return per_rank * ranks; }

    /// The layout of N records in an epoch of `shape` (whose counts are not 0). O(1).
    [[nodiscard]] static constexpr epoch_layout of(std::size_t n,
                                                   const epoch_shape& shape) noexcept {
        const std::size_t r = shape.ranks;
        epoch_layout l{r, shape.batch};
        l.padded = shape.drop_last && n % r != 0 ? n / r * r : (n + r - 1) / r * r;
        const std::size_t per_rank = l.padded / r;
        l.per_rank = shape.drop_last ? per_rank - per_rank % shape.batch : per_rank;
        l.batches = (l.per_rank + shape.batch - 1) / shape.batch;
        return l;
    }
};

/// Throws bcl::error (prefixed with `who`) for a shape no epoch plan takes: R, K or B of 0, or a
/// window of R*K*B records above bcl::max_plan_records, in those words.
inline void check_epoch_shape(const epoch_shape& shape, std::string_view who) {
    if (shape.ranks == 0 || shape.lookahead == 0 || shape.batch == 0)
        throw error(std::string(who) + ": the ranks (" + std::to_string(shape.ranks) +
                    "), lookahead (" + std::to_string(shape.lookahead) + ") and batch size (" +
                    std::to_string(shape.batch) + ") must all be at least 1");
    const std::size_t per_step = shape.ranks * shape.batch;
    if (shape.ranks > max_plan_records || shape.batch > max_plan_records / shape.ranks ||
        shape.lookahead > max_plan_records / per_step)
        throw error(std::string(who) + ": ranks * lookahead * batch size = " +
                    std::to_string(shape.ranks) + " * " + std::to_string(shape.lookahead) + " * " +
                    std::to_string(shape.batch) + " records in one plan window, above the " +
                    std::to_string(max_plan_records) + " a window may hold");
}

/// Throws bcl::error (prefixed with `who`) for plan options the planner refuses: the batching
/// neither packed nor padded, a negative or NaN cap. O(1).
inline void check_plan_options(const plan_options& opt, std::string_view who) {
    if (opt.batching != batch_cost::packed && opt.batching != batch_cost::padded)
        throw error(std::string(who) + ": plan_options::batching is neither packed nor padded");
    (void)detail::plan::cap_bits(opt.cap, who);
}

/// Throws bcl::error (prefixed with `who`) naming the dataset index and value of the first cost
/// of the table that is not valid (bcl::valid_cost). O(N).
inline void check_cost_table(std::span<const double> costs, std::string_view who) {
    for (std::size_t i = 0; i < costs.size(); ++i)
        check_cost(costs[i], [&] {
            return std::string(who) + ": the cost of dataset index " + std::to_string(i) + " is ";
        });
}

/// A digest of a cost table as the planner reads it (-0.0 as 0.0), bit for bit: equal tables,
/// equal digests, on every platform. O(N), noexcept.
[[nodiscard]] inline std::uint64_t cost_table_digest(std::span<const double> costs) noexcept {
    std::uint64_t h = detail::splitmix64(costs.size()).next();
    for (const double c : costs) h = detail::splitmix64(h ^ detail::cost_bits(c)).next();
    return h;
}

/// The epoch's order of the dataset indices 0..n-1 into `out`: a Fisher-Yates shuffle driven by
/// SplitMix64 from (seed, epoch), with integer operations only, or 0..n-1 itself without
/// `shuffle`. The same on every platform and standard library (std::shuffle is not). O(n).
inline void epoch_order(std::size_t n, bool shuffle, std::uint64_t seed, std::uint64_t epoch,
                        std::vector<std::size_t>& out) {
    out.resize(n);
    for (std::size_t i = 0; i < n; ++i) out[i] = i;
    if (!shuffle) return;
    // A stream of its own for each (seed, epoch): the seed and the epoch pass through
    // SplitMix64's output function in turn.
    const std::uint64_t seeded = detail::splitmix64(seed).next();
    detail::splitmix64 rng(detail::splitmix64(seeded ^ epoch).next());
    detail::shuffle(out.data(), n, rng);
}

/// What the plans of an epoch promise, summed over its windows (docs/global.md, "The summary").
struct epoch_plan_summary {
    std::size_t windows = 0;  ///< windows planned
    std::size_t batches = 0;  ///< batches each rank gets
    std::uint64_t digest = 0; ///< the chain of the windows' plan digests (bcl::plan_digest)
    double total = 0.0;       ///< the sum of the records' (capped) costs, in cost units
    double objective = 0.0;   ///< the sum over steps of the step's costliest batch
    double lower_bound = 0.0; ///< the sum of the windows' lower bounds on it
    std::size_t ranks = 1;    ///< R

    /// total / (R * objective): the mean rank's step time over the slowest rank's, as planned.
    [[nodiscard]] double efficiency() const noexcept {
        return objective > 0.0 ? total / (static_cast<double>(ranks) * objective) : 1.0;
    }
    /// objective / lower_bound - 1: how far the plans can be from the best.
    [[nodiscard]] double gap() const noexcept {
        return lower_bound > 0.0 ? objective / lower_bound - 1.0 : 0.0;
    }
};

/// One rank's share of an epoch: its records, batch after batch. Batch i is
/// records[i*B, min((i+1)*B, m)): B records each but the last, which has the rest.
template <class Index>
struct epoch_share {
    std::vector<Index> records; ///< this rank's m records, batch after batch
    std::size_t batch_size = 1; ///< B
    epoch_plan_summary summary; ///< what the plans of the whole epoch promise

    /// The batches: ceil(m / B).
    [[nodiscard]] std::size_t batches() const noexcept { return summary.batches; }
    /// Batch i (i < batches()). O(1).
    [[nodiscard]] std::span<const Index> batch(std::size_t i) const noexcept {
        const std::size_t first = i * batch_size;
        return std::span<const Index>(records).subspan(
            first, std::min(batch_size, records.size() - first));
    }
};

/// Plans epochs, keeping its scratch between them: once it has planned an epoch it allocates
/// nothing for another of the same size (but a share's own vector, the first time).
class epoch_planner {
public:
    /// Plans the epoch whose order is `order` (the dataset indices, N of them, as every rank drew
    /// them; each below costs.size()), laid out by `shape` (epoch_layout), over the cost table
    /// `costs` (by dataset index): the kept records, R*K*B at a time, are one window each (the
    /// last may be short), planned by bcl::global_planner with `opt`. For each window calls
    /// `on_window(first, slots, summary)`: slots[i] is where the kept order's record first + i
    /// goes (its step within the window, its rank). Returns what the plans promise, the digest
    /// chained over the windows. Every rank that passes the same arguments gets the same plans,
    /// bit for bit.
    ///
    /// Throws bcl::error (prefixed with `who`) for a shape check_epoch_shape refuses, an index
    /// without a cost, an invalid cost of a record planned (naming its dataset index and value),
    /// or options the planner refuses; whatever on_window throws propagates. O(N log N).
    template <class Index, class OnWindow>
    epoch_plan_summary plan(std::span<const double> costs, std::span<const Index> order,
                            const epoch_shape& shape, const plan_options& opt, OnWindow&& on_window,
                            std::string_view who = "bcl::epoch_planner") {
        static_assert(std::is_integral_v<Index>, "dataset indices are integers");
        check_epoch_shape(shape, who);
        const epoch_layout layout = epoch_layout::of(order.size(), shape);
        const std::size_t kept = layout.kept();
        const std::size_t window = shape.ranks * shape.lookahead * shape.batch;
        epoch_plan_summary summary;
        summary.ranks = shape.ranks;
        summary.batches = layout.batches;
        for (std::size_t first = 0; first < kept; first += window) {
            const std::size_t count = std::min(window, kept - first);
            m_costs.resize(count);
            m_slots.resize(count);
            for (std::size_t i = 0; i < count; ++i) {
                const std::size_t index =
                    checked_index(order[(first + i) % order.size()], costs.size(), who);
                m_costs[i] = costs[index];
                check_cost(m_costs[i], [&] {
                    return std::string(who) + ": the cost of dataset index " +
                           std::to_string(index) + " is ";
                });
            }
            const plan_summary s = m_planner.plan(
                m_costs, plan_shape{shape.ranks, shape.lookahead, shape.batch}, opt, m_slots);
            summary.digest = plan_digest(m_slots, summary.digest);
            ++summary.windows;
            summary.total += s.cost_of(s.total);
            summary.objective += s.cost_of(s.objective);
            summary.lower_bound += s.cost_of(s.lower_bound);
            on_window(first, std::span<const plan_slot>(m_slots), s);
        }
        return summary;
    }

    /// Rank `rank`'s share of the epoch plan() plans: its records of each window's steps, each
    /// step's in the order's order. `out` is written only on success. Throws what plan() throws,
    /// and bcl::error for a rank not below R. O(N log N).
    template <class Index>
    void share(std::span<const double> costs, std::span<const Index> order,
               const epoch_shape& shape, std::size_t rank, const plan_options& opt,
               epoch_share<Index>& out, std::string_view who = "bcl::epoch_planner") {
        check_epoch_shape(shape, who);
        if (rank >= shape.ranks)
            throw error(std::string(who) + ": rank " + std::to_string(rank) + " of " +
                        std::to_string(shape.ranks) + " ranks: the rank must be below them");
        const epoch_layout layout = epoch_layout::of(order.size(), shape);
        m_share.resize(layout.per_rank);
        m_fill.resize(shape.lookahead);
        const auto keep_mine = [&](std::size_t first, std::span<const plan_slot> slots,
                                   const plan_summary&) {
            // Step j of a window starts B*j records after the window's first of this rank.
            const std::size_t base = first / shape.ranks;
            for (std::size_t step = 0; step < shape.lookahead; ++step)
                m_fill[step] = step * shape.batch;
            for (std::size_t i = 0; i < slots.size(); ++i)
                if (slots[i].rank == rank)
                    m_share[base + m_fill[slots[i].step]++] = order[(first + i) % order.size()];
        };
        const epoch_plan_summary summary = plan(costs, order, shape, opt, keep_mine, who);
        out.records.assign(m_share.begin(), m_share.end());
        out.batch_size = shape.batch;
        out.summary = summary;
    }

private:
    template <class Index>
    [[nodiscard]] static std::size_t checked_index(Index index, std::size_t table,
                                                   std::string_view who) {
        return detail::table_index(index, table, "cost", "the cost table", who);
    }

    global_planner m_planner;
    std::vector<double> m_costs;
    std::vector<plan_slot> m_slots;
    std::vector<std::size_t> m_fill;
    std::vector<std::uint64_t> m_share; // the share being built, as 64-bit indices
};

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
    /// Rank `rank`'s share of the epoch whose order is `order` (dataset indices, each below
    /// tokens.size()), over the tables `tokens` and `costs` (by dataset index; costs empty for
    /// the default L + L^2/24576): windows of `lookahead` (K) steps of `micro_batches` (M)
    /// micro-batches on every rank, each window the records of the order that fill it
    /// (bcl::token_planner::plan_stream), the last window what is left in as few micro-steps as
    /// fit (with the window before it, when what is left is too few records to plan alone).
    /// An epoch that still cannot fill every rank's micro-batches (e.g. an odd count of records
    /// of T tokens each on two ranks) gets empty micro-batches with
    /// opt.allow_empty_micro_batches; else, with `repeat_to_fill`, its last window takes the
    /// order's first records again, as DistributedSampler pads its order: the fewest that plan
    /// (tried one by one up to R*m, one of which makes the count a multiple of R*m, then
    /// doubling), only that window planned again for each; else it is refused. `out` is written
    /// only on success. Throws bcl::error (prefixed with `who`) for an index without tokens, a
    /// rank not below R, and what plan_stream throws. O(N log N).
    template <class Index>
    void share(std::span<const std::uint64_t> tokens, std::span<const double> costs,
               std::span<const Index> order, const token_budget& budget, std::size_t micro_batches,
               std::size_t lookahead, std::size_t rank, const token_plan_options& opt,
               token_epoch_share<Index>& out, std::string_view who = "bcl::token_epoch_planner",
               bool repeat_to_fill = false) {
        static_assert(std::is_integral_v<Index>, "dataset indices are integers");
        if (rank >= budget.ranks)
            throw error(std::string(who) + ": rank " + std::to_string(rank) + " of " +
                        std::to_string(budget.ranks) + " ranks: the rank must be below them");
        if (!costs.empty() && costs.size() != tokens.size())
            throw error(std::string(who) + ": " + std::to_string(costs.size()) + " costs for " +
                        std::to_string(tokens.size()) + " dataset indices");
        const std::size_t n = order.size();
        const std::uint64_t capacity = budget.ranks * lookahead * micro_batches *
                                       std::max<std::uint64_t>(budget.max_tokens, 1);
        const std::size_t window_cells = budget.ranks * lookahead * micro_batches;
        token_epoch_share<Index> share;
        share.offsets.assign(1, 0);
        share.steps.assign(1, 0);
        std::size_t first = 0;
        while (first < n) {
            // The window's candidates: the records of the order whose tokens fit its capacity.
            m_tokens.clear();
            m_costs.clear();
            std::uint64_t running = 0;
            for (std::size_t i = first; i < n; ++i) {
                const std::size_t index = checked_index(order[i], tokens.size(), who);
                const std::uint64_t t =
                    std::min(detail::tokens::padded_length(tokens[index], opt.pad_to_multiple_of),
                             budget.max_tokens);
                if (running + t > capacity) break;
                running += t;
                m_tokens.push_back(tokens[index]);
                if (!costs.empty()) m_costs.push_back(costs[index]);
            }
            // A short tail after the window goes with it: plan_stream() decides whether the
            // tail can be planned alone, and otherwise plans the window and the tail together.
            std::size_t end = first + m_tokens.size();
            if (end < n && n - end < window_cells) {
                for (; end < n; ++end) {
                    const std::size_t index = checked_index(order[end], tokens.size(), who);
                    m_tokens.push_back(tokens[index]);
                    if (!costs.empty()) m_costs.push_back(costs[index]);
                }
            }
            const bool last = end == n;
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
                share.repeated = count;
                s = m_planner.summary();
            }
            share.digest = token_plan_digest(std::span<const micro_slot>(m_slots).first(s.records),
                                             share.digest);
            ++share.windows;
            share.micro_steps += s.micro_steps;
            share.micro_steps_bound += s.micro_steps_bound;
            share.oversized += s.oversized;
            share.padding += s.padding;
            share.total += s.cost_of(s.total);
            share.objective += s.cost_of(s.objective);
            keep_rank(window.first(s.records), s, rank, share);
            first += std::min(s.records, n - first);
        }
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

    template <class Index>
    [[nodiscard]] static std::size_t checked_index(Index index, std::size_t table,
                                                   std::string_view who) {
        return detail::table_index(index, table, "tokens", "the table", who);
    }

    // This rank's micro-batches of a window, step by step, each in the order's order.
    template <class Index>
    void keep_rank(std::span<const Index> window, const token_plan_summary& s, std::size_t rank,
                   token_epoch_share<Index>& share) {
        const std::size_t cells = s.micro_steps;
        m_cell_count.assign(cells, 0);
        for (std::size_t i = 0; i < s.records; ++i)
            if (m_slots[i].rank == rank)
                ++m_cell_count[m_slots[i].step * s.micro_batches + m_slots[i].micro];
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
            if (m_slots[i].rank == rank)
                share
                    .records[m_cell_start[m_slots[i].step * s.micro_batches + m_slots[i].micro]++] =
                    window[i];
        for (std::size_t step = 0; step < s.steps; ++step)
            share.steps.push_back(
                std::min(share.steps.back() + s.micro_batches, share.offsets.size() - 1));
    }

    token_planner m_planner;
    std::vector<std::uint64_t> m_tokens;
    std::vector<double> m_costs;
    std::vector<micro_slot> m_slots;
    std::vector<std::size_t> m_cell_count;
    std::vector<std::size_t> m_cell_start;
};

} // namespace bcl
