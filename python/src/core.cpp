// bcl._core: the C++ side of the Python package bcl. The samplers pull an epoch's indices from
// their inner sampler (strictly: integers only, index_input.hpp), look their costs up in a table
// (cost_table.hpp) and run them through a bcl::balancer in a C++ loop (epoch.hpp), handing each
// batch back as a list of ints. Streams (bcl.balance) push chunks of records with the costs Python
// computed into a bcl::balancer over their arrival positions and hand the records back in batches
// (stream.hpp). Token-budget micro-batches (bcl.plan_micro_batches, the sampler's token mode)
// are token_epoch.hpp's. bcl::error becomes the Python exception bcl.Error (a ValueError) with the
// library's message.

#include "cost_table.hpp"
#include "epoch.hpp"
#include "global_epoch.hpp"
#include "global_windows.hpp"
#include "index_input.hpp"
#include "rest_parts.hpp"
#include "stage_local.hpp"
#include "stream.hpp"
#include "table_view.hpp"
#include "token_epoch.hpp"
#include "token_windows.hpp"

#include <bcl/bcl.hpp>
#include <bcl/held_batch.hpp>
#include <bcl/keyed_order.hpp>
#include <bcl/names.hpp>
#include <bcl/stage_plan.hpp>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace py = pybind11;

