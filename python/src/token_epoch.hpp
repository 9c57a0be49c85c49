#pragma once
// Token-budget micro-batches for Python: bcl.plan_micro_batches (one held batch, or K of them,
// planned by bcl::token_planner::plan_held) and the token mode of
// bcl.DistributedBalancedBatchSampler (an epoch's order planned by bcl::token_epoch_planner, one
// rank's micro-batches handed out one at a time). The Python side has converted every input
// (lengths as integers, costs as numbers) and checked what only it can name (a group by its id,
// an argument of 0); the tables and the settings are checked here, by the library's own checks
// (check_token_input), in words that name the Python arguments.

#include "cost_table.hpp"

#include <bcl/token_budget.hpp>
#include <bcl/token_epoch_plan.hpp>
#include <bcl/token_plan.hpp>
#include <bcl/token_stage_plan.hpp>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bcl_python {

namespace py = pybind11;

using token_array = py::array_t<std::uint64_t, py::array::c_style | py::array::forcecast>;

/// The options of a token plan from the Python spelling.
[[nodiscard]] inline bcl::token_plan_options token_options(bool oversized_alone,
                                                           bool group_together,
                                                           bool allow_empty = false,
                                                           std::uint64_t pad_to_multiple_of = 1) {
    bcl::token_plan_options opt;
    opt.oversized_alone = oversized_alone;
    opt.group_together = group_together;
    opt.allow_empty_micro_batches = allow_empty;
    opt.pad_to_multiple_of = pad_to_multiple_of;
    return opt;
}

template <class T, int Flags>
[[nodiscard]] std::span<const T> span_of(const py::array_t<T, Flags>& a) {
    return {a.data(), static_cast<std::size_t>(a.size())};
}

template <class T, int Flags>
[[nodiscard]] std::span<const T> span_of(const std::optional<py::array_t<T, Flags>>& a) {
    return a ? span_of(*a) : std::span<const T>();
}

/// The values of `a`, or none.
template <class T, int Flags>
[[nodiscard]] std::optional<std::span<const T>>
optional_span(const std::optional<py::array_t<T, Flags>>& a) {
    return a ? std::optional<std::span<const T>>(span_of(*a)) : std::nullopt;
}

/// A micro-batch as a list of ints.
[[nodiscard]] inline py::list int_list(std::span<const std::int64_t> values) {
    py::list out(values.size());
    for (std::size_t k = 0; k < values.size(); ++k) out[k] = py::int_(values[k]);
    return out;
}

/// Checks a token plan's input before anything is planned, by the library's checks, in words
/// that name the Python arguments: the settings (bcl::check_token_budget; check_token_window
/// where `micro_batches` is given, a stream's window of M micro-batches a step; none for a held
/// plan, whose count the plan finds; check_token_options), costs of another length than the
/// lengths, each length (bcl::check_token_length, naming `what` and its index:
/// "record 7", "dataset index 7", and oversized='alone' where that would plan it) and each cost
/// (naming costs[i]). Throws bcl::error prefixed with `who`. O(n).
inline void check_token_input(std::span<const std::uint64_t> tokens,
                              std::optional<std::span<const double>> costs,
                              const bcl::token_budget& budget, std::size_t steps,
                              std::optional<std::size_t> micro_batches,
                              const bcl::token_plan_options& opt, std::string_view what,
                              std::string_view who) {
    bcl::check_token_budget(budget, steps, who);
    if (micro_batches) bcl::check_token_window(budget, *micro_batches, steps, who);
    bcl::check_token_options(opt, budget, who);
    const std::size_t n = tokens.size();
    if (costs && costs->size() != n)
        throw bcl::error(std::string(who) + ": costs has " + std::to_string(costs->size()) +
                         " entries but lengths has " + std::to_string(n) + "; give one per " +
                         std::string(what));
    try {
        for (std::size_t i = 0; i < n; ++i)
            (void)bcl::check_token_length(tokens[i], i, what, budget, opt, who);
    } catch (const bcl::error& e) {
        if (opt.oversized_alone) throw;
        throw bcl::error(std::string(e.what()) + " (oversized='alone')");
    }
    if (costs)
        for (std::size_t i = 0; i < n; ++i)
            if (!acceptable((*costs)[i])) [[unlikely]]
                check_estimate(std::string(who) + ": costs[" + std::to_string(i) + "]",
                               (*costs)[i]);
}

