#pragma once
// One epoch of bcl.BalancedBatchSampler: a bcl::balancer over dataset indices (int64 records)
// whose costs come from a cost_table, and the epoch's index array it reads from.

#include "balancer_reports.hpp"
#include "cost_table.hpp"

#include <bcl/bcl.hpp>
#include <bcl/detail/state/index_epoch_check.hpp>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bcl_python {

namespace py = pybind11;

/// The cost estimator of an index: a table lookup.
struct index_cost {
    std::shared_ptr<const cost_table> table;
    double operator()(const std::int64_t& index) const { return table->cost(index); }
};

/// The same, with a memory estimate (so the balancer can keep a memory budget).
struct index_cost_memory {
    std::shared_ptr<const cost_table> table;
    double operator()(const std::int64_t& index) const { return table->cost(index); }
    double memory(const std::int64_t& index) const { return table->memory(index); }
};

/// The length of an index, looked up in a table of lengths (for a calibrated cost).
struct index_length {
    std::shared_ptr<const cost_table> table;
    double operator()(const std::int64_t& index) const { return table->cost(index); }
};

/// a + b*L + c*L^2 of an index's length L, with (a, b, c) fitted to the batch times observed.
using calibrated_index_cost =
    decltype(bcl::calibrated_affine_quadratic(0.0, 1.0, 0.0, index_length{}));

/// One epoch: next_batch() pushes the epoch's indices until a batch is ready and pops it.
template <class Estimator>
class epoch {
    using balancer_type = bcl::balancer<std::int64_t, Estimator>;

public:
    /// A new epoch over `indices` (checked one-dimensional int64, as strict_indices gives them),
    /// estimating with `estimator`, whose costs (or lengths) `table` holds.
    epoch(std::shared_ptr<const cost_table> table, Estimator estimator, const bcl::options& opt,
          index_array indices)
        : m_table(std::move(table)), m_estimator(estimator), m_options(opt),
          m_balancer(std::move(estimator), opt), m_indices(std::move(indices)) {
        keep_base();
    }

    /// The epoch a saved state continues: the balancer's bytes and the indices it held
    /// (`pending`), the epoch's indices and the position the state says the balancer had pushed
    /// up to. Everything is checked against everything else before the epoch exists
    /// (bcl::detail::check_index_epoch: the position against the balancer's count of pushed
    /// records, each pending index against the epoch); a mismatch is a bcl::error naming the
    /// field.
    epoch(std::shared_ptr<const cost_table> table, Estimator estimator, const bcl::options& opt,
          std::string_view state, const index_array& pending, index_array indices,
          std::size_t position)
        : m_table(table), m_estimator(estimator), m_options(opt),
          m_balancer(restored(table, std::move(estimator), opt, state, pending, indices, position)),
          m_indices(std::move(indices)), m_position(position) {
        keep_base();
    }

    /// The next batch as a list of ints, or None once the epoch is drained. Each pass of its
    /// loop either hands out a batch, pushes an index, finishes the input or ends the epoch, so
    /// it cannot spin; a state that allowed neither would be a bcl::error.
    py::object next_batch() {
        const std::span<const std::int64_t> in = cost_table::span_of(m_indices);
        for (;;) {
            if (auto batch = m_balancer.pop()) {
                if (m_balancer.stats().windows != m_rounds_seen) keep_base(); // a round's first
                return to_list(*batch);
            }
            if (m_position < in.size()) {
                if (!m_balancer.can_push())
                    throw bcl::error("bcl.BalancedBatchSampler: the balancer takes no index and "
                                     "has no batch ready at position " +
                                     std::to_string(m_position) + " of the epoch");
                while (m_position < in.size() && m_balancer.can_push()) {
                    push(in[m_position]);
                    ++m_position;
                }
            } else if (!m_balancer.finished()) {
                m_balancer.finish();
            } else {
                return py::none();
            }
            if (PyErr_CheckSignals() != 0) throw py::error_already_set();
        }
    }

