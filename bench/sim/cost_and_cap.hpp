#pragma once
// The cost model, the outlier cap (--cap, --cap-action), truncation, and stream_cap.

#include "batching.hpp"
#include "input.hpp"
#include "metrics.hpp"
#include "workload.hpp"

#include <bcl/cost_check.hpp>
#include <bcl/detail/intake/outlier_cap.hpp>
#include <bcl/error.hpp>
#include <bcl/estimators.hpp>
#include <bcl/options.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace bcl_sim {

// ---------------------------------------------------------------------------------------------
// The cost model: `affine:a=..,b=..,c=..` is a + b*L + c*L^2, through bcl's own estimator.
// ---------------------------------------------------------------------------------------------

using cost_model = bcl::affine_quadratic_cost<>;

/// The default: L + L^2/24576, a FLOPs proxy for a 7B transformer (linear layers plus attention).
[[nodiscard]] inline cost_model default_cost() noexcept {
    return {0.0, 1.0, 1.0 / 24576.0, {}};
}

/// Parses a --cost value `affine[:a=..,b=..,c=..]`; missing coefficients keep the default's.
/// Coefficients must be >= 0 so that cost grows with length (length-sorting baselines rely on it).
/// Errors name `flag` (--cost, --true-cost, ...).
[[nodiscard]] inline cost_model parse_cost(std::string_view text,
                                           std::string_view flag = "--cost") {
    const std::size_t colon = text.find(':');
    const std::string_view name = text.substr(0, colon);
    const std::string what = fmt::format("{} {}", flag, text);
    if (name != "affine")
        throw input_error(fmt::format(
            "{}: unknown cost model '{}' (expected affine:a=..,b=..,c=..)", what, name));
    cost_model m = default_cost();
    const std::array ps{detail::param{"a", &m.a}, detail::param{"b", &m.b},
                        detail::param{"c", &m.c}};
    detail::parse_params(
        what, colon == std::string_view::npos ? std::string_view{} : text.substr(colon + 1), ps);
    detail::require(m.a >= 0 && m.b >= 0 && m.c >= 0, what, "a, b and c must be >= 0");
    return m;
}

[[nodiscard]] inline std::string describe(const cost_model& m) {
    return fmt::format("affine:a={},b={},c={}", m.a, m.b, m.c);
}

/// Throws input_error for rank `rank`'s index-th record, `length` tokens long, whose cost under
/// the cost model bcl refuses: the library's own message (bcl::throw_invalid_cost), as the
/// simulator's bad input. Out of line: record_cost's common path is one comparison.
[[noreturn]] inline void refuse_record_cost(double cost, double length, std::size_t rank,
                                            std::uint64_t index) {
    try {
        bcl::throw_invalid_cost(
            fmt::format("record {} of rank {} has length {} and cost ", index, rank, length), cost);
    } catch (const bcl::error& e) {
        throw input_error(e.what());
    }
}

/// The cost under `m` of rank `rank`'s index-th record, `length` tokens long. Throws input_error,
/// naming the record, if the cost is not one bcl accepts (bcl::valid_cost, the library's one rule:
/// finite, >= 0 and at most bcl::max_estimate; a length too large for the model), so that the
/// simulator plans only what the library would.
[[nodiscard]] inline double record_cost(const cost_model& m, double length, std::size_t rank,
                                        std::uint64_t index) {
    const double cost = m(length);
    if (!bcl::valid_cost(cost)) [[unlikely]]
        refuse_record_cost(cost, length, rank, index);
    return cost;
}

// ---------------------------------------------------------------------------------------------
// The outlier cap: `--cap none|p<q>|<tokens>` and what truncating a record to it means.
// ---------------------------------------------------------------------------------------------

/// The cap as given on the command line. A fixed cap is a length in tokens (the unit of the
/// workload files); bcl's own cap is in cost units, so it becomes cost(tokens) (see bcl_cap()).
/// Cost grows with length (a, b, c >= 0), so capping a record's cost at cost(T) and capping its
/// length at T are the same thing.
struct cap_spec {
    bcl::cap_kind kind = bcl::cap_kind::none;
    double tokens = 0.0;    ///< kind == fixed: the cap as a length, > 0
    double quantile = 0.99; ///< kind == quantile: q in (0, 1); `p99.5` is 0.995
};

