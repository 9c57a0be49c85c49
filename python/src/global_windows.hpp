#pragma once
// One epoch of bcl.DistributedBalancedBatchSampler with order="keyed", for one rank, window by
// window: bcl::keyed_epoch_pass (the libtorch sampler's keyed pass too) over a table_view, the
// costs read in place at each window. What it holds is one window, never the epoch: its start
// and each window cost O(R*K*B), whatever N. Every rank plans the same windows.

#include "table_view.hpp"

#include <bcl/epoch_rest.hpp>
#include <bcl/error.hpp>
#include <bcl/keyed_epoch.hpp>
#include <bcl/stage_plan.hpp>

#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace bcl_python {

namespace py = pybind11;

class global_windows {
    static constexpr const char* who = "bcl.DistributedBalancedBatchSampler";

    // Calls f(cost_of) with the table's costs read in place, in the table's own type: one cost
    // a record, or a stage table's rows (bcl::stage_rows).
    template <class F>
    auto read(F&& f) {
        return m_table->read([&](const auto* data) {
            const std::size_t d = m_table->stages();
            if (d > 1) {
                const bcl::stage_rows rows{
                    d, [data, d](std::uint64_t index, std::span<double> row) {
                        for (std::size_t s = 0; s < d; ++s)
                            row[s] = static_cast<double>(data[index * d + s]);
                    }};
                return f(rows);
            }
            const auto cost_of = [data](std::uint64_t index) {
                return static_cast<double>(data[index]);
            };
            return f(cost_of);
        });
    }

public:
    /// The rest `rest` (the whole epoch, or what a checkpoint left of it) of epoch `epoch` of
    /// the table's N records in `shape`, for `rank`: bcl::keyed_epoch_pass over the table read in
    /// place, its digest keyed_epoch_digest of `inputs` (the table and the settings but the
    /// ranks and the rank), the epoch, the ranks and the rest. Nothing is planned yet. bcl::error
    /// for a shape or options the planner refuses, a rank not below R, or a rest of another
    /// epoch size.
    global_windows(std::shared_ptr<const table_view> table, std::uint64_t seed, std::uint64_t epoch,
                   bool shuffle, const bcl::epoch_shape& shape, std::size_t rank,
                   const bcl::plan_options& opt, std::uint64_t inputs, bcl::epoch_rest rest)
        : m_table(std::move(table)) {
        if (rest.epoch_size() != m_table->size())
            throw bcl::error(std::string(who) + ": the epoch's rest is of an epoch of " +
                             std::to_string(rest.epoch_size()) + " records, not " +
                             std::to_string(m_table->size()));
        m_pass.start(seed, epoch, shuffle, shape, rank, opt, inputs, std::move(rest), who);
    }

    [[nodiscard]] std::size_t batches() const noexcept { return m_pass.batches(); }

    /// Batch `i` of this rank, as a list of ints: its window planned first if it is not the
    /// last one planned (without the GIL).
    [[nodiscard]] py::list batch(std::size_t i) {
        std::span<const std::uint64_t> b;
        {
            py::gil_scoped_release unlocked;
            b = read([&](const auto& cost_of) { return m_pass.batch(i, cost_of, who); });
        }
        py::list out(b.size());
        for (std::size_t k = 0; k < b.size(); ++k) out[k] = py::int_(b[k]);
        return out;
    }

    /// The epoch's digest: equal on every rank whose table, settings and epoch are equal.
    [[nodiscard]] std::uint64_t digest() const noexcept { return m_pass.digest(); }

    /// The rest of the epoch once this rank (and so every rank) has taken `position` batches
    /// (bcl::keyed_epoch_pass::rest_after). bcl::error for a position past the epoch's batches.
    [[nodiscard]] bcl::epoch_rest rest_after(std::size_t position) {
        py::gil_scoped_release unlocked;
        return read([&](const auto& cost_of) { return m_pass.rest_after(position, cost_of, who); });
    }
    [[nodiscard]] const bcl::epoch_rest& rest() const noexcept { return m_pass.rest(); }

    [[nodiscard]] py::dict stats() const {
        // Of the windows planned so far: an epoch planned window by window knows no more.
        const bcl::epoch_plan_summary& s = m_pass.planned();
        py::dict d;
        d["windows"] = m_pass.windows().count();
        d["batches"] = batches();
        d["digest"] = digest();
        d["windows_planned"] = s.windows;
        d["planned_efficiency"] = s.efficiency();
        d["gap_to_lower_bound"] = s.gap();
        return d;
    }

private:
    std::shared_ptr<const table_view> m_table;
    bcl::keyed_epoch_pass<std::uint64_t> m_pass;
};

} // namespace bcl_python