/// The figures of a token plan, costs in cost units.
[[nodiscard]] inline py::dict summary_dict(const bcl::token_plan_summary& s) {
    py::dict d;
    d["digest"] = s.digest;
    d["records"] = s.records;
    d["ranks"] = s.ranks;
    d["steps"] = s.steps;
    d["micro_batches"] = s.micro_batches;
    py::list per_step;
    for (std::size_t step = 0; step < s.steps; ++step) per_step.append(s.micro_batches_in(step));
    d["step_micro_batches"] = per_step;
    d["micro_steps"] = s.micro_steps;
    d["micro_steps_bound"] = s.micro_steps_bound;
    d["tokens"] = s.tokens;
    d["oversized"] = s.oversized;
    d["padding_micro_batches"] = s.padding;
    d["total"] = s.cost_of(s.total);
    d["objective"] = s.cost_of(s.objective);
    d["heaviest"] = s.cost_of(s.heaviest);
    d["lower_bound"] = s.cost_of(s.lower_bound);
    d["efficiency"] = s.efficiency();
    return d;
}

/// bcl.plan_micro_batches: (each rank's micro-batches, step after step, each in input
/// order; the plan's summary). The planning runs without the GIL.
[[nodiscard]] inline py::tuple
plan_micro_batches(const token_array& tokens, const std::optional<value_array>& costs,
                   const std::optional<token_array>& groups, const bcl::token_budget& budget,
                   std::size_t steps, bool oversized_alone, bool group_together, bool allow_empty,
                   std::uint64_t pad_to_multiple_of) {
    const std::span<const std::uint64_t> t = span_of(tokens);
    std::vector<bcl::micro_slot> slots(t.size());
    const bcl::token_plan_options opt =
        token_options(oversized_alone, group_together, allow_empty, pad_to_multiple_of);
    bcl::token_plan_summary s;
    {
        py::gil_scoped_release unlocked;
        constexpr std::string_view who = "bcl.plan_micro_batches";
        check_token_input(t, optional_span(costs), budget, steps, std::nullopt, opt, "record", who);
        bcl::token_planner planner;
        s = planner.plan_held(t, span_of(costs), span_of(groups), budget, steps, opt, slots, who);
    }
    const std::size_t cells = s.micro_steps;
    std::vector<std::vector<std::vector<std::int64_t>>> out(
        budget.ranks, std::vector<std::vector<std::int64_t>>(cells));
    for (std::size_t i = 0; i < t.size(); ++i)
        out[slots[i].rank][s.first_micro_step(slots[i].step) + slots[i].micro].push_back(
            static_cast<std::int64_t>(i));
    py::list plan;
    for (const auto& rank : out) plan.append(py::cast(rank));
    return py::make_tuple(plan, summary_dict(s));
}