    /// (bytes, pending indices as an int64 array, position) of the epoch's state.
    [[nodiscard]] py::tuple save() const { return as_tuple(m_balancer.save(), m_position); }

    /// The epoch's state as it was when `consumed` of its batches had been handed out: what a
    /// trainer whose loader reads batches ahead (a DataLoader's prefetch) resumes from, so that
    /// the batches handed out after those come again. Rebuilt from a state kept where the epoch
    /// began or was restored and right after each round's first batch, popped up to `consumed`:
    /// between those points the epoch only pops (it pushes only once no batch waits), so this is
    /// exactly the state it had. bcl::error for more batches than were handed out, or for one
    /// further back than keep_states_for() keeps.
    [[nodiscard]] py::tuple save_at(std::uint64_t consumed) const {
        const std::uint64_t handed_out = m_balancer.stats().batches;
        if (consumed == handed_out) return save();
        if (consumed > handed_out)
            throw bcl::error("bcl.BalancedBatchSampler: consumed=" + std::to_string(consumed) +
                             ", but the epoch has handed out " + std::to_string(handed_out) +
                             " batches");
        const auto kept = std::find_if(m_kept.begin(), m_kept.end(), [&](const base& b) {
            return b.handed_out <= consumed && consumed <= b.handed_out + b.waiting;
        });
        if (kept == m_kept.end())
            throw bcl::error("bcl.BalancedBatchSampler: consumed=" + std::to_string(consumed) +
                             " is " + std::to_string(handed_out - consumed) +
                             " batches behind the last one handed out; the sampler keeps the "
                             "states of the last " +
                             std::to_string(m_keep) + " (prefetch_limit)");
        balancer_type b(m_estimator, m_options, kept->state);
        for (std::uint64_t i = kept->handed_out; i < consumed; ++i) (void)b.pop();
        return as_tuple(b.save(), kept->position);
    }

    /// The next epoch over `indices`, aiming at `mean_cost`, in this epoch's balancer, which
    /// keeps what it learned (bcl::balancer::next_epoch). The balancer must be drained or
    /// untouched (bcl::error otherwise, and nothing changes).
    void next_epoch(double mean_cost, index_array indices) {
        m_balancer.next_epoch(mean_cost);
        m_options.mean_cost = mean_cost;
        m_indices = std::move(indices);
        m_position = 0;
        m_kept.clear();
        keep_base();
    }

    /// The bytes of what this epoch's balancer carries into the next one: its state once
    /// next_epoch(mean_cost) starts an epoch, with nothing pushed yet. The epoch must be drained,
    /// untouched, or have handed out every batch (its end then drained in a copy: finished, the
    /// short remainder dropped under drop_last); bcl::error if a batch is still to come.
    [[nodiscard]] py::bytes learned_state(double mean_cost) const {
        balancer_type next = m_balancer;
        if (!drained() && m_balancer.stats().records_in != 0) {
            // The rest of the epoch's indices can only be the remainder drop_last drops.
            const auto not_over = [] {
                return bcl::error("bcl.BalancedBatchSampler: the epoch still has batches to hand "
                                  "out; its balancer carries nothing yet");
            };
            const std::span<const std::int64_t> in = cost_table::span_of(m_indices);
            for (std::size_t i = m_position; i < in.size(); ++i) {
                if (next.pop()) throw not_over();
                next.push(in[i]);
            }
            if (!next.finished()) next.finish();
            if (next.pop()) throw not_over();
        }
        next.next_epoch(mean_cost);
        return py::bytes(next.save().to_bytes());
    }

    /// Keeps, from now on, what save_at() needs for the last `batches` batches handed out.
    void keep_states_for(std::size_t batches) noexcept { m_keep = batches; }

