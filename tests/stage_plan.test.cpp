// bcl::held_stage_planner and bcl::stage_window_planner (stage_plan.hpp), as a specification: a
// held batch (or a window) of records with D stage costs takes the micro-steps of the plan of the
// summed costs or of one stage's alone (every rank m = n / R records, B a micro-step but the last,
// every record once), each micro-step's records then shared among the ranks by stage; the sum over
// micro-steps and stages of the slowest rank never rises above the summed plan's and never falls
// below the bound; with D = 1 the plan is bcl::held_batch_planner's, unchanged; on a vision-
// language mix it gains what one-number plans leave (at R = 8, and R = 64 for windows); bad input
// is an error naming the record and the stage, and changes nothing.

#include "support/distributions.hpp"

#include <bcl/detail/stages/step_stages.hpp>
#include <bcl/error.hpp>
#include <bcl/global_plan.hpp>
#include <bcl/held_batch.hpp>
#include <bcl/stage_plan.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace {

using Catch::Matchers::Contains;

// n records of d stages, each stage's costs from one of the test distributions (adversarial ones
// among them: all equal, zeros, one giant outlier, huge finite values, sorted).
std::vector<double> stage_costs(std::size_t n, std::size_t d, std::uint64_t seed) {
    std::vector<double> out(n * d);
    for (std::size_t s = 0; s < d; ++s) {
        const std::vector<double> column = bcl_test::costs_of_seed(n, seed * 5 + s);
        for (std::size_t i = 0; i < n; ++i) out[i * d + s] = column[i];
    }
    return out;
}

// A vision-language mix: 30% text only, 55% one image, 15% several; the encoder's cost in its
// patches, the language model's in the text and the image tokens.
std::vector<double> vision_language(std::size_t n, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::lognormal_distribution<double> text(6.0, 0.9), one(std::log(1000.0), 0.8),
        many(std::log(4000.0), 0.9);
    std::uniform_real_distribution<double> kind(0.0, 1.0);
    std::vector<double> out(2 * n);
    for (std::size_t i = 0; i < n; ++i) {
        const double u = kind(rng);
        const double p = u < 0.3 ? 0.0 : u < 0.85 ? one(rng) : many(rng);
        const double t = text(rng) + p / 4.0;
        out[2 * i] = 0.09 * (p + p * p / 8192.0);
        out[2 * i + 1] = t + t * t / 24576.0;
    }
    return out;
}

// What the planner plans a record's micro-steps on: its summed cost (stage -1) or its cost of one
// stage, in the stage table's fixed point (its integers, one unit for every stage); with one
// stage the costs themselves.
std::vector<double> column(const std::vector<double>& costs, std::size_t d, int stage) {
    if (d == 1) return costs;
    bcl::detail::stages::stage_table t;
    t.assign(costs, d);
    std::vector<double> out(costs.size() / d, 0.0);
    for (std::size_t i = 0; i < out.size(); ++i)
        out[i] =
            static_cast<double>(stage < 0 ? t.sum(i) : t.of(i)[static_cast<std::size_t>(stage)]);
    return out;
}

double stage_objective(const std::vector<double>& costs, std::size_t d,
                       const std::vector<bcl::plan_slot>& slots, std::size_t ranks,
                       std::size_t steps) {
    double sum = 0.0;
    for (std::size_t step = 0; step < steps; ++step)
        for (std::size_t s = 0; s < d; ++s) {
            std::vector<double> load(ranks, 0.0);
            for (std::size_t i = 0; i < slots.size(); ++i)
                if (slots[i].step == step) load[slots[i].rank] += costs[i * d + s];
            sum += *std::max_element(load.begin(), load.end());
        }
    return sum;
}

} // namespace

