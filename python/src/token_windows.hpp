#pragma once
// One epoch of bcl.DistributedBalancedBatchSampler's token mode with order="keyed", for one
// rank, window by window: bcl::keyed_token_pass over the lengths (and costs) read in place. What
// it holds is one window and where each window walked starts, never the epoch: its start and
// each window cost O(window), whatever N. Its micro-batch count is known once the pass has
// walked to its end (len() walks there, keeping nothing). A state holds the rest at its
// window's start, so that a resumed pass walks nothing twice, at any number of ranks from a step
// boundary.

#include "rest_parts.hpp"
#include "table_view.hpp"

#include <bcl/epoch_rest.hpp>
#include <bcl/error.hpp>
#include <bcl/keyed_token_epoch.hpp>
#include <bcl/token_budget.hpp>
#include <bcl/token_plan.hpp>

#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

namespace bcl_python {

namespace py = pybind11;

/// `lengths` read in place (a table_view of integers) for a token plan of `budget`: the
/// settings checked first (check_token_budget, check_token_window, check_token_options), then, in
/// the one streaming pass that checks each entry and takes the digest, each length
/// (bcl::check_token_length, naming the dataset index; oversized='alone' where that would plan
/// it). Throws bcl::error prefixed with `who`. O(N), no copy.
[[nodiscard]] inline std::shared_ptr<table_view>
token_table(py::array lengths, const bcl::token_budget& budget, std::size_t micro_batches,
            std::size_t lookahead, const bcl::token_plan_options& opt, const std::string& who) {
    bcl::check_token_budget(budget, lookahead, who);
    bcl::check_token_window(budget, micro_batches, lookahead, who);
    bcl::check_token_options(opt, budget, who);
    // One compare an entry keeps the pass at memory speed; the check itself, which names the
    // entry, runs only for a length it refuses.
    const std::uint64_t longest = bcl::longest_token_length(budget, opt);
    try {
        return std::make_shared<table_view>(
            std::move(lengths), "lengths", true, [&](std::size_t i, auto length) {
                if (static_cast<std::uint64_t>(length) > longest) [[unlikely]]
                    (void)bcl::check_token_length(static_cast<std::uint64_t>(length), i,
                                                  "dataset index", budget, opt, who);
            });
    } catch (const bcl::error& e) {
        const std::string what = e.what();
        // Only a length's refusal is the budget's, which oversized='alone' may let through.
        if (opt.oversized_alone || what.find("dataset index") == std::string::npos) throw;
        throw bcl::error(what + " (oversized='alone')");
    }
}

class token_windows {
    static constexpr const char* who = "bcl.DistributedBalancedBatchSampler";

    // Calls f(tokens_of, cost_of) with the tables read in place.
    template <class F>
    auto read(F&& f) {
        const table_view& lengths = *m_lengths;
        const table_view* costs = m_costs.get();
        const auto tokens_of = [&lengths](std::uint64_t i) { return lengths.count(i); };
        const auto cost_of = [costs](std::uint64_t i) { return costs->value(i); };
        return f(tokens_of, cost_of);
    }

public:
    /// The rest `rest` (None: the whole epoch; else the parts a state holds) of epoch `epoch` of
    /// the tables' N records, for `rank` of shape's R: bcl::keyed_token_pass over the tables
    /// read in place, its digest keyed_epoch_digest of `inputs` (the tables and the settings but
    /// the ranks and the rank), the epoch, R and the rest. Nothing is planned yet. bcl::error for
    /// a shape the planner refuses, a rank not below R, or a rest the epoch cannot hold.
    token_windows(std::shared_ptr<const table_view> lengths,
                  std::shared_ptr<const table_view> costs, std::uint64_t seed, std::uint64_t epoch,
                  bool shuffle, const bcl::token_epoch_shape& shape, std::size_t rank,
                  std::uint64_t inputs, const py::object& rest)
        : m_lengths(std::move(lengths)), m_costs(std::move(costs)), m_inputs(inputs) {
        if (m_costs && m_costs->size() != m_lengths->size())
            throw bcl::error(std::string(who) + ": costs has " + std::to_string(m_costs->size()) +
                             " entries but lengths has " + std::to_string(m_lengths->size()));
        m_pass.start(seed, epoch, shuffle, shape, rank, m_costs != nullptr, inputs,
                     rest_of(m_lengths->size(), rest, who), who);
    }

    /// This rank's micro-batches in the pass: walked to its end once, without the GIL.
    [[nodiscard]] std::size_t batches() {
        py::gil_scoped_release unlocked;
        return read([&](const auto& tokens_of, const auto& cost_of) {
            return m_pass.micro_batches(tokens_of, cost_of, who);
        });
    }

    /// Whether the pass ends at micro-batch `i` (walking to it).
    [[nodiscard]] bool ends_at(std::size_t i) { return !next(i).has_value(); }

    /// Micro-batch `i` of this rank, as a list of ints. bcl::error past the pass's end.
    [[nodiscard]] py::list batch(std::size_t i) {
        const std::optional<std::span<const std::uint64_t>> b = next(i);
        if (!b)
            throw bcl::error(std::string(who) + ": micro-batch " + std::to_string(i) +
                             " is past the pass's end");
        py::list out(b->size());
        for (std::size_t k = 0; k < b->size(); ++k) out[k] = py::int_((*b)[k]);
        return out;
    }

    [[nodiscard]] std::uint64_t digest() const noexcept { return m_pass.digest(); }

