#pragma once
// One window of an epoch's global plan at a time, from an order and a cost table given as
// functions: the order's index at a position (bcl::keyed_order::at, or an array) and the cost of
// a dataset index (a table in any layout, read in place). A rank that plans window after window
// holds one window, never the epoch: an epoch of 1e9 records costs what a window of R*K*B costs.
// Each window's plan is bit for bit the one bcl::epoch_planner makes of the same epoch (it plans
// every window through this).

#include <bcl/detail/config.hpp>

#include <bcl/cost_check.hpp>
#include <bcl/epoch_layout.hpp>
#include <bcl/error.hpp>
#include <bcl/global_plan.hpp>
#include <bcl/stage_plan.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace bcl {

/// Plans the windows of an epoch one at a time, keeping its scratch between them: once it has
/// planned a window, it allocates nothing for another no larger.
class epoch_window_planner {
public:
    /// Plans window `w` of `windows` (epoch_windows::of the epoch's N records and its shape),
    /// whose records are the laid-out order's positions [first(w), first(w) + records(w)): the
    /// record at position p is `index_at(p mod N)`, a dataset index, and costs
    /// `cost_of(index)`, or, when cost_of is a bcl::stage_rows, whose D stage costs are
    /// `cost_of.row_of(index, row)` and planned as bcl::stage_window_planner plans them. Every
    /// cost read is checked (bcl::valid_cost); cost_of checks that the index has one. Returns the
    /// window's plan_summary; slots() and indices() hold its plan.
    ///
    /// Throws bcl::error (prefixed with `who`) for a window past the epoch, an invalid cost
    /// (naming its dataset index and value) or options the planner refuses, and whatever
    /// index_at or cost_of throw. After a throw no window is planned (rank_records refuses) until
    /// the next plan() that returns. O(records(w) log records(w)).
    template <class IndexAt, class CostOf>
    plan_summary plan(const epoch_windows& windows, std::size_t w, std::size_t n,
                      IndexAt&& index_at, CostOf&& cost_of, const plan_options& opt,
                      std::string_view who = "bcl::epoch_window_planner") {
        const std::size_t count = windows.records(w);
        if (count == 0)
            throw error(std::string(who) + ": window " + std::to_string(w) + " of an epoch of " +
                        std::to_string(windows.count()) + " windows");
        const std::size_t first = windows.first(w);
        m_planned = false;
        m_slots.resize(count);
        m_indices.resize(count);
        const plan_shape shape{windows.layout.ranks, windows.lookahead, windows.layout.batch};
        plan_summary summary;
        if constexpr (is_stage_rows<std::remove_cvref_t<CostOf>>) {
            // Stage costs: D a record, read as rows; the plan is the stage plan of the window.
            const std::size_t d = cost_of.stages;
            m_costs.resize(count * d);
            for (std::size_t i = 0; i < count; ++i) {
                const auto index = read_index(index_at, first + i, n, i);
                const std::span<double> row = std::span<double>(m_costs).subspan(i * d, d);
                cost_of.row_of(index, row);
                for (std::size_t s = 0; s < d; ++s)
                    check_cost(row[s], [&] {
                        return std::string(who) + ": the cost of stage " + std::to_string(s) +
                               " of dataset index " + std::to_string(index) + " is ";
                    });
            }
            (void)m_stage_planner.plan(m_costs, d, shape, opt, m_slots, who);
            summary = m_stage_planner.window_summary();
        } else {
            m_costs.resize(count);
            for (std::size_t i = 0; i < count; ++i) {
                const auto index = read_index(index_at, first + i, n, i);
                m_costs[i] = cost_of(index);
                check_cost(m_costs[i], [&] {
                    return std::string(who) + ": the cost of dataset index " +
                           std::to_string(index) + " is ";
                });
            }
            summary = m_planner.plan(m_costs, shape, opt, m_slots);
        }
        m_shape = shape;
        m_first = first;
        m_planned = true;
        return summary;
    }

    /// The last window planned: slots()[i] is where its record i goes (its step within the
    /// window, its rank).
    [[nodiscard]] std::span<const plan_slot> slots() const noexcept { return m_slots; }
    /// The last window planned: indices()[i] is the dataset index of its record i.
    [[nodiscard]] std::span<const std::uint64_t> indices() const noexcept { return m_indices; }
    /// The laid-out order's position of the last window's first record.
    [[nodiscard]] std::size_t first() const noexcept { return m_first; }

    /// Rank `rank`'s records of the last window planned, step after step (B a step but the
    /// last, which holds the rest), each step's in the order's order, into `out`: the window's
    /// records / R of them. Throws bcl::error, writing nothing, for a rank not below R, an `out`
    /// of another size, or no window planned. O(records).
    template <class Index>
    void rank_records(std::size_t rank, std::span<Index> out,
                      std::string_view who = "bcl::epoch_window_planner") {
        if (!m_planned)
            throw error(std::string(who) + ": no window planned (the last plan() threw)");
        if (rank >= m_shape.ranks || out.size() * m_shape.ranks != m_slots.size())
            throw error(std::string(who) + ": rank " + std::to_string(rank) + " of " +
                        std::to_string(m_shape.ranks) + " takes " +
                        std::to_string(m_slots.size() / m_shape.ranks) +
                        " records of this window, not " + std::to_string(out.size()));
        // Step j of the window starts B*j records into the rank's share of it.
        m_fill.resize(m_shape.steps);
        for (std::size_t step = 0; step < m_shape.steps; ++step)
            m_fill[step] = step * m_shape.batch;
        for (std::size_t i = 0; i < m_slots.size(); ++i)
            if (m_slots[i].rank == rank)
                out[m_fill[m_slots[i].step]++] = static_cast<Index>(m_indices[i]);
    }

private:
    // The dataset index at the laid-out order's position p (mod N), kept as record i's.
    template <class IndexAt>
    auto read_index(IndexAt& index_at, std::size_t p, std::size_t n, std::size_t i) {
        const auto index = index_at(p % n);
        static_assert(std::is_integral_v<decltype(index)>, "dataset indices are integers");
        // The cost table accepts the index once it is read, so it is a position in the table:
        // not negative.
        m_indices[i] = static_cast<std::uint64_t>(index);
        return index;
    }

    global_planner m_planner;
    stage_window_planner m_stage_planner;
    std::vector<double> m_costs;
    std::vector<plan_slot> m_slots;
    std::vector<std::uint64_t> m_indices;
    std::vector<std::size_t> m_fill;
    std::size_t m_first = 0;
    plan_shape m_shape{1, 1, 1}; // of the last window planned
    bool m_planned = false;      // whether the last plan() returned
};

} // namespace bcl