    /// The epoch's balancer (what define_reports binds reads it; observe() feeds it).
    [[nodiscard]] balancer_type& balancer() noexcept { return m_balancer; }
    [[nodiscard]] const balancer_type& balancer() const noexcept { return m_balancer; }
    [[nodiscard]] std::size_t position() const noexcept { return m_position; }
    [[nodiscard]] std::size_t length() const noexcept {
        return static_cast<std::size_t>(m_indices.size());
    }
    [[nodiscard]] const index_array& indices() const noexcept { return m_indices; }
    [[nodiscard]] bool drained() const noexcept {
        return m_balancer.finished() && m_balancer.buffered() == 0;
    }

private:
    // A state save_at() starts from: `handed_out` batches handed out, `waiting` formed and not
    // yet, and the epoch's position then.
    struct base {
        std::uint64_t handed_out;
        std::uint64_t waiting;
        typename balancer_type::state state;
        std::size_t position;
    };

    static py::tuple as_tuple(const typename balancer_type::state& s, std::size_t position) {
        index_array pending(static_cast<py::ssize_t>(s.pending.size()));
        std::copy(s.pending.begin(), s.pending.end(), pending.mutable_data());
        return py::make_tuple(py::bytes(s.to_bytes()), pending, position);
    }

    // Keeps the state now (the epoch's start, a restore, or a round's first batch handed out)
    // and drops those that no batch within the last m_keep needs.
    void keep_base() {
        const bcl::statistics& st = m_balancer.stats();
        m_rounds_seen = st.windows;
        typename balancer_type::state now = m_balancer.save();
        const std::uint64_t waiting = now.snapshot.waiting_batch_costs.size();
        m_kept.push_back({st.batches, waiting, std::move(now), m_position});
        while (m_kept.size() >= 2 &&
               m_kept.front().handed_out + m_kept.front().waiting + m_keep < st.batches)
            m_kept.pop_front();
    }

    static balancer_type restored(const std::shared_ptr<const cost_table>& table,
                                  Estimator estimator, const bcl::options& opt,
                                  std::string_view state, const index_array& pending,
                                  const index_array& indices, std::size_t position) {
        constexpr std::string_view who = "bcl.BalancedBatchSampler";
        const std::span<const std::int64_t> all = cost_table::span_of(indices);
        if (position > all.size())
            throw bcl::error(std::string(who) + ": the state's position is " +
                             std::to_string(position) + ", past the end of the epoch's " +
                             std::to_string(all.size()) + " indices");
        const std::span<const std::int64_t> held = cost_table::span_of(pending);
        typename balancer_type::state saved = balancer_type::state::from_bytes(
            state, std::vector<std::int64_t>(held.begin(), held.end()));
        for (const std::int64_t index : held) (void)table->cost(index); // each has a cost
        bcl::detail::check_index_epoch<std::int64_t>(who, saved.snapshot, held, all.first(position),
                                                     table->dataset_size());
        return balancer_type(std::move(estimator), opt, std::move(saved));
    }

    void push(std::int64_t index) {
        try {
            m_balancer.push(index);
        } catch (const bcl::error& e) {
            // The library names the record by its position in the stream; add the dataset index.
            const std::string_view what = e.what();
            if (what.starts_with("bcl::balancer: record"))
                throw bcl::error(std::string(what) + " (dataset index " + std::to_string(index) +
                                 ")");
            throw;
        }
    }

    static py::list to_list(std::span<const std::int64_t> batch) {
        PyObject* list = PyList_New(static_cast<Py_ssize_t>(batch.size()));
        if (list == nullptr) throw py::error_already_set();
        auto out = py::reinterpret_steal<py::list>(list);
        for (std::size_t i = 0; i < batch.size(); ++i) {
            PyObject* item = PyLong_FromLongLong(batch[i]);
            if (item == nullptr) throw py::error_already_set();
            PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), item);
        }
        return out;
    }

    std::shared_ptr<const cost_table> m_table;
    Estimator m_estimator; // as given: what save_at()'s balancers start from
    bcl::options m_options;
    balancer_type m_balancer;
    index_array m_indices;
    std::size_t m_position = 0;
    std::size_t m_keep = 0;          // batches back that save_at() reaches
    std::uint64_t m_rounds_seen = 0; // rounds up to the last base kept
    std::deque<base> m_kept;         // oldest first
};

} // namespace bcl_python