namespace bcl_python {

namespace {

py::dict running_stats_dict(const bcl::running_stats& s, const char* of) {
    py::dict d;
    d["of"] = of;
    d["count"] = s.count();
    d["mean"] = s.mean();
    d["cv"] = s.cv();
    d["stddev"] = s.stddev();
    d["min"] = s.min();
    d["max"] = s.max();
    return d;
}

} // namespace

py::dict statistics_dict(const bcl::statistics& s) {
    py::dict d;
    d["records_in"] = s.records_in;
    d["records_out"] = s.records_out;
    d["records_dropped"] = s.records_dropped;
    d["records_capped"] = s.records_capped;
    d["batches"] = s.batches;
    d["windows"] = s.windows;
    d["batch_cost"] = running_stats_dict(
        s.batch_cost,
        "the estimated cost of each full batch (the short last batch is not counted)");
    d["gap_to_lower_bound"] = running_stats_dict(
        s.gap_to_lower_bound,
        "each full round's costliest batch above the lower bound on it, relative to that bound");
    d["max_delay_batches"] = s.max_delay_batches;
    d["delay_batches"] = running_stats_dict(
        s.delay_batches, "each record's delay, in batches, past the batch it arrived in");
    d["peak_batch_memory"] = s.peak_batch_memory;
    d["delay_histogram"] = s.delay_histogram;
    return d;
}

/// Binds epoch<Estimator> as `name`; `make(table, extra...)` gives the estimator over a table,
/// `Extra` the constructor arguments after the table (a calibrated cost's prior).
template <class Estimator, class... Extra, class Make>
void define_epoch(py::module_& m, const char* name, Make make) {
    using type = epoch<Estimator>;
    auto cls = py::class_<type>(m, name);
    cls.def(py::init([make](std::shared_ptr<const cost_table> table, Extra... extra,
                            const bcl::options& opt, index_array indices) {
           Estimator e = make(table, extra...);
           return type(std::move(table), std::move(e), opt, std::move(indices));
       }))
        .def(
            py::init([make](std::shared_ptr<const cost_table> table, Extra... extra,
                            const bcl::options& opt, std::string_view state,
                            const index_array& pending, index_array indices, std::size_t position) {
                Estimator e = make(table, extra...);
                return type(std::move(table), std::move(e), opt, state, pending, std::move(indices),
                            position);
            }))
        .def("next_batch", &type::next_batch)
        .def("save", &type::save)
        .def("save_at", &type::save_at, py::arg("consumed"))
        .def("keep_states_for", &type::keep_states_for, py::arg("batches"))
        .def("next_epoch", &type::next_epoch, py::arg("mean_cost"), py::arg("indices"))
        .def("learned_state", &type::learned_state, py::arg("mean_cost"))
        .def_property_readonly("position", &type::position)
        .def_property_readonly("length", &type::length)
        .def_property_readonly("indices", &type::indices)
        .def_property_readonly("drained", &type::drained);
    define_reports<type>(cls);
}

/// Binds stream<Estimator> as `name`; `make(store, extra...)` gives the estimator over the
/// stream's slot store, `Extra` the constructor arguments before the options (a calibrated
/// cost's prior). A stream's values are named `value_name` in messages and priced as
/// a + b*L + c*L^2 by `pricing` when given.
template <class Estimator, class... Extra, class Make>
void define_stream(py::module_& m, const char* name, Make make) {
    using type = stream<Estimator>;
    using pricing_type = std::optional<std::array<double, 3>>;
    auto cls = py::class_<type>(m, name);
    cls.def(py::init([make](Extra... extra, const bcl::options& opt, std::string value_name,
                            pricing_type pricing, py::object convert) {
           auto store = std::make_shared<slot_store>();
           Estimator e = make(store, extra...);
           return type(store, std::move(e), opt, value_rule{std::move(value_name), pricing},
                       std::move(convert));
       }))
        .def(py::init([make](Extra... extra, const bcl::options& opt, std::string value_name,
                             pricing_type pricing, py::object convert, std::string_view state,
                             const index_array& positions, const py::list& records,
                             const value_array& values, std::uint64_t pushed) {
            auto store = std::make_shared<slot_store>();
            Estimator e = make(store, extra...);
            return type(store, std::move(e), opt, value_rule{std::move(value_name), pricing},
                        std::move(convert), state, positions, records, values, pushed);
        }))
        .def("push", &type::push, py::arg("intake"), py::arg("values"), py::arg("memory"))
        .def("pop", &type::pop)
        .def("finish", &type::finish)
        .def("save", &type::save)
        .def_property_readonly("pushed", &type::pushed)
        .def_property_readonly("finished", &type::finished)
        .def_property_readonly("refused", &type::refused);
    define_reports<type>(cls);
}

/// The level a balancer over the epoch `indices` aims its sliding rounds at: the mean of their
/// costs as `cap` clips them (bcl::stream_mean_cost). bcl::error for an index without a cost.
double epoch_mean_cost(const cost_table& table, const index_array& indices,
                       const bcl::cap_options& cap) {
    return bcl::stream_mean_cost(table.costs_of(cost_table::span_of(indices)), cap);
}

/// Binds an options enum as `name`, its values named as the library's registry names them.
template <class Enum>
void bind_choices(py::module_& m, const char* name) {
    auto e = py::enum_<Enum>(m, name);
    const auto names = bcl::names_of<Enum>();
    // The names are string literals of the registries: their data() lives as long as the module.
    for (std::size_t i = 0; i < names.size(); ++i) e.value(names[i].data(), static_cast<Enum>(i));
}

/// Binds field `field` of bcl::options (one of the options' part `Part`, such as its cap) as the
/// property `name` of the part's class.
template <class Class, class Field, class Part>
void bind_part_field(Class& cls, const char* name, Field field, Part bcl::options::*part) {
    using part_type = std::remove_cvref_t<decltype(std::declval<bcl::options&>().*part)>;
    using value_type = std::remove_cvref_t<decltype(field(std::declval<bcl::options&>()))>;
    cls.def_property(
        name,
        [field, part](const part_type& p) {
            bcl::options o;
            o.*part = p;
            return value_type(field(o));
        },
        [field, part](part_type& p, value_type v) {
            bcl::options o;
            o.*part = p;
            field(o) = v;
            p = o.*part;
        });
}

} // namespace bcl_python