/// Parses a --cap value: `none`, `p<percent>` (p99, p99.5, p90: the streaming quantile of each
/// rank's costs) or a plain number (a fixed cap in tokens). Throws input_error otherwise.
[[nodiscard]] inline cap_spec parse_cap(std::string_view text) {
    const std::string_view t = detail::trim(text);
    if (t == "none") return {};
    const auto bad = [&](std::string_view why) {
        return input_error(fmt::format("--cap {}: {} (expected none, p<percent> such as p99 or "
                                       "p99.5, or a length in tokens such as 32768)",
                                       text, why));
    };
    if (!t.empty() && (t.front() == 'p' || t.front() == 'P')) {
        const std::optional<double> percent = detail::parse_number(t.substr(1));
        if (!percent) throw bad("the percentile is not a number");
        if (!(*percent > 0.0 && *percent < 100.0))
            throw bad("the percentile must be above 0 and below 100");
        return {bcl::cap_kind::quantile, 0.0, *percent / 100.0};
    }
    const std::optional<double> tokens = detail::parse_number(t);
    if (!tokens) throw bad("not a cap");
    if (!(*tokens > 0.0)) throw bad("a fixed cap must be a length > 0");
    return {bcl::cap_kind::fixed, *tokens, 0.99};
}

/// `none`, `p99.5` or the fixed length, as parse_cap reads it back.
[[nodiscard]] inline std::string describe(const cap_spec& c) {
    switch (c.kind) {
    case bcl::cap_kind::fixed:
        return fmt::format("{}", c.tokens);
    case bcl::cap_kind::quantile:
        return fmt::format("p{}", c.quantile * 100.0);
    default:
        return "none";
    }
}

[[nodiscard]] inline std::string_view describe(bcl::cap_action a) noexcept {
    return a == bcl::cap_action::truncate ? "truncate" : "clip";
}

/// Parses a --cap-action value: `clip` or `truncate`.
[[nodiscard]] inline bcl::cap_action parse_cap_action(std::string_view text) {
    return parse_choice<bcl::cap_action>("--cap-action", text);
}

/// The bcl cap for a --cap and --cap-action under a cost model: a fixed cap of T tokens is the
/// cost cap cost(T); a quantile keeps bcl's default warm-up, ceil(10 / (1 - q)) records. Throws
/// input_error if a fixed cap costs nothing (bcl needs a cap > 0).
[[nodiscard]] inline bcl::cap_options bcl_cap(const cap_spec& spec, bcl::cap_action action,
                                              const cost_model& cost) {
    bcl::cap_options cap;
    cap.kind = spec.kind;
    cap.action = action;
    if (spec.kind == bcl::cap_kind::fixed) {
        cap.value = cost(spec.tokens);
        if (!(cap.value > 0.0) || !std::isfinite(cap.value))
            throw input_error(fmt::format("--cap {}: the cost of {} tokens is {}; a fixed cap "
                                          "must cost more than 0",
                                          describe(spec), spec.tokens, cap.value));
    } else if (spec.kind == bcl::cap_kind::quantile) {
        cap.quantile = spec.quantile;
    }
    return cap;
}

/// --cap-prior: the cap a quantile cap uses until its warm-up ends (without one, nothing is capped
/// before then). `exact` is the exact quantile (the cap's q) of the workload's costs: of the file,
/// or of the fixed pilot sample of a synthetic distribution. A number is a length in tokens,
/// priced like a fixed --cap (cost(tokens)).
struct cap_prior_spec {
    enum class kind { none, exact, tokens };
    kind what = kind::none;
    double tokens = 0.0; ///< what == tokens: the prior as a length, > 0
};