TEST_CASE("stage plan: the summed plan's micro-steps, B records a rank each but the last, every "
          "record once, the objective between the bound and the summed plan's, the same plan "
          "twice",
          "[stage_plan]") {
    bcl::held_stage_planner planner;
    for (std::uint64_t seed = 1; seed <= 30; ++seed)
        for (const std::size_t d : {std::size_t{2}, std::size_t{3}, std::size_t{4}}) {
            const std::size_t ranks = 1 + seed % 6;
            const std::size_t batch = 1 + seed % 5;
            const std::size_t n = ranks * (1 + seed * 3 % 23);
            const std::vector<double> costs = stage_costs(n, d, seed);
            CAPTURE(seed, d, ranks, batch, n);
            std::vector<bcl::plan_slot> slots(n);
            const bcl::stage_plan_summary s = planner.plan(costs, d, ranks, batch, {}, slots);
            // The summed plan, and the plan whose micro-steps were kept: the summed cost's or
            // one stage's alone.
            bcl::held_batch_planner held;
            std::vector<bcl::plan_slot> flat(n), steps_of(n);
            (void)held.plan(column(costs, d, -1), ranks, batch, {}, flat);
            (void)held.plan(column(costs, d, s.steps_from_stage), ranks, batch, {}, steps_of);
            const std::size_t m = n / ranks;
            REQUIRE(s.micro_steps == (m + batch - 1) / batch);
            std::vector<std::vector<std::size_t>> cells(s.micro_steps,
                                                        std::vector<std::size_t>(ranks, 0));
            for (std::size_t i = 0; i < n; ++i) {
                REQUIRE(slots[i].step == steps_of[i].step);
                ++cells[slots[i].step][slots[i].rank];
            }
            for (std::size_t step = 0; step < s.micro_steps; ++step)
                for (std::size_t r = 0; r < ranks; ++r)
                    REQUIRE(cells[step][r] ==
                            (step + 1 < s.micro_steps ? batch : m - batch * (s.micro_steps - 1)));
            const double objective = stage_objective(costs, d, slots, ranks, s.micro_steps);
            const double before = stage_objective(costs, d, flat, ranks, s.micro_steps);
            const double tolerance = 1e-6 * std::max(1.0, before);
            REQUIRE(s.objective == Approx(objective).epsilon(1e-6).margin(1e-300));
            REQUIRE(objective <= before + tolerance);
            REQUIRE(s.summed_objective == Approx(before).epsilon(1e-6).margin(1e-300));
            REQUIRE(s.lower_bound <= s.objective * (1 + 1e-6) + 1e-300);
            std::vector<bcl::plan_slot> again(n);
            (void)planner.plan(costs, d, ranks, batch, {}, again);
            REQUIRE(again == slots);
        }
}

TEST_CASE("stage plan: with one stage the plan is bcl::held_batch_planner's, unchanged",
          "[stage_plan]") {
    bcl::held_stage_planner planner;
    bcl::held_batch_planner held;
    for (std::uint64_t seed = 1; seed <= 40; ++seed) {
        const std::size_t ranks = 1 + seed % 7;
        const std::size_t n = ranks * (1 + seed % 31);
        const std::vector<double> costs = bcl_test::costs_of_seed(n, seed);
        std::vector<bcl::plan_slot> mine(n), theirs(n);
        const bcl::stage_plan_summary s = planner.plan(costs, 1, ranks, 4, {}, mine);
        (void)held.plan(costs, ranks, 4, {}, theirs);
        CAPTURE(seed, ranks, n);
        REQUIRE(mine == theirs);
        REQUIRE(s.steps_restaged == 0);
    }
}

TEST_CASE("stage plan: on a vision-language mix at R=8, B=16 it gains what the summed plan "
          "leaves, close to the bound",
          "[stage_plan]") {
    bcl::held_stage_planner planner;
    double total = 0.0, objective = 0.0, summed = 0.0, bound = 0.0;
    for (std::uint64_t step = 0; step < 60; ++step) {
        const std::vector<double> costs = vision_language(128, step + 1);
        std::vector<bcl::plan_slot> slots(128);
        const bcl::stage_plan_summary s = planner.plan(costs, 2, 8, 16, {}, slots);
        total += s.total;
        objective += s.objective;
        summed += s.summed_objective;
        bound += s.lower_bound;
    }
    const double stages = total / 8 / objective;
    const double flat = total / 8 / summed;
    const double best = total / 8 / bound;
    CAPTURE(stages, flat, best);
    REQUIRE(stages >= flat + 0.03);
    REQUIRE(stages >= best - 0.02);
}