    /// Where a state after `position` micro-batches stands: (the position within its window,
    /// the digest of a pass over the rest at the window's start, that rest's parts or None).
    [[nodiscard]] py::tuple point(std::size_t position) {
        bcl::token_pass_point at;
        {
            py::gil_scoped_release unlocked;
            at = read([&](const auto& tokens_of, const auto& cost_of) {
                return m_pass.point(position, tokens_of, cost_of, who);
            });
        }
        const std::uint64_t digest =
            bcl::keyed_epoch_digest(m_inputs, m_pass.epoch(), m_pass.shape().budget.ranks, at.rest);
        return py::make_tuple(at.position, digest, parts_of(at.rest));
    }

    /// The parts of the epoch's rest once every rank took `position` micro-batches, a step
    /// boundary (bcl::keyed_token_pass::rest_after).
    [[nodiscard]] py::object rest_after(std::size_t position) {
        bcl::epoch_rest r;
        {
            py::gil_scoped_release unlocked;
            r = read([&](const auto& tokens_of, const auto& cost_of) {
                return m_pass.rest_after(position, tokens_of, cost_of, who);
            });
        }
        const std::span<const std::uint8_t> t = r.taken();
        return py::make_tuple(r.start(), r.span(),
                              py::bytes(reinterpret_cast<const char*>(t.data()), t.size()));
    }

    [[nodiscard]] py::dict stats() const {
        // Of the windows planned so far: a pass walked window by window knows no more, and its
        // micro-batch count only once walked to its end.
        const bcl::token_epoch_summary& s = m_pass.planned();
        py::dict d;
        d["windows_planned"] = s.windows;
        d["batches"] = m_pass.walked() ? py::object(py::int_(s.micro_steps)) : py::none();
        d["digest"] = digest();
        d["micro_steps_bound"] = s.micro_steps_bound;
        d["oversized"] = s.oversized;
        d["padded"] = s.repeated;
        d["padding_micro_batches"] = s.padding;
        d["planned_efficiency"] = s.efficiency(m_pass.shape().budget.ranks);
        return d;
    }

private:
    std::optional<std::span<const std::uint64_t>> next(std::size_t i) {
        py::gil_scoped_release unlocked;
        return read([&](const auto& tokens_of, const auto& cost_of) {
            return m_pass.micro_batch(i, tokens_of, cost_of, who);
        });
    }

    std::shared_ptr<const table_view> m_lengths;
    std::shared_ptr<const table_view> m_costs; // none: the default cost
    std::uint64_t m_inputs;                    // the digest of the tables and the settings
    bcl::keyed_token_pass<std::uint64_t> m_pass;
};

/// Binds token_windows and token_table into `m`.
inline void define_token_windows(py::module_& m) {
    m.def(
        "token_table",
        [](py::array lengths, const bcl::token_budget& budget, std::size_t micro_batches,
           std::size_t lookahead, bool oversized_alone, std::uint64_t pad_to_multiple_of,
           const std::string& who) {
            bcl::token_plan_options opt;
            opt.oversized_alone = oversized_alone;
            opt.pad_to_multiple_of = pad_to_multiple_of;
            return token_table(std::move(lengths), budget, micro_batches, lookahead, opt, who);
        },
        py::arg("lengths"), py::arg("budget"), py::arg("micro_batches"), py::arg("lookahead"),
        py::arg("oversized_alone"), py::arg("pad_to_multiple_of"), py::arg("who"),
        "The lengths read in place (a table_view of integers), each checked for a token plan in "
        "the pass that takes the digest; bcl.Error for settings or a length (named by its "
        "dataset index) that no token plan takes.");
    py::class_<token_windows>(m, "token_windows")
        .def(py::init([](std::shared_ptr<const table_view> lengths,
                         std::shared_ptr<const table_view> costs, std::uint64_t seed,
                         std::uint64_t epoch, bool shuffle, const bcl::token_budget& budget,
                         std::size_t micro_batches, std::size_t lookahead, std::size_t rank,
                         bool oversized_alone, const std::string& padding,
                         std::uint64_t pad_to_multiple_of, std::uint64_t inputs,
                         const py::object& rest) {
                 bcl::token_epoch_shape shape;
                 shape.budget = budget;
                 shape.micro_batches = micro_batches;
                 shape.lookahead = lookahead;
                 shape.options.oversized_alone = oversized_alone;
                 shape.options.allow_empty_micro_batches = padding == "empty";
                 shape.options.pad_to_multiple_of = pad_to_multiple_of;
                 shape.repeat_to_fill = padding == "repeat";
                 return token_windows(std::move(lengths), std::move(costs), seed, epoch, shuffle,
                                      shape, rank, inputs, rest);
             }),
             py::arg("lengths"), py::arg("costs"), py::arg("seed"), py::arg("epoch"),
             py::arg("shuffle"), py::arg("budget"), py::arg("micro_batches"), py::arg("lookahead"),
             py::arg("rank"), py::arg("oversized_alone"), py::arg("padding"),
             py::arg("pad_to_multiple_of"), py::arg("inputs"), py::arg("rest") = py::none())
        .def_property_readonly("batches", &token_windows::batches)
        .def_property_readonly("digest", &token_windows::digest)
        .def("batch", &token_windows::batch, py::arg("i"))
        .def("ends_at", &token_windows::ends_at, py::arg("i"))
        .def("point", &token_windows::point, py::arg("position"))
        .def("rest_after", &token_windows::rest_after, py::arg("position"))
        .def("stats", &token_windows::stats);
}

} // namespace bcl_python