/// bcl.plan_micro_batches over an (N, D) table of stage costs (bcl::token_stage_planner): as
/// plan_micro_batches, the summary with the stage figures.
[[nodiscard]] inline py::tuple
plan_stage_micro_batches(const token_array& tokens, const value_array& costs,
                         const std::optional<token_array>& groups, const bcl::token_budget& budget,
                         std::size_t steps, bool oversized_alone, bool group_together,
                         bool allow_empty, std::uint64_t pad_to_multiple_of) {
    if (costs.ndim() != 2)
        throw bcl::error("bcl.plan_micro_batches: stage costs must be a table of shape (N, D)");
    const std::span<const std::uint64_t> t = span_of(tokens);
    const auto d = static_cast<std::size_t>(costs.shape(1));
    std::vector<bcl::micro_slot> slots(t.size());
    const bcl::token_plan_options opt =
        token_options(oversized_alone, group_together, allow_empty, pad_to_multiple_of);
    bcl::token_stage_summary s;
    {
        py::gil_scoped_release unlocked;
        constexpr std::string_view who = "bcl.plan_micro_batches";
        // The lengths and settings; the stage costs are checked by the planner, naming record
        // and stage.
        check_token_input(t, std::nullopt, budget, steps, std::nullopt, opt, "record", who);
        bcl::token_stage_planner planner;
        s = planner.plan_held(
            t, std::span<const double>(costs.data(), static_cast<std::size_t>(costs.size())), d,
            span_of(groups), budget, steps, opt, slots, who);
    }
    std::vector<std::vector<std::vector<std::int64_t>>> out(
        budget.ranks, std::vector<std::vector<std::int64_t>>(s.plan.micro_steps));
    for (std::size_t i = 0; i < t.size(); ++i)
        out[slots[i].rank][s.plan.first_micro_step(slots[i].step) + slots[i].micro].push_back(
            static_cast<std::int64_t>(i));
    py::list plan;
    for (const auto& rank : out) plan.append(py::cast(rank));
    py::dict summary = summary_dict(s.plan);
    // The cost figures are the stages': the plan's own are those of the numbers it was made on.
    summary["stages"] = s.stages;
    summary["total"] = s.total;
    summary["objective"] = s.objective;
    summary["summed_objective"] = s.summed_objective;
    summary["lower_bound"] = s.lower_bound;
    summary["steps_restaged"] = s.steps_restaged;
    summary["steps_from_stage"] = s.steps_from_stage;
    summary["efficiency"] = s.efficiency();
    return py::make_tuple(plan, summary);
}

/// One epoch of the sampler's token mode for one rank: its share of the epoch's token plan
/// (bcl::token_epoch_planner), micro-batch by micro-batch. The same names as global_epoch
/// (batches, batch(i), digest, stats()), so the sampler's pass reads either.
class token_epoch {
public:
    /// Plans the epoch whose global order is `order` (a permutation of the dataset's indices)
    /// over `tokens` (and `costs`, or none for the default cost), by dataset index. The sampler
    /// checked the tables and the shape when it was built (check_token_input), so that the one
    /// way left for the plan to fail is the epoch's tail (below), or a table edited since.
    token_epoch(const token_array& tokens, const std::optional<value_array>& costs,
                const index_array& order, const bcl::token_budget& budget,
                std::size_t micro_batches, std::size_t lookahead, std::size_t rank,
                bool oversized_alone, const std::string& padding, std::uint64_t pad_to_multiple_of)
        : m_ranks(budget.ranks) {
        const std::span<const std::uint64_t> t = span_of(tokens);
        const std::span<const double> c = span_of(costs);
        const std::span<const std::int64_t> o = span_of(order);
        bcl::token_plan_options opt = token_options(oversized_alone, false);
        opt.allow_empty_micro_batches = padding == "empty";
        opt.pad_to_multiple_of = pad_to_multiple_of;
        const bool repeat = padding == "repeat";
        py::gil_scoped_release unlocked;
        bcl::token_epoch_planner planner;
        // An epoch that no plan fills (a short tail joins the window before it, but e.g. an odd
        // count of records of T tokens each on two ranks cannot give both ranks as many
        // micro-batches) ends as `padding` says: "repeat" plans the order's first records again
        // at its end (the fewest that plan, as DistributedSampler pads its order), "empty" gives
        // the ranks short of records empty micro-batches, "error" refuses it.
        planner.share<std::int64_t>(t, c, o, budget, micro_batches, lookahead, rank, opt, m_share,
                                    who, repeat);
        m_padded = m_share.repeated;
    }