TEST_CASE("stage plan: a shape of no stages or too many, costs not whole rows, a bad cost and a "
          "plan of another size are errors naming them; the plan is unchanged",
          "[stage_plan]") {
    bcl::held_stage_planner planner;
    std::vector<double> costs = stage_costs(8, 2, 3);
    const std::vector<bcl::plan_slot> untouched(8, bcl::plan_slot{7, 7});
    std::vector<bcl::plan_slot> slots = untouched;
    REQUIRE_THROWS_WITH(planner.plan(costs, 0, 2, 2, {}, slots), Contains("0 stages"));
    REQUIRE_THROWS_WITH(planner.plan(costs, bcl::max_plan_stages + 1, 2, 2, {}, slots),
                        Contains("a record has 1 to 16"));
    REQUIRE_THROWS_WITH(planner.plan(std::span<const double>(costs).first(15), 2, 2, 2, {}, slots),
                        Contains("15 costs are not rows of 2 stages"));
    for (const double bad : {std::numeric_limits<double>::quiet_NaN(), -1.0,
                             std::numeric_limits<double>::infinity()}) {
        std::vector<double> broken = costs;
        broken[5] = bad; // record 2, stage 1
        REQUIRE_THROWS_WITH(planner.plan(broken, 2, 2, 2, {}, slots),
                            Contains("record 2's cost of stage 1 is"));
    }
    std::vector<bcl::plan_slot> short_plan(7);
    REQUIRE_THROWS_WITH(planner.plan(costs, 2, 2, 2, {}, short_plan), Contains("7 slots for 8"));
    REQUIRE_THROWS_AS(planner.plan(costs, 2, 3, 2, {}, slots), bcl::error); // 8 not a multiple
    REQUIRE(slots == untouched);
}

TEST_CASE("stage window: a window of a global plan of stage costs keeps the summed plan's steps, "
          "B records a rank a step but the last, every record once, the objective between the "
          "bound and the summed plan's; with one stage it is bcl::global_planner's plan",
          "[stage_plan]") {
    bcl::stage_window_planner planner;
    bcl::global_planner global;
    for (std::uint64_t seed = 1; seed <= 30; ++seed)
        for (const std::size_t d : {std::size_t{1}, std::size_t{2}, std::size_t{3}}) {
            const bcl::plan_shape shape{1 + seed % 5, 1 + seed % 4, 1 + seed % 6};
            const std::size_t full = shape.ranks * shape.steps * shape.batch;
            // Full windows and short last ones (whole ranks' worth, as epochs lay them out).
            const std::size_t n =
                seed % 3 == 0 ? shape.ranks * (1 + seed % (full / shape.ranks)) : full;
            const std::vector<double> costs = stage_costs(n, d, seed);
            CAPTURE(seed, d, shape.ranks, shape.steps, shape.batch, n);
            std::vector<bcl::plan_slot> slots(n);
            const bcl::stage_plan_summary s = planner.plan(costs, d, shape, {}, slots);
            std::vector<bcl::plan_slot> flat(n), steps_of(n);
            const bcl::plan_summary f = global.plan(column(costs, d, -1), shape, {}, flat);
            (void)global.plan(column(costs, d, s.steps_from_stage), shape, {}, steps_of);
            REQUIRE(s.micro_steps == f.steps);
            std::vector<std::vector<std::size_t>> cells(f.steps,
                                                        std::vector<std::size_t>(shape.ranks, 0));
            for (std::size_t i = 0; i < n; ++i) {
                REQUIRE(slots[i].step == steps_of[i].step);
                ++cells[slots[i].step][slots[i].rank];
            }
            const std::size_t m = n / shape.ranks;
            for (std::size_t step = 0; step < f.steps; ++step)
                for (std::size_t r = 0; r < shape.ranks; ++r)
                    REQUIRE(cells[step][r] ==
                            (step + 1 < f.steps ? shape.batch : m - shape.batch * (f.steps - 1)));
            if (d == 1) {
                REQUIRE(slots == flat);
                const bcl::plan_summary w = planner.window_summary();
                REQUIRE(w.digest == f.digest);
                REQUIRE(w.objective == f.objective);
                REQUIRE(w.scale == f.scale);
                continue;
            }
            const double objective = stage_objective(costs, d, slots, shape.ranks, f.steps);
            const double before = stage_objective(costs, d, flat, shape.ranks, f.steps);
            REQUIRE(s.objective == Approx(objective).epsilon(1e-6).margin(1e-300));
            REQUIRE(objective <= before * (1 + 1e-6) + 1e-300);
            REQUIRE(s.lower_bound <= s.objective * (1 + 1e-6) + 1e-300);
            // The window's summary as an epoch sums it: the stage figures in its fixed point.
            const bcl::plan_summary w = planner.window_summary();
            REQUIRE(w.digest == bcl::plan_digest(slots));
            REQUIRE(w.cost_of(w.objective) == Approx(s.objective).epsilon(1e-12).margin(1e-300));
            REQUIRE(w.cost_of(w.total) == Approx(s.total).epsilon(1e-12).margin(1e-300));
            REQUIRE(w.cost_of(w.heaviest) <= s.objective * (1 + 1e-12) + 1e-300);
            std::vector<bcl::plan_slot> again(n);
            (void)planner.plan(costs, d, shape, {}, again);
            REQUIRE(again == slots);
        }
}

