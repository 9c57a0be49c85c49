// bcl._core: the C++ side of the Python package bcl. A balancer over dataset indices (int64
// records) whose cost, and optionally memory, is looked up in a table indexed by the dataset
// index. Python pulls an epoch's indices from the inner sampler into one array; this module pushes
// them into the balancer in a C++ loop and hands the batches back as lists of ints. bcl::error
// becomes the Python exception bcl.Error (a ValueError) with the library's message.

#include <bcl/bcl.hpp>
#include <bcl/detail/number_text.hpp>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace {

using index_array = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>;
using value_array = py::array_t<double, py::array::c_style | py::array::forcecast>;

/// Cost and (optionally) memory of each dataset index. Filled once from an array, or grown entry
/// by entry when the costs come from a Python callable (Python evaluates the callable for the
/// indices missing() names and hands the values to assign()).
class cost_table {
public:
    cost_table(const value_array& cost, std::optional<value_array> memory) {
        copy_values(cost, m_cost, "costs");
        if (memory) {
            copy_values(*memory, m_memory, "memory");
            if (m_memory.size() != m_cost.size())
                throw bcl::error("bcl.BalancedBatchSampler: memory has " +
                                 std::to_string(m_memory.size()) + " entries but costs has " +
                                 std::to_string(m_cost.size()));
            m_has_memory = true;
        }
        m_known.assign(m_cost.size(), 1);
    }

    /// An empty table, grown by assign(); `has_memory` says whether memory values come along.
    explicit cost_table(bool has_memory) : m_has_memory(has_memory) {}

    [[nodiscard]] bool has_memory() const noexcept { return m_has_memory; }
    [[nodiscard]] std::size_t size() const noexcept { return m_cost.size(); }

    /// The distinct indices among `indices` that have no entry yet, in first-seen order. Negative
    /// indices are left for the balancer to reject.
    [[nodiscard]] index_array missing(const index_array& indices) const {
        const std::int64_t* in = indices.data();
        const auto n = static_cast<std::size_t>(indices.size());
        std::vector<std::int64_t> out;
        std::unordered_set<std::int64_t> listed;
        for (std::size_t i = 0; i < n; ++i) {
            const std::int64_t index = in[i];
            if (index < 0) continue;
            const auto at = static_cast<std::size_t>(index);
            if (at < m_known.size() && m_known[at] != 0) continue;
            if (listed.insert(index).second) out.push_back(index);
        }
        index_array result(static_cast<py::ssize_t>(out.size()));
        std::copy(out.begin(), out.end(), result.mutable_data());
        return result;
    }

    /// Sets the entries of `indices` (non-negative) to `cost` and `memory`.
    void assign(const index_array& indices, const value_array& cost,
                std::optional<value_array> memory) {
        const auto n = static_cast<std::size_t>(indices.size());
        if (static_cast<std::size_t>(cost.size()) != n ||
            (memory && static_cast<std::size_t>(memory->size()) != n))
            throw bcl::error("bcl.BalancedBatchSampler: as many costs as indices are needed");
        if (memory.has_value() != m_has_memory)
            throw bcl::error("bcl.BalancedBatchSampler: memory values are needed exactly when "
                             "the sampler has a memory estimate");
        const std::int64_t* in = indices.data();
        for (std::size_t i = 0; i < n; ++i) {
            if (in[i] < 0 || in[i] >= max_index)
                throw bcl::error("bcl.BalancedBatchSampler: dataset index " +
                                 std::to_string(in[i]) + " is outside [0, 2^32)");
            const auto at = static_cast<std::size_t>(in[i]);
            if (at >= m_cost.size()) {
                const std::size_t size = std::max(at + 1, m_cost.size() * 2);
                m_cost.resize(size, NAN);
                m_known.resize(size, 0);
                if (m_has_memory) m_memory.resize(size, NAN);
            }
            m_cost[at] = cost.data()[i];
            if (m_has_memory) m_memory[at] = memory->data()[i];
            m_known[at] = 1;
        }
    }

