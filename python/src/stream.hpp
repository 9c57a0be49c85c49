#pragma once
// One stream of bcl.balance: a bcl::balancer over the slots of the stream's records (each record's
// arrival position: 0, 1, 2, ...), estimating each from the value the Python side computed for it
// (its cost, or its length), and the records themselves, held here by reference until their batch
// is handed out. Records enter a chunk at a time (one call per lookahead window, not per record).

#include "balancer_reports.hpp"
#include "cost_table.hpp"

#include <bcl/bcl.hpp>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace bcl_python {

namespace py = pybind11;

/// The records a stream holds, by slot, and the values the balancer's estimator reads. Slots
/// enter in increasing order and leave in any order, each within the balancer's delay bound, so
/// the records pushed since the stream began (or was restored) are one deque from the oldest
/// still held: a lookup is an index. The records a saved state brought back, whose slots may lie
/// far apart, wait in a map (with the values a calibrated estimator reads again) until they
/// leave. The estimator reads a record's value once, as it is pushed (set_current()), except a
/// calibrated one restoring its buffer's features.
class slot_store {
public:
    struct restored_record {
        py::object record;
        double value = 0.0; // its length, for a calibrated estimator
    };

    /// Holds nothing; the next slot pushed is `next`.
    void reset(std::uint64_t next) {
        m_first = next;
        m_recent.clear();
        m_restored.clear();
    }

    /// Holds a record of a restored state under its slot (below the next one).
    void restore(std::uint64_t slot, restored_record r) {
        m_restored.insert_or_assign(slot, std::move(r));
    }

    /// The value and memory of the record about to be pushed, at `slot`.
    void set_current(std::uint64_t slot, double value, double memory) noexcept {
        m_current_slot = slot;
        m_current_value = value;
        m_current_memory = memory;
    }

    /// Holds the record of the next slot; pop_last() takes it back (a push the balancer refused).
    void push(py::object record) { m_recent.push_back(std::move(record)); }
    void pop_last() noexcept { m_recent.pop_back(); }

    [[nodiscard]] double value(std::uint64_t slot) const {
        if (slot == m_current_slot) [[likely]]
            return m_current_value;
        if (const auto it = m_restored.find(slot); it != m_restored.end()) return it->second.value;
        missing(slot);
    }
    [[nodiscard]] double memory(std::uint64_t slot) const {
        if (slot == m_current_slot) [[likely]]
            return m_current_memory;
        missing(slot);
    }

    /// The record of `slot`, still held.
    [[nodiscard]] py::handle at(std::uint64_t slot) const {
        if (slot >= m_first) {
            if (slot - m_first < m_recent.size() && m_recent[index(slot)]) [[likely]]
                return m_recent[index(slot)];
        } else if (const auto it = m_restored.find(slot); it != m_restored.end()) {
            return it->second.record;
        }
        missing(slot);
    }

    /// Hands the record of `slot` out (the store no longer holds it).
    [[nodiscard]] py::object take(std::uint64_t slot) {
        if (slot < m_first) {
            const auto it = m_restored.find(slot);
            if (it == m_restored.end()) missing(slot);
            py::object r = std::move(it->second.record);
            m_restored.erase(it);
            return r;
        }
        if (slot - m_first >= m_recent.size() || !m_recent[index(slot)]) missing(slot);
        py::object r = std::move(m_recent[index(slot)]);
        while (!m_recent.empty() && !m_recent.front()) {
            m_recent.pop_front();
            ++m_first;
        }
        return r;
    }

    /// Lets go of every record (those drop_last dropped, once the stream is drained).
    void clear() {
        m_first += m_recent.size();
        m_recent.clear();
        m_restored.clear();
    }

private:
    [[nodiscard]] std::size_t index(std::uint64_t slot) const noexcept {
        return static_cast<std::size_t>(slot - m_first);
    }
    [[noreturn]] static void missing(std::uint64_t slot) {
        throw bcl::error("bcl.balance: no record is held at position " + std::to_string(slot));
    }

    std::uint64_t m_first = 0;       // the slot of m_recent.front()
    std::deque<py::object> m_recent; // null once handed out
    std::unordered_map<std::uint64_t, restored_record> m_restored;
    std::uint64_t m_current_slot = UINT64_MAX; // the record being pushed
    double m_current_value = 0.0;
    double m_current_memory = 0.0;
};

