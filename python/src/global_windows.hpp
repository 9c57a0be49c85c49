#pragma once
// One epoch of bcl.DistributedBalancedBatchSampler with order="keyed", for one rank, window by
// window: the epoch's order is bcl::keyed_order, read position by position; the costs are a
// table_view, read in place; each window of K steps is planned (bcl::epoch_window_planner) when
// the rank first asks for one of its batches. What it holds is one window, never the epoch: its
// start and each window cost O(R*K*B), whatever N. Every rank plans the same windows.

#include "table_view.hpp"

#include <bcl/detail/random.hpp>
#include <bcl/epoch_rest.hpp>
#include <bcl/epoch_window.hpp>
#include <bcl/error.hpp>
#include <bcl/keyed_order.hpp>

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
public:
    /// The rest `rest` (the whole epoch, or what a checkpoint left of it) of epoch `epoch` of
    /// the table's N records in `shape`, for `rank`; its order bcl::keyed_order(N, seed, epoch),
    /// or 0..N-1 without `shuffle`, its records those the rest keeps, laid out and planned as an
    /// epoch of their own. `inputs` is the digest of everything the plans depend on but the
    /// epoch, the ranks and the rest (the table and the other settings): the digest mixes those
    /// in. Nothing is planned yet. bcl::error for a shape or options the planner refuses, a rank
    /// not below R, or a rest of another epoch size.
    global_windows(std::shared_ptr<const table_view> table, std::uint64_t seed, std::uint64_t epoch,
                   bool shuffle, const bcl::epoch_shape& shape, std::size_t rank,
                   const bcl::plan_options& opt, std::uint64_t inputs, bcl::epoch_rest rest)
        : m_table(std::move(table)), m_order(m_table->size(), seed, epoch), m_shuffle(shuffle),
          m_rest(std::move(rest)), m_windows(bcl::epoch_windows::of(m_rest.size(), shape, who)),
          m_rank(rank), m_opt(opt), m_digest(digest_of(inputs, epoch, shape.ranks, m_rest)) {
        if (m_rest.epoch_size() != m_table->size())
            throw bcl::error(std::string(who) + ": the epoch's rest is of an epoch of " +
                             std::to_string(m_rest.epoch_size()) + " records, not " +
                             std::to_string(m_table->size()));
        bcl::check_plan_options(opt, who);
        if (rank >= shape.ranks)
            throw bcl::error(std::string(who) + ": rank " + std::to_string(rank) + " of " +
                             std::to_string(shape.ranks) + " ranks: the rank must be below them");
    }

    [[nodiscard]] std::size_t batches() const noexcept { return m_windows.layout.batches; }

    /// Batch `i` of this rank, as a list of ints: its window planned first if it is not the
    /// last one planned (without the GIL).
    [[nodiscard]] py::list batch(std::size_t i) {
        if (i >= batches())
            throw bcl::error(std::string(who) + ": batch " + std::to_string(i) +
                             " of an epoch of " + std::to_string(batches()));
        const std::size_t w = m_windows.window_of_batch(i);
        if (w != m_window) plan(w);
        const std::size_t b = m_windows.layout.batch;
        const std::size_t first = (i % m_windows.lookahead) * b;
        const std::size_t count = std::min(b, m_mine.size() - first);
        py::list out(count);
        for (std::size_t k = 0; k < count; ++k) out[k] = py::int_(m_mine[first + k]);
        return out;
    }

    /// The epoch's digest: equal on every rank whose table, settings and epoch are equal.
    [[nodiscard]] std::uint64_t digest() const noexcept { return m_digest; }

    /// The rest of the epoch once this rank (and so every rank) has taken `position` batches:
    /// the records of the windows before the current one and of the current one's first
    /// position mod K steps, as the plan placed them (the window planned again if needed).
    /// bcl::error for a position past the epoch's batches.
    [[nodiscard]] bcl::epoch_rest rest_after(std::size_t position) {
        if (position > batches())
            throw bcl::error(std::string(who) + ": position " + std::to_string(position) +
                             " is past the epoch's " + std::to_string(batches()) + " batches");
        const std::uint64_t left = m_rest.size();
        if (position == batches()) return m_rest.after(left, {});
        const std::size_t w = m_windows.window_of_batch(position);
        const std::size_t steps = position % m_windows.lookahead;
        const std::uint64_t first = m_windows.first(w);
        std::vector<std::uint64_t> also;
        if (steps > 0) {
            if (w != m_window) plan(w);
            const std::span<const bcl::plan_slot> slots = m_planner.slots();
            for (std::size_t i = 0; i < slots.size(); ++i)
                if (slots[i].step < steps && first + i < left) also.push_back(first + i);
        }
        return m_rest.after(first, std::move(also));
    }
    [[nodiscard]] const bcl::epoch_rest& rest() const noexcept { return m_rest; }

    [[nodiscard]] py::dict stats() const {
        py::dict d;
        d["windows"] = m_windows.count();
        d["batches"] = batches();
        d["digest"] = m_digest;
        // Of the windows planned so far: an epoch planned window by window knows no more.
        d["windows_planned"] = m_planned;
        d["planned_efficiency"] =
            m_objective > 0.0
                ? m_total / (static_cast<double>(m_windows.layout.ranks) * m_objective)
                : 1.0;
        d["gap_to_lower_bound"] = m_lower > 0.0 ? m_objective / m_lower - 1.0 : 0.0;
        return d;
    }