/// Parses a --cap-prior value: `none`, `exact` or a length in tokens (e.g. 8192). Throws
/// input_error otherwise.
[[nodiscard]] inline cap_prior_spec parse_cap_prior(std::string_view text) {
    const std::string_view t = detail::trim(text);
    if (t == "none") return {};
    if (t == "exact") return {cap_prior_spec::kind::exact, 0.0};
    const std::optional<double> tokens = detail::parse_number(t);
    if (!tokens || !(*tokens > 0.0))
        throw input_error(fmt::format("--cap-prior {}: {} (expected none, exact, or a length in "
                                      "tokens > 0 such as 8192)",
                                      text,
                                      tokens ? "a prior must be a length > 0" : "not a prior"));
    return {cap_prior_spec::kind::tokens, *tokens};
}

/// `none`, `exact` or the length, as parse_cap_prior reads it back.
[[nodiscard]] inline std::string describe(const cap_prior_spec& p) {
    switch (p.what) {
    case cap_prior_spec::kind::exact:
        return "exact";
    case cap_prior_spec::kind::tokens:
        return fmt::format("{}", p.tokens);
    default:
        return "none";
    }
}

/// A --cap-prior resolved: the length it stands for and its cost, the cap in force during the
/// quantile cap's warm-up.
struct cap_prior {
    double tokens = 0.0;
    double cost = 0.0;
};

/// Resolves `prior` for the quantile cap `cap` under `cost`. `lengths` is the workload (the file,
/// or the pilot sample of a synthetic distribution); `exact` takes its nearest-rank q-quantile
/// length, whose cost is the q-quantile of the costs since cost grows with length. Returns nothing
/// for `none`. Throws input_error for a prior without a quantile cap, an `exact` prior without
/// lengths to read it from, or a prior that costs nothing.
[[nodiscard]] inline std::optional<cap_prior>
resolve_cap_prior(const cap_prior_spec& prior, const cap_spec& cap, const cost_model& cost,
                  const std::vector<double>* lengths) {
    if (prior.what == cap_prior_spec::kind::none) return std::nullopt;
    if (cap.kind != bcl::cap_kind::quantile)
        throw input_error(fmt::format("--cap-prior {}: a prior needs a quantile --cap such as p99 "
                                      "(it is the cap until the quantile's warm-up ends)",
                                      describe(prior)));
    cap_prior out;
    if (prior.what == cap_prior_spec::kind::exact) {
        if (lengths == nullptr || lengths->empty())
            throw input_error("--cap-prior exact: no workload lengths to take the quantile of");
        out.tokens = nearest_rank(*lengths, cap.quantile);
    } else {
        out.tokens = prior.tokens;
    }
    out.cost = cost(out.tokens);
    if (!(out.cost > 0.0) || !std::isfinite(out.cost))
        throw input_error(fmt::format("--cap-prior {}: the cost of {} tokens is {}; a prior must "
                                      "cost more than 0",
                                      describe(prior), out.tokens, out.cost));
    return out;
}

/// The length a record of `length` tokens is truncated to under the cost cap `cap`: the largest
/// whole number of tokens whose cost a + b*L + c*L^2 is at most the cap, and never more than the
/// record had. It starts from the positive root of a + b*L + c*L^2 = cap, computed as
/// 2(cap - a) / (b + sqrt(b^2 + 4c(cap - a))), which is (cap - a) / b when c == 0 and does not
/// cancel when c is tiny, then rounds down to whole tokens (checking the neighbours, so a
/// rounding error in the root never leaves the cost above the cap). Returns 0 when even an empty
/// record costs more than the cap (a > cap), and `length` unchanged when the cost does not grow
/// with length (b == c == 0) or the record is within the cap already.
[[nodiscard]] inline double truncated_length(const cost_model& m, double length, double cap) {
    if (m(length) <= cap) return length;
    if (m.b == 0.0 && m.c == 0.0) return length;
    if (m.a > cap) return 0.0;
    const double room = cap - m.a;
    const double root = 2.0 * room / (m.b + std::sqrt(m.b * m.b + 4.0 * m.c * room));
    double whole = std::floor(root);
    while (whole > 0.0 && m(whole) > cap) whole -= 1.0;
    while (whole + 1.0 < length && m(whole + 1.0) <= cap) whole += 1.0;
    return std::min(whole, length);
}