namespace {

/// A held plan's slots as each rank's micro-batches: a list (by rank) of lists (by micro-step,
/// in step order) of indices (in input order).
py::list rank_lists(std::span<const bcl::plan_slot> slots, std::size_t ranks) {
    std::size_t steps = 0;
    for (const bcl::plan_slot& s : slots) steps = std::max<std::size_t>(steps, s.step + 1);
    std::vector<std::vector<std::vector<std::int64_t>>> out(
        ranks, std::vector<std::vector<std::int64_t>>(steps));
    for (std::size_t i = 0; i < slots.size(); ++i)
        out[slots[i].rank][slots[i].step].push_back(static_cast<std::int64_t>(i));
    py::list result;
    for (const auto& rank : out) result.append(py::cast(rank));
    return result;
}

} // namespace

PYBIND11_MODULE(_core, m) {
    using namespace bcl_python;
    m.doc() = "The C++ balancer of bcl over dataset indices; use bcl.BalancedBatchSampler.";
    py::register_exception<bcl::error>(m, "Error", PyExc_ValueError);
    m.attr("version") = BCL_VERSION_STRING;
    m.attr("max_plan_records") = bcl::max_plan_records;
    m.def(
        "epoch_batches",
        [](std::size_t n, std::size_t ranks, std::size_t batch, bool drop_last) {
            return bcl::epoch_layout::of(
                       n, {.ranks = ranks, .lookahead = 1, .batch = batch, .drop_last = drop_last})
                .batches;
        },
        py::arg("n"), py::arg("ranks"), py::arg("batch"), py::arg("drop_last"),
        "Batches each rank gets in an epoch of n records (bcl::epoch_layout).");
    m.def(
        "keyed_order",
        [](std::uint64_t n, std::uint64_t seed, std::uint64_t epoch, std::uint64_t first,
           std::uint64_t count) {
            if (first > n || count > n - first)
                throw bcl::error("bcl.keyed_order: positions [" + std::to_string(first) + ", " +
                                 std::to_string(first) + " + " + std::to_string(count) +
                                 ") are outside the order of " + std::to_string(n) + " indices");
            py::array_t<std::int64_t> out(static_cast<py::ssize_t>(count));
            std::int64_t* data = out.mutable_data();
            {
                py::gil_scoped_release unlocked;
                bcl::keyed_order(n, seed, epoch)
                    .fill(first, std::span<std::int64_t>(data, static_cast<std::size_t>(count)));
            }
            return out;
        },
        py::arg("n"), py::arg("seed"), py::arg("epoch"), py::arg("first"), py::arg("count"),
        "Positions [first, first + count) of epoch `epoch`'s keyed order of n indices "
        "(bcl::keyed_order), as int64.");

    // The choices, by their names in the library's registries (bcl/names.hpp): a new policy or
    // cap kind is here without an edit.
    bind_choices<bcl::lookahead_policy>(m, "lookahead_policy");
    bind_choices<bcl::emission_order>(m, "emission_order");
    bind_choices<bcl::batch_cost>(m, "batch_cost");
    bind_choices<bcl::cap_kind>(m, "cap_kind");
    bind_choices<bcl::cap_action>(m, "cap_action");
    // Every option field, walked from bcl::for_each_option_field: "cap.x" and "calibration.x"
    // on their own classes, the rest on options, which holds those two as values.
    auto cap = py::class_<bcl::cap_options>(m, "cap_options").def(py::init<>());
    auto calibration =
        py::class_<bcl::calibration_options>(m, "calibration_options").def(py::init<>());
    auto options = py::class_<bcl::options>(m, "options").def(py::init<>());
    options.def_readwrite("cap", &bcl::options::cap)
        .def_readwrite("calibration", &bcl::options::calibration);
    bcl::for_each_option_field([&](const char* name, auto field) {
        const std::string_view n = name;
        if (n.starts_with("cap."))
            bind_part_field(cap, name + 4, field, &bcl::options::cap);
        else if (n.starts_with("calibration."))
            bind_part_field(calibration, name + 12, field, &bcl::options::calibration);
        else
            options.def_property(
                name,
                [field](const bcl::options& o) {
                    return std::remove_cvref_t<decltype(field(o))>(field(o));
                },
                [field](bcl::options& o, std::remove_cvref_t<decltype(field(o))> v) {
                    field(o) = v;
                });
    });
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
        .def(py::init<const value_array&, const std::optional<value_array>&>(), py::arg("cost"),
             py::arg("memory") = py::none())
        .def(py::init<bool>(), py::arg("has_memory"))
        .def_property_readonly("has_memory", &cost_table::has_memory)
        .def_property_readonly("dense", &cost_table::dense)
        .def_property_readonly("dataset_size", &cost_table::dataset_size)
        .def("__len__", &cost_table::size)
        .def("missing", &cost_table::missing, py::arg("indices"))
        .def("assign", &cost_table::assign, py::arg("indices"), py::arg("cost"),
             py::arg("memory") = py::none());
    m.def("epoch_mean_cost", &epoch_mean_cost, py::arg("table"), py::arg("indices"),
          py::arg("cap"));
    m.def(
        "strict_indices",
        [](py::handle source, std::string_view what) { return strict_indices(source, what); },
        py::arg("source"), py::arg("what"),
        "The indices `source` yields as an int64 array; bcl.Error for any that is not an "
        "integer in [0, 2^63), naming `what`, the position and the value.");

    py::class_<global_epoch>(m, "global_epoch")
        .def(py::init([](const std::shared_ptr<const cost_table>& table, const index_array& order,
                         std::size_t ranks, std::size_t steps, std::size_t batch, std::size_t rank,
                         bcl::batch_cost batching, double cap, bool level_steps, bool drop_last) {
                 bcl::plan_options opt;
                 opt.batching = batching;
                 opt.cap = cap;
                 opt.level_steps = level_steps;
                 return global_epoch(table, order,
                                     bcl::epoch_shape{.ranks = ranks,
                                                      .lookahead = steps,
                                                      .batch = batch,
                                                      .drop_last = drop_last},
                                     rank, opt);
             }),
             py::arg("table"), py::arg("order"), py::arg("ranks"), py::arg("steps"),
             py::arg("batch"), py::arg("rank"), py::arg("batching"), py::arg("cap"),
             py::arg("level_steps"), py::arg("drop_last"))
        .def(py::init([](const value_array& stage_costs, const index_array& order,
                         std::size_t ranks, std::size_t steps, std::size_t batch, std::size_t rank,
                         bcl::batch_cost batching, double cap, bool level_steps, bool drop_last) {
                 bcl::plan_options opt;
                 opt.batching = batching;
                 opt.cap = cap;
                 opt.level_steps = level_steps;
                 return global_epoch(stage_costs, order,
                                     bcl::epoch_shape{.ranks = ranks,
                                                      .lookahead = steps,
                                                      .batch = batch,
                                                      .drop_last = drop_last},
                                     rank, opt);
             }),
             py::arg("table"), py::arg("order"), py::arg("ranks"), py::arg("steps"),
             py::arg("batch"), py::arg("rank"), py::arg("batching"), py::arg("cap"),
             py::arg("level_steps"), py::arg("drop_last"),
             "The same over an (N, D) float64 table of stage costs, checked before "
             "(check_stage_costs).")
        .def_property_readonly("batches", &global_epoch::batches)
        .def_property_readonly("digest", &global_epoch::digest)
        .def("batch", &global_epoch::batch, py::arg("i"))
        .def("stats", &global_epoch::stats);
    py::class_<table_view, std::shared_ptr<table_view>>(m, "table_view")
        .def(py::init([](py::array values, std::string what, bool integers_only) {
                 return std::make_shared<table_view>(std::move(values), std::move(what),
                                                     integers_only);
             }),
             py::arg("values"), py::arg("what"), py::arg("integers_only") = false,
             "A table read in place (any integer or float32/float64 1-d C-contiguous array, or an "
             "(N, D) one of stage costs; a memory map too; integers only with integers_only), "
             "checked once; bcl.Error naming "
             "the first bad entry.")
        .def("__len__", &table_view::size)
        .def_property_readonly("stages", &table_view::stages)
        .def_property_readonly("digest", &table_view::digest);
    py::class_<global_windows>(m, "global_windows")
        .def(
            py::init([](const std::shared_ptr<const table_view>& table, std::uint64_t seed,
                        std::uint64_t epoch, bool shuffle, std::size_t ranks, std::size_t steps,
                        std::size_t batch, std::size_t rank, bcl::batch_cost batching, double cap,
                        bool level_steps, bool drop_last, std::uint64_t inputs,
                        const py::object& rest) {
                bcl::plan_options opt;
                opt.batching = batching;
                opt.cap = cap;
                opt.level_steps = level_steps;
                return global_windows(
                    table, seed, epoch, shuffle,
                    bcl::epoch_shape{
                        .ranks = ranks, .lookahead = steps, .batch = batch, .drop_last = drop_last},
                    rank, opt, inputs,
                    rest_of(table->size(), rest, "bcl.DistributedBalancedBatchSampler"));
            }),
            py::arg("table"), py::arg("seed"), py::arg("epoch"), py::arg("shuffle"),
            py::arg("ranks"), py::arg("steps"), py::arg("batch"), py::arg("rank"),
            py::arg("batching"), py::arg("cap"), py::arg("level_steps"), py::arg("drop_last"),
            py::arg("inputs"), py::arg("rest") = py::none())
        .def(
            "rest_after",
            [](global_windows& self, std::size_t position) -> py::object {
                const bcl::epoch_rest r = self.rest_after(position);
                const std::span<const std::uint8_t> t = r.taken();
                // Never None: the rest after a position is a rest, even the whole epoch's.
                return py::make_tuple(r.start(), r.span(),
                                      py::bytes(reinterpret_cast<const char*>(t.data()), t.size()));
            },
            py::arg("position"),
            "(start, span, taken) of the epoch's rest once every rank took `position` batches.")
        .def_property_readonly("rest",
                               [](const global_windows& self) { return parts_of(self.rest()); })
        .def_property_readonly("batches", &global_windows::batches)
        .def_property_readonly("digest", &global_windows::digest)
        .def("batch", &global_windows::batch, py::arg("i"))
        .def("stats", &global_windows::stats);
    m.def(
        "settings_digest",
        [](std::uint64_t table, const std::string& settings) {
            // The table's digest, then each byte of the settings' text, through SplitMix64's
            // output function: equal inputs, equal digests, on every platform.
            std::uint64_t h = bcl::detail::mix64(table);
            for (const unsigned char c : settings) h = bcl::detail::mix64(h ^ c);
            return h;
        },
        py::arg("table"), py::arg("settings"),
        "The digest of a table's digest and a settings text: what a plan window by window "
        "depends on besides the epoch.");
    m.def(
        "plan_held_batch",
        [](const value_array& costs, std::size_t ranks, std::size_t batch, bcl::batch_cost batching,
           double cap, bool level_steps) {
            bcl::plan_options opt;
            opt.batching = batching;
            opt.cap = cap;
            opt.level_steps = level_steps;
            const auto n = static_cast<std::size_t>(costs.size());
            std::vector<bcl::plan_slot> slots(n);
            {
                py::gil_scoped_release unlocked;
                bcl::held_batch_planner planner;
                (void)planner.plan(std::span<const double>(costs.data(), n), ranks, batch, opt,
                                   slots, "bcl.plan_batches");
            }
            return rank_lists(slots, ranks);
        },
        py::arg("costs"), py::arg("ranks"), py::arg("batch"), py::arg("batching"), py::arg("cap"),
        py::arg("level_steps"),
        "bcl.plan_batches: each rank's micro-batches of one held global batch "
        "(bcl::held_batch_planner).");
    m.attr("max_plan_stages") = bcl::max_plan_stages;
    m.def(
        "check_stage_costs",
        [](const py::array_t<double, py::array::c_style | py::array::forcecast>& costs,
           std::string_view who) {
            if (costs.ndim() != 2)
                throw bcl::error(std::string(who) +
                                 ": stage costs must be a table of shape (N, D)");
            (void)bcl::check_stage_costs(
                std::span<const double>(costs.data(), static_cast<std::size_t>(costs.size())),
                static_cast<std::size_t>(costs.shape(1)), who);
        },
        py::arg("costs"), py::arg("who"),
        "bcl.Error (prefixed with `who`) naming the record and stage of the first cost of an "
        "(N, D) table that is not a valid cost (bcl::check_stage_costs).");
    m.def(
        "plan_stage_batch",
        [](const py::array_t<double, py::array::c_style | py::array::forcecast>& costs,
           std::size_t ranks, std::size_t batch, bcl::batch_cost batching, bool level_steps) {
            if (costs.ndim() != 2)
                throw bcl::error("bcl.plan_batches: stage costs must be a table of shape (N, D)");
            const auto n = static_cast<std::size_t>(costs.shape(0));
            const auto d = static_cast<std::size_t>(costs.shape(1));
            bcl::plan_options opt;
            opt.batching = batching;
            opt.level_steps = level_steps;
            std::vector<bcl::plan_slot> slots(n);
            bcl::stage_plan_summary s;
            {
                py::gil_scoped_release unlocked;
                bcl::held_stage_planner planner;
                s = planner.plan(std::span<const double>(costs.data(), n * d), d, ranks, batch, opt,
                                 slots, "bcl.plan_batches");
            }
            py::dict summary;
            summary["stages"] = s.stages;
            summary["micro_steps"] = s.micro_steps;
            summary["total"] = s.total;
            summary["objective"] = s.objective;
            summary["summed_objective"] = s.summed_objective;
            summary["lower_bound"] = s.lower_bound;
            summary["steps_restaged"] = s.steps_restaged;
            summary["steps_from_stage"] = s.steps_from_stage;
            summary["efficiency"] = s.efficiency();
            return py::make_tuple(rank_lists(slots, ranks), summary);
        },
        py::arg("costs"), py::arg("ranks"), py::arg("batch"), py::arg("batching"),
        py::arg("level_steps"),
        "bcl.plan_batches with a table of stage costs: (each rank's micro-batches, the summary) "
        "(bcl::held_stage_planner).");
    define_token_plans(m);
    define_token_windows(m);
    define_stage_local(m);
    define_epoch<index_cost>(
        m, "epoch", [](const std::shared_ptr<const cost_table>& t) { return index_cost{t}; });
    define_epoch<index_cost_memory>(
        m, "memory_epoch",
        [](const std::shared_ptr<const cost_table>& t) { return index_cost_memory{t}; });
    define_stream<slot_value>(m, "stream", [](const std::shared_ptr<const slot_store>& store) {
        return slot_value{store};
    });
    define_stream<slot_value_memory>(
        m, "memory_stream",
        [](const std::shared_ptr<const slot_store>& store) { return slot_value_memory{store}; });
    define_stream<calibrated_slot_cost, double, double, double>(
        m, "calibrated_stream",
        [](const std::shared_ptr<const slot_store>& store, double a, double b, double c) {
            return bcl::calibrated_affine_quadratic(a, b, c, slot_value{store});
        });
    define_epoch<calibrated_index_cost, double, double, double>(
        m, "calibrated_epoch",
        [](const std::shared_ptr<const cost_table>& t, double a, double b, double c) {
            return bcl::calibrated_affine_quadratic(a, b, c, index_length{t});
        });
}