/// The estimators of a slot: the value the Python side gave (a cost, or a length for a calibrated
/// cost), and the memory estimate.
struct slot_value {
    std::shared_ptr<const slot_store> store;
    double operator()(const std::int64_t& slot) const {
        return store->value(static_cast<std::uint64_t>(slot));
    }
};

struct slot_value_memory {
    std::shared_ptr<const slot_store> store;
    double operator()(const std::int64_t& slot) const {
        return store->value(static_cast<std::uint64_t>(slot));
    }
    double memory(const std::int64_t& slot) const {
        return store->memory(static_cast<std::uint64_t>(slot));
    }
};

/// a + b*L + c*L^2 of a slot's length L, with (a, b, c) fitted to the batch times observed.
using calibrated_slot_cost =
    decltype(bcl::calibrated_affine_quadratic(0.0, 1.0, 0.0, slot_value{}));

/// How a stream reads the values the Python side gives: what they are ("cost" or "length", as
/// messages name them), and the (a, b, c) that price a length as a + b*L + c*L^2 before the
/// balancer sees it (none: the value goes to the estimator as it is).
struct value_rule {
    std::string name = "cost";
    std::optional<std::array<double, 3>> pricing;
};

/// Throws bcl::error naming the field unless a balancer state continues a stream into which
/// exactly `pushed` records were pushed, and `positions` are the arrival positions of the records
/// it holds, in the order the bytes name them (the waiting batches' records, then the buffered
/// ones). The balancer's own check (check_consistent, run by saved_state::from_bytes) makes those
/// positions distinct and below `pushed`: so the pending records are exactly records of the
/// stream's first `pushed`, none twice, and none already handed out.
inline void check_stream_positions(const bcl::detail::balancer_snapshot& snapshot,
                                   std::span<const std::int64_t> positions, std::uint64_t pushed) {
    const auto text = [](auto x) { return std::to_string(x); };
    if (snapshot.stats.records_in != pushed)
        throw bcl::error("bcl.balance: the state's upstream_consumed, less its intake, is " +
                         text(pushed) + " records balanced, but its balancer says " +
                         text(snapshot.stats.records_in) + " were pushed");
    const std::size_t waiting = snapshot.waiting_records();
    for (std::size_t i = 0; i < positions.size(); ++i) {
        const std::uint64_t named =
            i < waiting ? snapshot.waiting_arrivals[i] : snapshot.buffer_arrivals[i - waiting];
        if (std::cmp_not_equal(positions[i], named))
            throw bcl::error("bcl.balance: the state's positions[" + text(i) + "] is " +
                             text(positions[i]) + ", but its balancer holds the record that " +
                             "arrived at position " + text(named) + " there");
    }
}

/// One stream: push() takes a chunk of records with their values, pop() hands out the next batch
/// as a list of the records themselves.
template <class Estimator>
class stream {
    using balancer_type = bcl::balancer<std::int64_t, Estimator>;

public:
    /// A new stream. `convert(subject, value)` is the Python rule for a value that is not a float
    /// or an int (a numpy scalar, a one-element tensor): a float, or bcl.Error naming `subject`.
    stream(std::shared_ptr<slot_store> store, Estimator estimator, const bcl::options& opt,
           value_rule rule, py::object convert)
        : m_store(std::move(store)), m_rule(std::move(rule)), m_convert(std::move(convert)),
          m_balancer(std::move(estimator), opt), m_capacity(bcl::buffer_capacity(opt)) {}

    /// The stream a saved state continues: the balancer's bytes, the records it held (`records`,
    /// at `positions`, with their `values`, which only a calibrated cost reads again) and the
    /// number of records that had been pushed. Checked against each other before the stream
    /// exists (check_stream_positions; the balancer checks its bytes and the options); a mismatch
    /// is a bcl::error naming the field.
    stream(std::shared_ptr<slot_store> store, Estimator estimator, const bcl::options& opt,
           value_rule rule, py::object convert, std::string_view state,
           const index_array& positions, const py::list& records, const value_array& values,
           std::uint64_t pushed)
        : m_store(std::move(store)), m_rule(std::move(rule)), m_convert(std::move(convert)),
          m_balancer(restored(*m_store, std::move(estimator), opt, state, positions, records,
                              values, pushed)),
          m_capacity(bcl::buffer_capacity(opt)) {}