/// The mean cost bcl's estimates have on the workload `lengths` (not empty) under --cap and
/// --cap-action: each record's cost clipped at the cap, or the cost of its truncated length. The
/// cap is a fixed cap's cost, or for a quantile cap the cost of the workload's exact quantile,
/// where each rank's streaming estimate settles. Without a cap, the plain mean cost. This is the
/// level bcl::options::mean_cost stands for: the running mean it replaces averages capped costs.
[[nodiscard]] inline double capped_mean_cost(const std::vector<double>& lengths,
                                             const cost_model& cost, const cap_spec& cap,
                                             bcl::cap_action action) {
    double cap_cost = HUGE_VAL;
    if (cap.kind == bcl::cap_kind::fixed) cap_cost = cost(cap.tokens);
    if (cap.kind == bcl::cap_kind::quantile) cap_cost = cost(nearest_rank(lengths, cap.quantile));
    double total = 0.0;
    for (const double length : lengths)
        total += action == bcl::cap_action::truncate
                     ? cost(truncated_length(cost, length, cap_cost))
                     : std::min(cost(length), cap_cost);
    return total / static_cast<double>(lengths.size());
}

/// The truncating cap applied to the baselines' records, so that every policy runs on the same
/// truncated workload. Each rank's stream is capped by the rule its bcl::balancer applies, the
/// library's own bcl::detail::outlier_cap (a fixed cost cap; or a quantile of the rank's uncapped
/// costs after the warm-up, the --cap-prior during it), taking records in the rank's arrival
/// order (index 0, 1, ...). A record whose cost is above the cap is truncated with
/// truncated_length(). So a bcl policy and a baseline truncate the same records to the same
/// lengths, which tests/cap.test.cpp checks.
///
/// Every baseline reads each rank's stream in increasing index order, each index once; a read
/// that jumps ahead processes the records in between (the cap needs them), a read of an
/// earlier index than the last one is a logic error.
class stream_cap {
public:
    struct record {
        double length = 0.0; ///< after truncation
        bool capped = false; ///< the record's cost was above the cap (so it was truncated)
    };

    /// `cap` must be a truncating cap of kind fixed or quantile, in cost units (see bcl_cap()).
    /// `prior` (cost units) is the cap of a quantile cap's warm-up; none leaves it uncapped.
    stream_cap(record_source* source, cost_model cost, bcl::cap_options cap, std::size_t ranks,
               std::optional<double> prior = std::nullopt)
        : m_source(source), m_cost(cost),
          m_state(ranks, rank_state{bcl::detail::outlier_cap(with_prior(cap, prior)), 0, {}}) {}

    /// Rank `rank`'s index-th record, capped.
    [[nodiscard]] record read(std::size_t rank, std::uint64_t index) {
        rank_state& st = m_state[rank];
        if (index + 1 < st.next)
            throw std::logic_error(fmt::format("stream_cap: rank {} read record {} after record {}",
                                               rank, index, st.next - 1));
        while (st.next <= index) st.last = advance(rank, st);
        return st.last;
    }

private:
    struct rank_state {
        bcl::detail::outlier_cap cap; // the rank's balancer's own rule
        std::uint64_t next = 0;       // next index to process
        record last;                  // the record at index next - 1 (once next > 0)
    };

    static bcl::cap_options with_prior(bcl::cap_options cap, std::optional<double> prior) {
        cap.prior = prior.value_or(0.0);
        return cap;
    }

    record advance(std::size_t rank, rank_state& st) {
        const std::uint64_t index = st.next++;
        const double length = m_source->length(rank, index);
        const double cost = record_cost(m_cost, length, rank, index);
        const double cap = st.cap.current();
        st.cap.add(cost, cap); // the uncapped cost, as the balancer's cap sees it
        if (cost <= cap) return {length, false};
        return {truncated_length(m_cost, length, cap), true};
    }

    record_source* m_source;
    cost_model m_cost;
    std::vector<rank_state> m_state;
};

} // namespace bcl_sim