    /// This rank's micro-batches in the epoch (as many on every rank).
    [[nodiscard]] std::size_t batches() const noexcept { return m_share.micro_batches(); }
    /// Micro-batch `i` of this rank, as a list of ints.
    [[nodiscard]] py::list batch(std::size_t i) const {
        if (i >= batches())
            throw bcl::error("bcl.DistributedBalancedBatchSampler: micro-batch " +
                             std::to_string(i) + " of an epoch of " + std::to_string(batches()));
        return int_list(m_share.micro_batch(i));
    }
    /// The chain of the windows' plan digests: equal on every rank that planned the same epoch.
    [[nodiscard]] std::uint64_t digest() const noexcept { return m_share.digest; }
    [[nodiscard]] py::dict stats() const {
        py::dict d;
        d["windows"] = m_share.windows;
        d["batches"] = batches();
        d["steps"] = m_share.steps.size() - 1;
        d["digest"] = m_share.digest;
        d["micro_steps_bound"] = m_share.micro_steps_bound;
        d["oversized"] = m_share.oversized;
        d["padded"] = m_padded;
        d["padding_micro_batches"] = m_share.padding;
        // What the plans promise: the mean rank's micro-step time over the slowest rank's.
        d["planned_efficiency"] = m_share.efficiency(m_ranks);
        return d;
    }

private:
    static constexpr const char* who = "bcl.DistributedBalancedBatchSampler";

    bcl::token_epoch_share<std::int64_t> m_share;
    std::size_t m_ranks;
    std::size_t m_padded = 0; // records of the order's start planned again at its end
};

/// Binds the token plans into `m`.
inline void define_token_plans(py::module_& m) {
    py::class_<bcl::token_budget>(m, "token_budget")
        .def(py::init([](std::size_t ranks, std::uint64_t max_tokens, std::size_t multiple_of) {
                 return bcl::token_budget{
                     .ranks = ranks, .max_tokens = max_tokens, .multiple_of = multiple_of};
             }),
             py::arg("ranks"), py::arg("max_tokens"), py::arg("multiple_of"));
    m.def(
        "check_token_input",
        [](const token_array& tokens, const std::optional<value_array>& costs,
           const bcl::token_budget& budget, std::size_t steps,
           std::optional<std::size_t> micro_batches, bool oversized_alone,
           std::uint64_t pad_to_multiple_of, const std::string& what, const std::string& who) {
            check_token_input(span_of(tokens), optional_span(costs), budget, steps, micro_batches,
                              token_options(oversized_alone, false, false, pad_to_multiple_of),
                              what, who);
        },
        py::arg("tokens"), py::arg("costs"), py::arg("budget"), py::arg("steps"),
        py::arg("micro_batches"), py::arg("oversized_alone"), py::arg("pad_to_multiple_of"),
        py::arg("what"), py::arg("who"),
        "bcl.Error for token-plan input no plan takes (check_token_input): the settings, costs "
        "of another length, a length above max_tokens (naming `what` and its index), a bad "
        "cost (naming costs[i]).");
    m.def("plan_stage_micro_batches", &plan_stage_micro_batches, py::arg("tokens"),
          py::arg("costs"), py::arg("groups"), py::arg("budget"), py::arg("steps"),
          py::arg("oversized_alone"), py::arg("group_together"), py::arg("allow_empty"),
          py::arg("pad_to_multiple_of"),
          "bcl.plan_micro_batches with an (N, D) table of stage costs: (each rank's "
          "micro-batches, the summary) (bcl::token_stage_planner::plan_held).");
    m.def("plan_micro_batches", &plan_micro_batches, py::arg("tokens"), py::arg("costs"),
          py::arg("groups"), py::arg("budget"), py::arg("steps"), py::arg("oversized_alone"),
          py::arg("group_together"), py::arg("allow_empty"), py::arg("pad_to_multiple_of"),
          "bcl.plan_micro_batches: (each rank's micro-batches, the summary) "
          "(bcl::token_planner::plan_held).");
    py::class_<token_epoch>(m, "token_epoch")
        .def(py::init<const token_array&, const std::optional<value_array>&, const index_array&,
                      const bcl::token_budget&, std::size_t, std::size_t, std::size_t, bool,
                      const std::string&, std::uint64_t>(),
             py::arg("tokens"), py::arg("costs"), py::arg("order"), py::arg("budget"),
             py::arg("micro_batches"), py::arg("lookahead"), py::arg("rank"),
             py::arg("oversized_alone"), py::arg("padding"), py::arg("pad_to_multiple_of"))
        .def_property_readonly("batches", &token_epoch::batches)
        .def_property_readonly("digest", &token_epoch::digest)
        .def("batch", &token_epoch::batch, py::arg("i"))
        .def("stats", &token_epoch::stats);
}

} // namespace bcl_python