    /// Pushes records from the front of `intake`, `values[i]` (and `memory[i]`, with a memory
    /// estimate) being those of `intake[i]`, at most room() of them, removing each pushed record
    /// and its values from the lists; returns how many. The values of all of them are checked
    /// first: one that is not a real number, NaN, negative or above bcl::max_estimate is a
    /// bcl::error naming the record's position in the stream, and nothing is pushed (that value
    /// becomes None in its list, to be asked for again, and refused() names it; the others
    /// stay). An error the balancer raises itself (a record over the memory budget) leaves the
    /// records before it pushed (and removed from the lists), and refused() empty.
    std::size_t push(const py::list& intake, const py::list& values,
                     const std::optional<py::list>& memory) {
        m_refused.reset();
        const std::size_t n = std::min(intake.size(), room());
        const bool has_memory = memory.has_value();
        if (values.size() < n || (has_memory && memory->size() < n))
            throw bcl::error("bcl.balance: a value is missing for a record pushed");
        const std::uint64_t first = pushed();
        const auto item = [](const py::handle& list, std::size_t i) {
            return py::handle(PyList_GET_ITEM(list.ptr(), static_cast<Py_ssize_t>(i)));
        };
        m_values.resize(n);
        m_memory.assign(n, 0.0);
        for (std::size_t i = 0; i < n; ++i) {
            const py::list* list = &values;
            try {
                m_values[i] = priced(read(item(values, i), first + i, m_rule.name), first + i);
                list = has_memory ? &*memory : nullptr;
                if (has_memory) m_memory[i] = read(item(*memory, i), first + i, "memory");
            } catch (...) {
                // The bad value becomes None, which the stream asks for again before the next
                // push (a cost that was wrong for a while, such as one read from a file being
                // written, recovers); the values after it were valued already and stay.
                if (list != nullptr) {
                    forget_value(*list, i);
                    m_refused = refusal{list != &values, i};
                }
                throw;
            }
        }
        std::size_t done = 0;
        try {
            for (; done < n; ++done) {
                m_store->set_current(first + done, m_values[done], m_memory[done]);
                m_store->push(py::reinterpret_borrow<py::object>(item(intake, done)));
                try {
                    m_balancer.push(static_cast<std::int64_t>(first + done));
                } catch (...) {
                    m_store->pop_last();
                    throw;
                }
            }
        } catch (...) {
            forget(done, intake, values, memory);
            throw;
        }
        forget(n, intake, values, memory);
        return n;
    }

    /// The next batch (a list of records); or, when the balancer needs more input first, the
    /// number of records push() takes before the next round (an int); or, once the stream is
    /// finished and drained, StopIteration.
    py::object pop() {
        const auto batch = m_balancer.pop();
        if (!batch) {
            if (!m_balancer.finished()) return py::int_(room());
            m_store->clear(); // what drop_last dropped
            throw py::stop_iteration();
        }
        PyObject* list = PyList_New(static_cast<Py_ssize_t>(batch->size()));
        if (list == nullptr) throw py::error_already_set();
        auto out = py::reinterpret_steal<py::list>(list);
        for (std::size_t i = 0; i < batch->size(); ++i)
            PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i),
                            m_store->take(static_cast<std::uint64_t>((*batch)[i])).release().ptr());
        return out;
    }

    /// The end of input: pop() then drains the rest.
    void finish() { m_balancer.finish(); }

    /// (bytes, the pending records in the state's order, their positions as an int64 array).
    [[nodiscard]] py::tuple save() const {
        const typename balancer_type::state s = m_balancer.save();
        index_array positions(static_cast<py::ssize_t>(s.pending.size()));
        std::copy(s.pending.begin(), s.pending.end(), positions.mutable_data());
        py::list records(s.pending.size());
        for (std::size_t i = 0; i < s.pending.size(); ++i)
            records[i] = m_store->at(static_cast<std::uint64_t>(s.pending[i]));
        return py::make_tuple(py::bytes(s.to_bytes()), records, positions);
    }

    /// The value the last push() refused, which it set to None: (whether it is a memory
    /// estimate, its index in its list); None when that push() refused no value (it pushed, or
    /// the balancer refused a record). The caller asks for that value again without searching
    /// the list for the None, whose other items may be any object.
    [[nodiscard]] py::object refused() const {
        if (!m_refused) return py::none();
        return py::make_tuple(m_refused->memory, m_refused->index);
    }

    /// Records push() takes before the next round runs: 0 once finished.
    [[nodiscard]] std::size_t room() const noexcept {
        if (m_balancer.finished()) return 0;
        return m_capacity - std::min(m_capacity, m_balancer.buffered());
    }
    /// Records pushed so far: the next record's position.
    [[nodiscard]] std::uint64_t pushed() const noexcept { return m_balancer.stats().records_in; }
    [[nodiscard]] bool finished() const noexcept { return m_balancer.finished(); }
    /// The stream's balancer (what define_reports binds reads it; observe() feeds it).
    [[nodiscard]] balancer_type& balancer() noexcept { return m_balancer; }
    [[nodiscard]] const balancer_type& balancer() const noexcept { return m_balancer; }