    /// The level a balancer over the epoch `indices` aims its sliding rounds at: the mean of
    /// their costs as `cap` clips them (bcl::stream_mean_cost). bcl::error for an index without
    /// a cost, or a cost the balancer would refuse (naming the dataset index).
    [[nodiscard]] double mean_cost(const index_array& indices, const bcl::cap_options& cap) const {
        const std::int64_t* in = indices.data();
        const auto n = static_cast<std::size_t>(indices.size());
        std::vector<double> costs(n);
        for (std::size_t i = 0; i < n; ++i) costs[i] = cost(in[i]);
        // Checked here, before any index of the epoch is pushed, so the message names the record
        // as a push would.
        for (std::size_t i = 0; i < n; ++i)
            if (!(costs[i] >= 0.0 && costs[i] <= bcl::max_estimate))
                throw bcl::error("bcl.BalancedBatchSampler: record " + std::to_string(i) +
                                 " of the epoch has cost estimate " +
                                 bcl::detail::number_text(costs[i]) +
                                 "; it must be >= 0 and at most bcl::max_estimate (" +
                                 bcl::detail::number_text(bcl::max_estimate) + ") (dataset index " +
                                 std::to_string(in[i]) + "; found when the epoch started)");
        return bcl::stream_mean_cost(costs, cap);
    }

    /// Cost of dataset index `index`; bcl::error if the table has none.
    [[nodiscard]] double cost(std::int64_t index) const { return m_cost[checked(index)]; }
    [[nodiscard]] double memory(std::int64_t index) const { return m_memory[checked(index)]; }

private:
    // Indices a callable's table grows to: the table is dense, so an absurd index would otherwise
    // be an absurd allocation.
    static constexpr std::int64_t max_index = std::int64_t{1} << 32;

    static void copy_values(const value_array& values, std::vector<double>& to,
                            std::string_view what) {
        if (values.ndim() != 1)
            throw bcl::error("bcl.BalancedBatchSampler: " + std::string(what) +
                             " must be one-dimensional (got " + std::to_string(values.ndim()) +
                             " dimensions)");
        to.assign(values.data(), values.data() + values.size());
    }

    [[nodiscard]] std::size_t checked(std::int64_t index) const {
        const auto at = static_cast<std::size_t>(index);
        if (index >= 0 && at < m_known.size() && m_known[at] != 0) [[likely]]
            return at;
        throw bcl::error("bcl.BalancedBatchSampler: the sampler yielded dataset index " +
                         std::to_string(index) + ", which has no cost (costs has " +
                         std::to_string(m_cost.size()) + " entries)");
    }

    std::vector<double> m_cost;
    std::vector<double> m_memory;
    std::vector<char> m_known; // 1 where an entry was given
    bool m_has_memory = false;
};

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

py::dict running_stats_dict(const bcl::running_stats& s) {
    py::dict d;
    d["count"] = s.count();
    d["mean"] = s.mean();
    d["cv"] = s.cv();
    d["stddev"] = s.stddev();
    d["min"] = s.min();
    d["max"] = s.max();
    return d;
}

py::dict statistics_dict(const bcl::statistics& s) {
    py::dict d;
    d["records_in"] = s.records_in;
    d["records_out"] = s.records_out;
    d["records_dropped"] = s.records_dropped;
    d["records_capped"] = s.records_capped;
    d["batches"] = s.batches;
    d["windows"] = s.windows;
    d["batch_cost"] = running_stats_dict(s.batch_cost);
    d["gap_to_lower_bound"] = running_stats_dict(s.gap_to_lower_bound);
    d["max_delay_batches"] = s.max_delay_batches;
    d["delay_batches"] = running_stats_dict(s.delay_batches);
    d["peak_batch_memory"] = s.peak_batch_memory;
    d["delay_histogram"] = s.delay_histogram;
    return d;
}

