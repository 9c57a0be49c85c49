#pragma once
// The global plan of a whole epoch of fixed batches: the epoch's order cut into windows of K
// steps of all R ranks' records, each window planned alike on every rank and the windows' digests
// chained, and one rank's share of it. The order is laid out as torch's DistributedSampler lays
// it out (padded with its first records, or cut under drop_last), each window planned by
// bcl::global_planner. The samplers of the global plan (libtorch and Python) and the simulator
// run this; none derives any of it again. Token-budget epochs: <bcl/token_epoch_plan.hpp>.

#include <bcl/detail/config.hpp>

#include <bcl/cost_check.hpp>
#include <bcl/detail/random.hpp>
#include <bcl/detail/table_index.hpp>
#include <bcl/epoch_layout.hpp>
#include <bcl/epoch_window.hpp>
#include <bcl/error.hpp>
#include <bcl/global_plan.hpp>
#include <bcl/stage_plan.hpp>

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

/// Throws bcl::error (prefixed with `who`) naming the dataset index and value of the first cost
/// of the table that is not valid (bcl::valid_cost). O(N).
inline void check_cost_table(std::span<const double> costs, std::string_view who) {
    for (std::size_t i = 0; i < costs.size(); ++i)
        check_cost(costs[i], [&] {
            return std::string(who) + ": the cost of dataset index " + std::to_string(i) + " is ";
        });
}

/// cost_table_digest one cost at a time, for a table read where it lies (a memory map, any
/// numeric type): the costs of a table of `n` fed in order give the digest of the table.
class cost_table_digester {
public:
    explicit cost_table_digester(std::uint64_t n) noexcept : m_h(detail::splitmix64(n).next()) {}
    void add(double cost) noexcept {
        m_h = detail::splitmix64(m_h ^ detail::cost_bits(cost)).next();
    }
    [[nodiscard]] std::uint64_t digest() const noexcept { return m_h; }

private:
    std::uint64_t m_h;
};

/// A digest of a cost table as the planner reads it (-0.0 as 0.0), bit for bit: equal tables,
/// equal digests, on every platform. O(N), noexcept.
[[nodiscard]] inline std::uint64_t cost_table_digest(std::span<const double> costs) noexcept {
    cost_table_digester d(costs.size());
    for (const double c : costs) d.add(c);
    return d.digest();
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
        const auto cost_of = [&](Index index) {
            return costs[detail::table_index(index, costs.size(), "cost", "the cost table", who)];
        };
        return plan_over(cost_of, order, shape, opt, on_window, who);
    }

    /// The same over a table of stage costs (D a record; record i's at table.costs[i*D ..
    /// i*D+D)): each window is planned by bcl::stage_window_planner, and the summary's figures
    /// are the stage objective's. With D = 1 the plans are those of the table as one cost a
    /// record, bit for bit.
    template <class Index, class OnWindow>
    epoch_plan_summary plan(const stage_table_view& table, std::span<const Index> order,
                            const epoch_shape& shape, const plan_options& opt, OnWindow&& on_window,
                            std::string_view who = "bcl::epoch_planner") {
        check_stage_shape(table.costs.size(), table.stages, who);
        const std::size_t d = table.stages;
        const std::size_t rows = table.records();
        const stage_rows rows_of{d, [&, d, rows](Index index, std::span<double> row) {
                                     const std::size_t i = detail::table_index(
                                         index, rows, "cost", "the cost table", who);
                                     for (std::size_t s = 0; s < d; ++s)
                                         row[s] = table.costs[i * d + s];
                                 }};
        return plan_over(rows_of, order, shape, opt, on_window, who);
    }

    /// Rank `rank`'s share of the epoch plan() plans: its records of each window's steps, each
    /// step's in the order's order. `out` is written only on success. Throws what plan() throws,
    /// and bcl::error for a rank not below R. O(N log N).
    template <class Index>
    void share(std::span<const double> costs, std::span<const Index> order,
               const epoch_shape& shape, std::size_t rank, const plan_options& opt,
               epoch_share<Index>& out, std::string_view who = "bcl::epoch_planner") {
        share_of(costs, order, shape, rank, opt, out, who);
    }
    /// The same over a table of stage costs (as plan() over one).
    template <class Index>
    void share(const stage_table_view& table, std::span<const Index> order,
               const epoch_shape& shape, std::size_t rank, const plan_options& opt,
               epoch_share<Index>& out, std::string_view who = "bcl::epoch_planner") {
        share_of(table, order, shape, rank, opt, out, who);
    }

private:
    template <class Index, class CostOf, class OnWindow>
    epoch_plan_summary plan_over(const CostOf& cost_of, std::span<const Index> order,
                                 const epoch_shape& shape, const plan_options& opt,
                                 OnWindow& on_window, std::string_view who) {
        static_assert(std::is_integral_v<Index>, "dataset indices are integers");
        const epoch_windows windows = epoch_windows::of(order.size(), shape, who);
        epoch_plan_summary summary;
        summary.ranks = shape.ranks;
        summary.batches = windows.layout.batches;
        const auto index_at = [&](std::size_t p) { return order[p]; };
        for (std::size_t w = 0; w < windows.count(); ++w) {
            const plan_summary s =
                m_window.plan(windows, w, order.size(), index_at, cost_of, opt, who);
            summary.digest = plan_digest(m_window.slots(), summary.digest);
            ++summary.windows;
            summary.total += s.cost_of(s.total);
            summary.objective += s.cost_of(s.objective);
            summary.lower_bound += s.cost_of(s.lower_bound);
            on_window(windows.first(w), m_window.slots(), s);
        }
        return summary;
    }

    template <class Table, class Index>
    void share_of(const Table& costs, std::span<const Index> order, const epoch_shape& shape,
                  std::size_t rank, const plan_options& opt, epoch_share<Index>& out,
                  std::string_view who) {
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
                    // plan() checked every index against the table: none is negative.
                    m_share[base + m_fill[slots[i].step]++] =
                        static_cast<std::uint64_t>(order[(first + i) % order.size()]);
        };
        const epoch_plan_summary summary = plan(costs, order, shape, opt, keep_mine, who);
        out.records.assign(m_share.begin(), m_share.end());
        out.batch_size = shape.batch;
        out.summary = summary;
    }

    epoch_window_planner m_window;
    std::vector<std::size_t> m_fill;
    std::vector<std::uint64_t> m_share; // the share being built, as 64-bit indices
};

} // namespace bcl
