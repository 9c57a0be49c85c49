// bcl-fuzz-stage_plan: plans of stage costs. The input picks D (1 to 4), the shape (R, B, K),
// which planner (a held batch, a window of the global plan, or token-budget micro-batches) and
// each record's D costs (pick_value: small integers with ties, fractions, edges, values near
// bcl::max_estimate, any bit pattern) and tokens. Checked:
//   - an invalid cost is a bcl::error naming its record and stage, and the plan's slots are left
//     as they were; otherwise the plan is made;
//   - the contract: held batches and windows B records a rank a micro-step (the last the rest,
//     the same on every rank), token plans every cell of every micro-step a record and at most
//     T tokens (but a record alone above T), every record once;
//   - the objective is never above the summed plan's and never below the bound, and is the one
//     recomputed from the slots (within rounding);
//   - with D = 1 the plan is the one-cost planner's, slot for slot;
//   - the same input planned again gives the same plan.

#include "fuzz_support.hpp"

#include <bcl/error.hpp>
#include <bcl/global_plan.hpp>
#include <bcl/held_batch.hpp>
#include <bcl/stage_plan.hpp>
#include <bcl/token_plan.hpp>
#include <bcl/token_stage_plan.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <vector>

namespace {

using namespace bcl_fuzz;

bool valid_table(const std::vector<double>& costs) {
    return std::all_of(costs.begin(), costs.end(), [](double c) { return bcl::valid_cost(c); });
}

// The sum over micro-steps (keys) and stages of the largest rank load, from the slots.
template <class Key>
double objective_of(const std::vector<double>& costs, std::size_t d,
                    const std::vector<Key>& step_of, const std::vector<std::uint32_t>& rank_of) {
    std::map<std::pair<Key, std::uint32_t>, std::vector<double>> load;
    for (std::size_t i = 0; i < step_of.size(); ++i) {
        auto& l = load[{step_of[i], rank_of[i]}];
        l.resize(d, 0.0);
        for (std::size_t s = 0; s < d; ++s) l[s] += costs[i * d + s];
    }
    std::map<Key, std::vector<double>> top;
    for (const auto& [key, l] : load) {
        auto& t = top[key.first];
        t.resize(d, 0.0);
        for (std::size_t s = 0; s < d; ++s) t[s] = std::max(t[s], l[s]);
    }
    double sum = 0.0;
    for (const auto& [key, t] : top)
        for (const double x : t) sum += x;
    return sum;
}

void check_figures(double objective, double recomputed, double summed, double bound) {
    const auto close = [](double a, double b) {
        return std::fabs(a - b) <= 1e-6 * std::max({1.0, std::fabs(a), std::fabs(b)}) ||
               !std::isfinite(b);
    };
    check(close(objective, recomputed), [&] {
        return "the objective " + text(objective) + " is not the plan's " + text(recomputed);
    });
    check(objective <= summed * (1 + 1e-9) || !std::isfinite(summed), [&] {
        return "the objective " + text(objective) + " is above the summed plan's " + text(summed);
    });
    check(bound <= objective * (1 + 1e-9), [&] {
        return "the bound " + text(bound) + " is above the objective " + text(objective);
    });
}

void fixed_batches(byte_source& in, const std::vector<double>& costs, std::size_t d, std::size_t n,
                   std::size_t ranks, std::size_t batch, std::size_t steps, bool held) {
    std::vector<bcl::plan_slot> out(n, bcl::plan_slot{99, 99});
    const std::vector<bcl::plan_slot> untouched = out;
    bcl::stage_plan_summary s;
    bcl::held_stage_planner held_planner;
    bcl::stage_window_planner window_planner;
    const bcl::plan_shape shape{ranks, steps, batch};
    const auto plan = [&](std::vector<bcl::plan_slot>& slots) {
        return held ? held_planner.plan(costs, d, ranks, batch, {}, slots)
                    : window_planner.plan(costs, d, shape, {}, slots);
    };
    try {
        s = plan(out);
    } catch (const bcl::error& e) {
        const std::string what = e.what();
        require(out == untouched, "a refused plan leaves the slots as they were");
        require(!valid_table(costs) ? what.find("'s cost of stage ") != std::string::npos
                                    : what.find("records in one plan window") != std::string::npos,
                "only a bad cost (named by record and stage) or an oversized plan is refused: " +
                    what);
        return;
    }
    require(valid_table(costs), "an invalid cost was planned");
    (void)in;
    const std::size_t m = n / ranks;
    std::map<std::pair<std::uint32_t, std::uint32_t>, std::size_t> cells;
    std::vector<std::uint32_t> step_of(n), rank_of(n);
    for (std::size_t i = 0; i < n; ++i) {
        require(out[i].rank < ranks && out[i].step < s.micro_steps, "a slot out of the plan");
        ++cells[{out[i].step, out[i].rank}];
        step_of[i] = out[i].step;
        rank_of[i] = out[i].rank;
    }
    for (const auto& [cell, count] : cells)
        check(count == (cell.first + 1 < s.micro_steps ? batch : m - batch * (s.micro_steps - 1)),
              [&] {
                  return "micro-step " + std::to_string(cell.first) + " of a rank holds " +
                         std::to_string(count) + " records";
              });
    check_figures(s.objective, objective_of(costs, d, step_of, rank_of), s.summed_objective,
                  s.lower_bound);
    std::vector<bcl::plan_slot> again(n);
    (void)plan(again);
    require(again == out, "the same input planned again gives the same plan");
    if (d == 1) {
        std::vector<bcl::plan_slot> flat(n);
        if (held)
            (void)bcl::held_batch_planner{}.plan(costs, ranks, batch, {}, flat);
        else
            (void)bcl::global_planner{}.plan(costs, shape, {}, flat);
        require(flat == out, "one stage plans as one cost a record");
    }
}

void token_budget(byte_source& in, const std::vector<double>& costs, std::size_t d, std::size_t n,
                  std::size_t ranks, std::size_t steps) {
    const std::uint64_t t = 8 + in.u16() % 400;
    std::vector<std::uint64_t> tokens(n);
    for (std::uint64_t& x : tokens) {
        const std::uint8_t kind = in.byte();
        x = kind < 240 ? kind % (t / 3 + 1) : t + kind; // a few above T, alone
    }
    bcl::token_plan_options opt;
    opt.oversized_alone = true;
    opt.allow_empty_micro_batches = (in.byte() & 1U) != 0;
    const bcl::token_budget budget{.ranks = ranks, .max_tokens = t};
    std::vector<bcl::micro_slot> out(n, bcl::micro_slot{99, 99, 99});
    const std::vector<bcl::micro_slot> untouched = out;
    bcl::token_stage_planner planner;
    bcl::token_stage_summary s;
    try {
        s = planner.plan_held(tokens, costs, d, {}, budget, steps, opt, out);
    } catch (const bcl::error& e) {
        const std::string what = e.what();
        require(out == untouched, "a refused token plan leaves the slots as they were");
        require(!valid_table(costs) || what.find("do not fill") != std::string::npos,
                "only a bad cost or records too few are refused: " + what);
        return;
    }
    require(valid_table(costs), "an invalid cost was planned");
    std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>, std::uint64_t> cells;
    std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>, std::size_t> counts;
    std::vector<std::size_t> step_of(n);
    std::vector<std::uint32_t> rank_of(n);
    for (std::size_t i = 0; i < n; ++i) {
        require(out[i].rank < ranks && out[i].micro < s.plan.micro_batches_in(out[i].step),
                "a token slot out of the plan");
        cells[{out[i].step, out[i].micro, out[i].rank}] += tokens[i];
        ++counts[{out[i].step, out[i].micro, out[i].rank}];
        step_of[i] = s.plan.first_micro_step(out[i].step) + out[i].micro;
        rank_of[i] = out[i].rank;
    }
    for (const auto& [cell, sum] : cells)
        require(sum <= t || counts[cell] == 1, "a micro-batch above T holds more than one record");
    if (!opt.allow_empty_micro_batches)
        require(cells.size() == s.plan.micro_steps * ranks, "a micro-batch is empty");
    check_figures(s.objective, objective_of(costs, d, step_of, rank_of), s.summed_objective,
                  s.lower_bound);
    std::vector<bcl::micro_slot> again(n);
    (void)planner.plan_held(tokens, costs, d, {}, budget, steps, opt, again);
    require(again == out, "the same token input planned again gives the same plan");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    byte_source in(std::span<const std::uint8_t>(data, size));
    const std::size_t d = 1 + in.byte() % 4;
    const std::size_t ranks = 1 + in.byte() % 6;
    const std::size_t batch = 1 + in.byte() % 6;
    const std::size_t steps = 1 + in.byte() % 4;
    const std::uint8_t planner = in.byte() % 3;
    const std::size_t n = ranks * (1 + in.byte() % (steps * batch));
    std::vector<double> costs(n * d);
    for (double& c : costs) c = pick_value(in);
    note([&] {
        return "D " + std::to_string(d) + ", R " + std::to_string(ranks) + ", B " +
               std::to_string(batch) + ", K " + std::to_string(steps) + ", n " + std::to_string(n) +
               ", planner " + std::to_string(planner);
    });
    if (planner == 2)
        token_budget(in, costs, d, n, ranks, std::min<std::size_t>(steps, 2));
    else
        fixed_batches(in, costs, d, n, ranks, batch, steps, planner == 0);
    return 0;
}
