#pragma once
// One epoch of bcl.DistributedBalancedBatchSampler for one rank: this rank's share of the
// epoch's global plan (bcl::epoch_planner), batch by batch. Every rank computes the same plans
// from the same order and cost table.

#include "cost_table.hpp"

#include <bcl/epoch_plan.hpp>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace bcl_python {

namespace py = pybind11;

/// The plans of one epoch, and this rank's batches.
class global_epoch {
public:
    /// Plans the epoch whose global order is `order` (a permutation of the dataset's indices, as
    /// DistributedSampler draws it; laid out, padded or cut, by bcl::epoch_layout) for `rank`,
    /// over the sampler's dense cost table. bcl::error for an index without a cost, a bad shape
    /// or options (the planner's messages). The planning runs without the GIL.
    global_epoch(const std::shared_ptr<const cost_table>& table, const index_array& order,
                 const bcl::epoch_shape& shape, std::size_t rank, const bcl::plan_options& opt) {
        const std::span<const std::int64_t> all = cost_table::span_of(order);
        const std::span<const double> costs = table->dense_costs();
        py::gil_scoped_release unlocked;
        bcl::epoch_planner planner;
        planner.share(costs, all, shape, rank, opt, m_share, "bcl.DistributedBalancedBatchSampler");
    }

    /// The same over a table of stage costs (N rows of D, float64, C-contiguous; its costs
    /// checked before), each window planned by bcl::stage_window_planner.
    global_epoch(const value_array& stage_costs, const index_array& order,
                 const bcl::epoch_shape& shape, std::size_t rank, const bcl::plan_options& opt) {
        if (stage_costs.ndim() != 2)
            throw bcl::error("bcl.DistributedBalancedBatchSampler: stage costs must be a table "
                             "of shape (N, D)");
        const std::span<const std::int64_t> all = cost_table::span_of(order);
        const bcl::stage_table_view table{
            std::span<const double>(stage_costs.data(),
                                    static_cast<std::size_t>(stage_costs.size())),
            static_cast<std::size_t>(stage_costs.shape(1))};
        py::gil_scoped_release unlocked;
        bcl::epoch_planner planner;
        planner.share(table, all, shape, rank, opt, m_share, "bcl.DistributedBalancedBatchSampler");
    }

    [[nodiscard]] std::size_t batches() const noexcept { return m_share.batches(); }
    /// Batch `i` of this rank, as a list of ints.
    [[nodiscard]] py::list batch(std::size_t i) const {
        if (i >= batches())
            throw bcl::error("bcl.DistributedBalancedBatchSampler: batch " + std::to_string(i) +
                             " of an epoch of " + std::to_string(batches()));
        const std::span<const std::int64_t> b = m_share.batch(i);
        py::list out(b.size());
        for (std::size_t k = 0; k < b.size(); ++k) out[k] = py::int_(b[k]);
        return out;
    }
    /// The chain of the windows' plan digests: equal on every rank that planned the same epoch.
    [[nodiscard]] std::uint64_t digest() const noexcept { return m_share.summary.digest; }
    [[nodiscard]] py::dict stats() const {
        const bcl::epoch_plan_summary& s = m_share.summary;
        py::dict d;
        d["windows"] = s.windows;
        d["windows_planned"] = s.windows; // planned whole, at the epoch's start
        d["batches"] = batches();
        d["digest"] = s.digest;
        // What the plans promise, in the windows' own units summed as costs: the mean rank's
        // step time over the slowest rank's, and how far above the lower bound the plans are.
        d["planned_efficiency"] = s.efficiency();
        d["gap_to_lower_bound"] = s.gap();
        return d;
    }

private:
    bcl::epoch_share<std::int64_t> m_share;
};

} // namespace bcl_python