/// One epoch of a balancer over dataset indices: the balancer and the epoch's index array it
/// reads from (attached by feed()). next_batch() pushes indices until a batch is ready and pops it.
template <class Estimator>
class epoch {
    using balancer = bcl::balancer<std::int64_t, Estimator>;

public:
    epoch(std::shared_ptr<const cost_table> table, const bcl::options& opt)
        : m_balancer(Estimator{std::move(table)}, opt) {}

    /// A balancer continued from `state` (the bytes of state::to_bytes()) and its `pending`
    /// indices. Throws bcl::error if the state is corrupt or was saved with other options.
    epoch(std::shared_ptr<const cost_table> table, const bcl::options& opt, std::string_view state,
          std::vector<std::int64_t> pending)
        : m_balancer(Estimator{std::move(table)}, opt,
                     balancer::state::from_bytes(state, std::move(pending))) {}

    /// Reads the epoch's indices from `indices`, starting at `position` (the indices before it
    /// were pushed already, by this balancer or by the one whose state it continues).
    void feed(index_array indices, std::size_t position) {
        if (indices.ndim() != 1)
            throw bcl::error("bcl.BalancedBatchSampler: the epoch's indices must be "
                             "one-dimensional");
        if (position > static_cast<std::size_t>(indices.size()))
            throw bcl::error("bcl.BalancedBatchSampler: the state was saved at index " +
                             std::to_string(position) +
                             " of an epoch, but the sampler now yields " +
                             std::to_string(indices.size()) + " indices");
        m_indices = std::move(indices);
        m_position = position;
    }

    /// The next batch as a list of ints, or None once the epoch is drained.
    py::object next_batch() {
        const std::int64_t* in = m_indices ? m_indices->data() : nullptr;
        const std::size_t n = m_indices ? static_cast<std::size_t>(m_indices->size()) : 0;
        for (;;) {
            if (auto batch = m_balancer.pop()) return to_list(*batch);
            if (m_position < n) {
                while (m_position < n && m_balancer.can_push()) {
                    push(in[m_position]);
                    ++m_position;
                }
            } else if (!m_balancer.finished()) {
                m_balancer.finish();
            } else {
                return py::none();
            }
        }
    }

    /// (bytes, pending indices as an int64 array) of the balancer's state.
    [[nodiscard]] py::tuple save() const {
        const typename balancer::state s = m_balancer.save();
        index_array pending(static_cast<py::ssize_t>(s.pending.size()));
        std::copy(s.pending.begin(), s.pending.end(), pending.mutable_data());
        return py::make_tuple(py::bytes(s.to_bytes()), pending);
    }

    [[nodiscard]] std::size_t position() const noexcept { return m_position; }
    [[nodiscard]] bool drained() const noexcept {
        return m_balancer.finished() && m_balancer.buffered() == 0;
    }
    [[nodiscard]] std::size_t buffered() const noexcept { return m_balancer.buffered(); }
    [[nodiscard]] py::dict stats() const { return statistics_dict(m_balancer.stats()); }

private:
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

    balancer m_balancer;
    std::optional<index_array> m_indices;
    std::size_t m_position = 0;
};

template <class Estimator>
void define_epoch(py::module_& m, const char* name) {
    using type = epoch<Estimator>;
    py::class_<type>(m, name)
        .def(py::init<std::shared_ptr<const cost_table>, const bcl::options&>(), py::arg("table"),
             py::arg("options"))
        .def(py::init<std::shared_ptr<const cost_table>, const bcl::options&, std::string_view,
                      std::vector<std::int64_t>>(),
             py::arg("table"), py::arg("options"), py::arg("state"), py::arg("pending"))
        .def("feed", &type::feed, py::arg("indices"), py::arg("position"))
        .def("next_batch", &type::next_batch)
        .def("save", &type::save)
        .def_property_readonly("position", &type::position)
        .def_property_readonly("drained", &type::drained)
        .def_property_readonly("buffered", &type::buffered)
        .def("stats", &type::stats);
}

} // namespace