private:
    // Removes the first `n` items of each list (the records pushed, their values).
    static void forget(std::size_t n, const py::list& intake, const py::list& values,
                       const std::optional<py::list>& memory) {
        const auto end = static_cast<Py_ssize_t>(n);
        if (PyList_SetSlice(intake.ptr(), 0, end, nullptr) != 0 ||
            PyList_SetSlice(values.ptr(), 0, end, nullptr) != 0 ||
            (memory && PyList_SetSlice(memory->ptr(), 0, end, nullptr) != 0))
            throw py::error_already_set();
    }

    // Puts None in place of the item of `list` at index `i`.
    static void forget_value(const py::list& list, std::size_t i) {
        Py_INCREF(Py_None); // PyList_SetItem steals the reference it is given
        if (PyList_SetItem(list.ptr(), static_cast<Py_ssize_t>(i), Py_None) != 0)
            throw py::error_already_set();
    }

    static std::string subject(std::string_view name, std::uint64_t position) {
        return "the " + std::string(name) + " of record " + std::to_string(position) +
               " of the stream";
    }

    // A value as a double: a float or an int (not a bool) here, anything else by the Python rule;
    // checked >= 0 and at most bcl::max_estimate.
    double read(py::handle value, std::uint64_t position, std::string_view name) const {
        PyObject* o = value.ptr();
        double x = 0.0;
        if (PyFloat_Check(o)) [[likely]] {
            x = PyFloat_AS_DOUBLE(o);
        } else if (PyLong_Check(o) && !PyBool_Check(o)) {
            x = PyLong_AsDouble(o);
            if (x == -1.0 && PyErr_Occurred() != nullptr) { // too large: the rule says so
                PyErr_Clear();
                x = m_convert(subject(name, position), value).cast<double>();
            }
        } else {
            x = m_convert(subject(name, position), value).cast<double>();
        }
        if (!acceptable(x)) [[unlikely]]
            check_estimate(subject(name, position), x);
        return x;
    }

    // A length priced a + b*L + c*L^2, checked as a cost; other values as they are.
    double priced(double value, std::uint64_t position) const {
        if (!m_rule.pricing) return value;
        const auto [a, b, c] = *m_rule.pricing;
        const double cost = a + value * (b + c * value);
        if (!acceptable(cost)) [[unlikely]]
            check_estimate("the cost a + b*L + c*L^2 of record " + std::to_string(position) +
                               " of the stream (L = " + bcl::detail::number_text(value) + ")",
                           cost);
        return cost;
    }

    static balancer_type restored(slot_store& store, Estimator estimator, const bcl::options& opt,
                                  std::string_view state, const index_array& positions,
                                  const py::list& records, const value_array& values,
                                  std::uint64_t pushed) {
        const std::span<const std::int64_t> held = cost_table::span_of(positions);
        if (records.size() != held.size() || static_cast<std::size_t>(values.size()) != held.size())
            throw bcl::error("bcl.balance: the state has " + std::to_string(records.size()) +
                             " pending records, but " + std::to_string(held.size()) + " positions");
        typename balancer_type::state saved = balancer_type::state::from_bytes(
            state, std::vector<std::int64_t>(held.begin(), held.end()));
        check_stream_positions(saved.snapshot, held, pushed);
        store.reset(pushed);
        for (std::size_t i = 0; i < held.size(); ++i)
            store.restore(static_cast<std::uint64_t>(held[i]),
                          {py::reinterpret_borrow<py::object>(records[i]), values.data()[i]});
        return balancer_type(std::move(estimator), opt, std::move(saved));
    }

    std::shared_ptr<slot_store> m_store; // before m_balancer, which a restore reads it through
    value_rule m_rule;
    py::object m_convert;
    balancer_type m_balancer;
    std::size_t m_capacity;
    std::vector<double> m_values; // push()'s checked values, kept to allocate once
    std::vector<double> m_memory;
    struct refusal {
        bool memory = false; // a memory estimate (else a cost or length)
        std::size_t index = 0;
    };
    std::optional<refusal> m_refused; // what the last push() set to None
};

} // namespace bcl_python