private:
    static constexpr const char* who = "bcl.DistributedBalancedBatchSampler";

    static std::uint64_t digest_of(std::uint64_t inputs, std::uint64_t epoch, std::size_t ranks,
                                   const bcl::epoch_rest& rest) {
        using bcl::detail::mix64;
        std::uint64_t h = mix64(inputs ^ mix64(epoch));
        h = mix64(h ^ ranks);
        if (rest.whole()) return h;
        h = mix64(mix64(h ^ rest.start()) ^ rest.span());
        for (const std::uint8_t b : rest.taken()) h = mix64(h ^ b);
        return h;
    }

    void plan(std::size_t w) {
        const std::size_t n = m_rest.size();
        bcl::plan_summary s;
        {
            py::gil_scoped_release unlocked;
            s = m_table->read([&](const auto* data) {
                const auto cost_of = [data](std::uint64_t index) {
                    return static_cast<double>(data[index]);
                };
                if (m_shuffle)
                    return m_planner.plan(
                        m_windows, w, n,
                        [&](std::uint64_t q) { return m_order.at(m_rest.position(q)); }, cost_of,
                        m_opt, who);
                return m_planner.plan(
                    m_windows, w, n, [&](std::uint64_t q) { return m_rest.position(q); }, cost_of,
                    m_opt, who);
            });
            m_mine.resize(m_windows.records(w) / m_windows.layout.ranks);
            m_planner.rank_records(m_rank, std::span<std::uint64_t>(m_mine), who);
        }
        m_window = w;
        if (w >= m_counted) { // each window's promise counted once, in order of first planning
            m_counted = w + 1;
            ++m_planned;
            m_total += s.cost_of(s.total);
            m_objective += s.cost_of(s.objective);
            m_lower += s.cost_of(s.lower_bound);
        }
    }

    std::shared_ptr<const table_view> m_table;
    bcl::keyed_order m_order;
    bool m_shuffle;
    bcl::epoch_rest m_rest; // the records this epoch plans: all, or what a checkpoint left
    bcl::epoch_windows m_windows;
    std::size_t m_rank;
    bcl::plan_options m_opt;
    std::uint64_t m_digest;
    bcl::epoch_window_planner m_planner;
    std::vector<std::uint64_t> m_mine; // this rank's records of window m_window, step by step
    std::size_t m_window = SIZE_MAX;   // the window m_mine holds, none at first
    std::size_t m_counted = 0;         // windows below it are in the totals
    std::size_t m_planned = 0;
    double m_total = 0.0, m_objective = 0.0, m_lower = 0.0;
};

} // namespace bcl_python