PYBIND11_MODULE(_core, m) {
    m.doc() = "The C++ balancer of bcl over dataset indices; use bcl.BalancedBatchSampler.";
    py::register_exception<bcl::error>(m, "Error", PyExc_ValueError);
    m.attr("version") = BCL_VERSION_STRING;

    py::enum_<bcl::lookahead_policy>(m, "lookahead_policy")
        .value("tumbling", bcl::lookahead_policy::tumbling)
        .value("sliding", bcl::lookahead_policy::sliding);
    py::enum_<bcl::emission_order>(m, "emission_order")
        .value("costliest_first", bcl::emission_order::costliest_first)
        .value("shuffled", bcl::emission_order::shuffled);
    py::enum_<bcl::batch_cost>(m, "batch_cost")
        .value("packed", bcl::batch_cost::packed)
        .value("padded", bcl::batch_cost::padded);
    py::enum_<bcl::cap_kind>(m, "cap_kind")
        .value("none", bcl::cap_kind::none)
        .value("fixed", bcl::cap_kind::fixed)
        .value("quantile", bcl::cap_kind::quantile);
    py::enum_<bcl::cap_action>(m, "cap_action")
        .value("clip", bcl::cap_action::clip)
        .value("truncate", bcl::cap_action::truncate);

    py::class_<bcl::cap_options>(m, "cap_options")
        .def(py::init<>())
        .def_readwrite("kind", &bcl::cap_options::kind)
        .def_readwrite("value", &bcl::cap_options::value)
        .def_readwrite("quantile", &bcl::cap_options::quantile)
        .def_readwrite("warmup", &bcl::cap_options::warmup)
        .def_readwrite("action", &bcl::cap_options::action)
        .def_readwrite("prior", &bcl::cap_options::prior);
    py::class_<bcl::options>(m, "options")
        .def(py::init<>())
        .def_readwrite("batch_size", &bcl::options::batch_size)
        .def_readwrite("lookahead", &bcl::options::lookahead)
        .def_readwrite("drop_last", &bcl::options::drop_last)
        .def_readwrite("seed", &bcl::options::seed)
        .def_readwrite("emission", &bcl::options::emission)
        .def_readwrite("batching", &bcl::options::batching)
        .def_readwrite("policy", &bcl::options::policy)
        .def_readwrite("buffer_windows", &bcl::options::buffer_windows)
        .def_readwrite("max_age", &bcl::options::max_age)
        .def_readwrite("mean_cost", &bcl::options::mean_cost)
        .def_readwrite("cap", &bcl::options::cap)
        .def_readwrite("memory_budget", &bcl::options::memory_budget)
        .def_readwrite("largest_first", &bcl::options::largest_first);
    m.def("validate", &bcl::validate, py::arg("options"),
          "Raises bcl.Error naming the first invalid option.");
    m.def(
        "with_mean_cost",
        [](bcl::options opt, double mean_cost) {
            opt.mean_cost = mean_cost;
            return opt;
        },
        py::arg("options"), py::arg("mean_cost"), "A copy of `options` with this mean_cost.");
    m.def("buffer_capacity", &bcl::buffer_capacity, py::arg("options"));
    m.def("max_delay_bound", &bcl::max_delay_bound, py::arg("options"));

    py::class_<cost_table, std::shared_ptr<cost_table>>(m, "cost_table")
        .def(py::init<const value_array&, std::optional<value_array>>(), py::arg("cost"),
             py::arg("memory") = py::none())
        .def(py::init<bool>(), py::arg("has_memory"))
        .def_property_readonly("has_memory", &cost_table::has_memory)
        .def("__len__", &cost_table::size)
        .def("missing", &cost_table::missing, py::arg("indices"))
        .def("assign", &cost_table::assign, py::arg("indices"), py::arg("cost"),
             py::arg("memory") = py::none())
        .def("mean_cost", &cost_table::mean_cost, py::arg("indices"), py::arg("cap"));

    define_epoch<index_cost>(m, "epoch");
    define_epoch<index_cost_memory>(m, "memory_epoch");
}