TEST_CASE("stage window: on a vision-language mix at R=8, K=8, B=16 the windows come within a "
          "few hundredths of the bound",
          "[stage_plan]") {
    bcl::stage_window_planner planner;
    const bcl::plan_shape shape{8, 8, 16};
    double total = 0.0, objective = 0.0, summed = 0.0, bound = 0.0;
    for (std::uint64_t window = 0; window < 12; ++window) {
        const std::vector<double> costs = vision_language(8 * 8 * 16, window + 100);
        std::vector<bcl::plan_slot> slots(costs.size() / 2);
        const bcl::stage_plan_summary s = planner.plan(costs, 2, shape, {}, slots);
        total += s.total;
        objective += s.objective;
        summed += s.summed_objective;
        bound += s.lower_bound;
    }
    const double stages = total / 8 / objective;
    const double flat = total / 8 / summed;
    const double best = total / 8 / bound;
    CAPTURE(stages, flat, best);
    REQUIRE(stages >= flat);
    REQUIRE(stages >= best - 0.03);
}

TEST_CASE("stage window: at R=64, where the levelling tries only its first partners, the windows "
          "of a vision-language mix gain over the summed plan and come within a hundredth of the "
          "bound",
          "[stage_plan]") {
    // 63 partners a rank, step_stages::level_partners of them tried after the likeliest.
    static_assert(bcl::detail::stages::step_stages::level_partners + 2 < 64);
    bcl::stage_window_planner planner;
    const bcl::plan_shape shape{64, 8, 16};
    double total = 0.0, objective = 0.0, summed = 0.0, bound = 0.0;
    for (std::uint64_t window = 0; window < 3; ++window) {
        const std::vector<double> costs = vision_language(64 * 8 * 16, window + 200);
        std::vector<bcl::plan_slot> slots(costs.size() / 2);
        const bcl::stage_plan_summary s = planner.plan(costs, 2, shape, {}, slots);
        total += s.total;
        objective += s.objective;
        summed += s.summed_objective;
        bound += s.lower_bound;
    }
    const double stages = total / 64 / objective;
    const double flat = total / 64 / summed;
    const double best = total / 64 / bound;
    CAPTURE(stages, flat, best);
    REQUIRE(stages >= flat + 0.04);
    REQUIRE(stages >= best - 0.01);
}

TEST_CASE("stage window: bad stages and costs are errors naming them, the plan unchanged",
          "[stage_plan]") {
    bcl::stage_window_planner planner;
    std::vector<double> costs = stage_costs(8, 2, 5);
    const std::vector<bcl::plan_slot> untouched(8, bcl::plan_slot{7, 7});
    std::vector<bcl::plan_slot> slots = untouched;
    const bcl::plan_shape shape{2, 2, 2};
    REQUIRE_THROWS_WITH(planner.plan(costs, 0, shape, {}, slots), Contains("0 stages"));
    REQUIRE_THROWS_WITH(planner.plan(std::span<const double>(costs).first(15), 2, shape, {}, slots),
                        Contains("15 costs are not rows of 2 stages"));
    costs[3] = -2.0; // record 1, stage 1
    REQUIRE_THROWS_WITH(planner.plan(costs, 2, shape, {}, slots),
                        Contains("record 1's cost of stage 1 is -2"));
    REQUIRE(slots == untouched);
}
