#pragma once
// One epoch of bcl.DistributedBalancedBatchSampler for one rank: the global plan (bcl::
// plan_window) of every K-step window of the epoch's global order, of which this rank keeps its
// share, batch by batch. Every rank computes the same plans from the same order and cost table.

#include "cost_table.hpp"

#include <bcl/global_plan.hpp>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace bcl_python {

namespace py = pybind11;

/// The plans of one epoch, and this rank's batches.
class global_epoch {
public:
    /// Plans `order` (the epoch's global order, every rank's records: the rank-r record of
    /// position i is order[i * R + r], as DistributedSampler deals them), whose length is a
    /// multiple of R, in windows of R*K*B records: each rank takes m = order.size() / R records
    /// in ceil(m / B) batches, all of B but the last, which has the rest (dropped with
    /// `drop_last`, the last m mod B records of every rank's share). Keeps `rank`'s batches.
    /// bcl::error for an index without a cost, a bad shape or options (the planner's messages).
    /// The planning runs without the GIL.
    global_epoch(std::shared_ptr<const cost_table> table, const index_array& order,
                 bcl::plan_shape shape, std::size_t rank, const bcl::plan_options& opt,
                 bool drop_last) {
        const std::size_t r = shape.ranks;
        const std::span<const std::int64_t> all = cost_table::span_of(order);
        if (r == 0 || rank >= r || all.size() % r != 0)
            throw bcl::error("bcl.DistributedBalancedBatchSampler: an order of " +
                             std::to_string(all.size()) + " indices for rank " +
                             std::to_string(rank) + " of " + std::to_string(r));
        std::size_t per_rank = all.size() / r;
        if (drop_last) per_rank -= per_rank % shape.batch;
        const std::vector<std::int64_t> kept(all.begin(), all.begin() + per_rank * r);
        std::vector<double> costs = table->costs_of(kept); // bcl::error: an index without a cost
        py::gil_scoped_release unlocked;
        plan(kept, costs, shape, rank, opt);
    }

    [[nodiscard]] std::size_t batches() const noexcept { return m_offsets.size() - 1; }
    /// Batch `i` of this rank, as a list of ints.
    [[nodiscard]] py::list batch(std::size_t i) const {
        if (i >= batches())
            throw bcl::error("bcl.DistributedBalancedBatchSampler: batch " + std::to_string(i) +
                             " of an epoch of " + std::to_string(batches()));
        py::list out(m_offsets[i + 1] - m_offsets[i]);
        for (std::size_t k = m_offsets[i]; k < m_offsets[i + 1]; ++k)
            out[k - m_offsets[i]] = py::int_(m_indices[k]);
        return out;
    }
    /// The chain of the windows' plan digests: equal on every rank that planned the same epoch.
    [[nodiscard]] std::uint64_t digest() const noexcept { return m_digest; }
    [[nodiscard]] py::dict stats() const {
        py::dict d;
        d["windows"] = m_windows;
        d["batches"] = batches();
        d["digest"] = m_digest;
        // What the plans promise, in the windows' own units summed as costs: the mean rank's
        // step time over the slowest rank's, and how far above the lower bound the plans are.
        d["planned_efficiency"] = m_objective > 0.0 ? m_total / (m_ranks * m_objective) : 1.0;
        d["gap_to_lower_bound"] = m_bound > 0.0 ? m_objective / m_bound - 1.0 : 0.0;
        return d;
    }

private:
    void plan(const std::vector<std::int64_t>& order, const std::vector<double>& costs,
              bcl::plan_shape shape, std::size_t rank, const bcl::plan_options& opt) {
        const std::size_t r = shape.ranks;
        const std::size_t window = r * shape.steps * shape.batch;
        bcl::global_planner planner;
        std::vector<bcl::plan_slot> slots;
        std::vector<std::int64_t> window_order;
        std::vector<double> window_costs;
        m_ranks = static_cast<double>(r);
        m_offsets.assign(1, 0);
        for (std::size_t first = 0; first < order.size(); first += window) {
            const std::size_t n = std::min(window, order.size() - first);
            window_order.assign(order.begin() + static_cast<std::ptrdiff_t>(first),
                                order.begin() + static_cast<std::ptrdiff_t>(first + n));
            window_costs.assign(costs.begin() + static_cast<std::ptrdiff_t>(first),
                                costs.begin() + static_cast<std::ptrdiff_t>(first + n));
            slots.resize(n);
            const bcl::plan_summary s = planner.plan(window_costs, shape, opt, slots);
            m_digest = bcl::plan_digest(slots, m_digest);
            ++m_windows;
            m_total += s.cost_of(s.total);
            m_objective += s.cost_of(s.objective);
            m_bound += s.cost_of(s.lower_bound);
            // This rank's records, step by step, each step's in the window's order.
            for (std::size_t step = 0; step < s.steps; ++step) {
                for (std::size_t i = 0; i < n; ++i)
                    if (slots[i].rank == rank && slots[i].step == step)
                        m_indices.push_back(window_order[i]);
                m_offsets.push_back(m_indices.size());
            }
        }
    }

    std::vector<std::int64_t> m_indices; // this rank's batches, one after another
    std::vector<std::size_t> m_offsets;  // batch i is m_indices[m_offsets[i], m_offsets[i + 1])
    std::uint64_t m_digest = 0;
    std::uint64_t m_windows = 0;
    double m_ranks = 1.0;
    double m_total = 0.0; // sums over windows of what each plan's summary says, in cost units
    double m_objective = 0.0;
    double m_bound = 0.0;
};

} // namespace bcl_python
