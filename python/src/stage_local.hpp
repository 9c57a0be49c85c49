#pragma once
// One epoch of bcl.BalancedBatchSampler over a table of stage costs: a bcl::stage_balancer over
// the epoch's dataset indices, run to its end when the epoch starts (the sampler holds the epoch's
// indices anyway), its batches handed out one at a time from Python. Resuming runs the same epoch
// again and skips what was taken: the balancer is a function of the indices, their costs and the
// options.

#include "cost_table.hpp"

#include <bcl/options.hpp>
#include <bcl/stage_balancer.hpp>
#include <bcl/stage_plan.hpp>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace bcl_python {

namespace py = pybind11;

/// The D stage costs of a dataset index: a row of the (N, D) table.
template <std::size_t D>
struct index_stage_costs {
    const double* table = nullptr;
    std::array<double, D> operator()(const std::int64_t& index) const {
        std::array<double, D> row{};
        const double* at = table + static_cast<std::size_t>(index) * D;
        for (std::size_t s = 0; s < D; ++s) row[s] = at[s];
        return row;
    }
};

/// One epoch through a bcl::stage_balancer of D stages: (the batches' indices one after another,
/// each batch's size, the balancer's statistics).
template <std::size_t D>
py::tuple run_stage_local(std::span<const double> table, std::span<const std::int64_t> epoch,
                          const bcl::options& opt,
                          const std::optional<std::vector<double>>& means) {
    using balancer_type = bcl::stage_balancer<std::int64_t, index_stage_costs<D>>;
    const index_stage_costs<D> estimator{table.data()};
    std::optional<balancer_type> balancer;
    if (means) {
        typename balancer_type::stage_costs m{};
        for (std::size_t s = 0; s < D; ++s) m[s] = (*means)[s];
        balancer.emplace(estimator, opt, m);
    } else {
        balancer.emplace(estimator, opt);
    }
    std::vector<std::int64_t> indices;
    std::vector<std::int64_t> sizes;
    indices.reserve(epoch.size());
    const auto take = [&](std::span<std::int64_t> batch) {
        indices.insert(indices.end(), batch.begin(), batch.end());
        sizes.push_back(static_cast<std::int64_t>(batch.size()));
    };
    {
        py::gil_scoped_release unlocked;
        for (const std::int64_t index : epoch) {
            balancer->push(index);
            while (auto batch = balancer->pop()) take(*batch);
        }
        balancer->finish();
        while (auto batch = balancer->pop()) take(*batch);
    }
    const auto& s = balancer->stats();
    py::list stages;
    for (std::size_t d = 0; d < D; ++d) {
        py::dict stage;
        stage["count"] = s.stage_batch_cost[d].count();
        stage["mean"] = s.stage_batch_cost[d].mean();
        stage["cv"] = s.stage_batch_cost[d].cv();
        stage["min"] = s.stage_batch_cost[d].min();
        stage["max"] = s.stage_batch_cost[d].max();
        stages.append(stage);
    }
    py::dict stats;
    stats["records_in"] = s.records_in;
    stats["records_out"] = s.records_out;
    stats["records_dropped"] = s.records_dropped;
    stats["batches"] = s.batches;
    stats["windows"] = s.windows;
    stats["stage_batch_cost"] = stages;
    py::dict efficiency;
    efficiency["count"] = s.window_efficiency.count();
    efficiency["mean"] = s.window_efficiency.mean();
    efficiency["min"] = s.window_efficiency.min();
    stats["window_efficiency"] = efficiency;
    std::vector<double> aimed(D);
    const auto m = balancer->stage_means();
    for (std::size_t d = 0; d < D; ++d) aimed[d] = m[d];
    stats["stage_means"] = aimed;
    return py::make_tuple(index_array(static_cast<py::ssize_t>(indices.size()), indices.data()),
                          index_array(static_cast<py::ssize_t>(sizes.size()), sizes.data()), stats);
}

template <std::size_t... D>
py::tuple dispatch_stage_local(std::size_t stages, std::span<const double> table,
                               std::span<const std::int64_t> epoch, const bcl::options& opt,
                               const std::optional<std::vector<double>>& means,
                               std::index_sequence<D...> /*all*/) {
    py::tuple out;
    const bool found =
        ((stages == D + 1 && (out = run_stage_local<D + 1>(table, epoch, opt, means), true)) ||
         ...);
    if (!found) throw bcl::error("bcl.BalancedBatchSampler: no such number of stages");
    return out;
}

/// Binds stage_local_epoch(table, indices, options, epoch_means): the epoch's batches of the
/// indices (each checked against the table, naming it), planned by bcl::stage_balancer.
inline void define_stage_local(py::module_& m) {
    m.def(
        "stage_local_epoch",
        [](const value_array& table, const index_array& indices, const bcl::options& opt,
           bool epoch_means) {
            if (table.ndim() != 2)
                throw bcl::error("bcl.BalancedBatchSampler: stage costs must be a table of shape "
                                 "(N, D)");
            const auto n = static_cast<std::size_t>(table.shape(0));
            const auto stages = static_cast<std::size_t>(table.shape(1));
            if (stages == 0 || stages > bcl::max_plan_stages)
                throw bcl::error("bcl.BalancedBatchSampler: a record has 1 to " +
                                 std::to_string(bcl::max_plan_stages) + " stages, not " +
                                 std::to_string(stages));
            const std::span<const std::int64_t> epoch(indices.data(),
                                                      static_cast<std::size_t>(indices.size()));
            for (std::size_t i = 0; i < epoch.size(); ++i)
                if (epoch[i] < 0 || static_cast<std::size_t>(epoch[i]) >= n)
                    throw bcl::error("bcl.BalancedBatchSampler: the inner sampler yields index " +
                                     std::to_string(epoch[i]) + " (position " + std::to_string(i) +
                                     "), but the costs cover " + std::to_string(n) +
                                     " dataset indices");
            // Each stage's mean over the epoch's indices: what the sliding policy aims it at.
            std::optional<std::vector<double>> means;
            if (epoch_means && !epoch.empty()) {
                means.emplace(stages, 0.0);
                for (const std::int64_t index : epoch)
                    for (std::size_t s = 0; s < stages; ++s)
                        (*means)[s] += table.data()[static_cast<std::size_t>(index) * stages + s];
                for (double& m : *means) m /= static_cast<double>(epoch.size());
            }
            return dispatch_stage_local(stages, std::span<const double>(table.data(), n * stages),
                                        epoch, opt, means,
                                        std::make_index_sequence<bcl::max_plan_stages>{});
        },
        py::arg("table"), py::arg("indices"), py::arg("options"), py::arg("epoch_means"),
        "bcl.BalancedBatchSampler with stage costs: one epoch's batches (flat indices, each "
        "batch's size) and statistics (bcl::stage_balancer), each stage aimed at its mean over "
        "the epoch's indices if epoch_means, else at the running means.");
}

} // namespace bcl_python
