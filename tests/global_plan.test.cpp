// The global plan (bcl::plan_window, bcl::global_planner; docs/global.md): every rank computes
// the same plan of a window of K steps of all R ranks' records. Its contract, each a property over
// many seeds, distributions and shapes: every (step, rank) holds exactly B records (the short last
// step the rest), every record is placed once, the plan is a pure function of the costs (and so
// is its digest), bad input is a bcl::error that changes nothing. Its quality: never worse than
// the flat plan of the same window, exhaustive search on tiny windows, and worked examples of a
// record too dear to balance away and of a one-step window that levelling alone plans badly (the
// plan's parts have their own specs in tests/plan/). Expectations come from (n, R, K, B) and
// hand derivations, never from the plan itself.

#include "support/brute_force.hpp"
#include "support/distributions.hpp"
#include "support/error_message.hpp"
#include "support/plan_checks.hpp"

#include <bcl/cost_estimator.hpp>
#include <bcl/error.hpp>
#include <bcl/global_plan.hpp>

#include <catch2/catch.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

using namespace bcl_test;
using Catch::Matchers::Contains;

namespace {

using plan_slots = std::vector<bcl::plan_slot>;

/// Each (step, rank)'s packed batch in the plan's own integer units: the sum of
/// floor(cost * 2^scale) over its records, the quantization the plan uses (checked against it
/// by tests/plan/quantize.test.cpp). Exact, so two plans of one window compare without rounding.
std::vector<std::uint64_t> quantized_batches(std::span<const double> costs, const plan_slots& p,
                                             bcl::plan_shape shape, int scale) {
    const expected_steps e = steps_of(costs.size(), shape.ranks, shape.batch);
    std::vector<std::uint64_t> sum(e.steps * shape.ranks, 0);
    for (std::size_t i = 0; i < costs.size(); ++i)
        sum[p[i].step * shape.ranks + p[i].rank] +=
            static_cast<std::uint64_t>(std::floor(std::ldexp(costs[i], scale)));
    return sum;
}

/// Costs at the ends of what a plan takes, beside the ordinary distributions: the tiniest and the
/// largest allowed values, both at once, and zeros with one positive cost.
const std::vector<distribution>& extreme_distributions() {
    static const std::vector<distribution> list{
        {"1e-300 and ties",
         [](std::size_t n, std::uint64_t seed) {
             cost_list c = three_values_costs(n, seed);
             for (double& x : c) x *= 1e-300;
             return c;
         }},
        {"1e120 (bcl::max_estimate) and ties",
         [](std::size_t n, std::uint64_t seed) {
             cost_list c = three_values_costs(n, seed);
             for (double& x : c) x = x == 3.0 ? bcl::max_estimate : x * 1e119;
             return c;
         }},
        {"1e-300 beside 1e120",
         [](std::size_t n, std::uint64_t seed) {
             cost_list c = two_values_costs(n, seed);
             for (double& x : c) x = x == 1.0 ? 1e-300 : 1e120;
             return c;
         }},
        {"zeros and one positive",
         [](std::size_t n, std::uint64_t seed) {
             cost_list c(n, 0.0);
             if (n > 0) c[case_seed(seed) % n] = 5.0;
             return c;
         }},
        {"subnormals",
         [](std::size_t n, std::uint64_t seed) {
             cost_list c = uniform_costs(n, seed);
             for (double& x : c) x *= 1e-320;
             return c;
         }},
    };
    return list;
}

std::vector<distribution> every_distribution() {
    std::vector<distribution> all = all_distributions();
    const auto& extremes = extreme_distributions();
    all.insert(all.end(), extremes.begin(), extremes.end());
    return all;
}

/// Case i's window: R, K, B up to 9, 6, 17 (B = 1 and K = 1 included), every other case short.
window_case case_of(std::uint64_t i) {
    return window_case_of(i, {.ranks = 9, .steps = 6, .batch = 17});
}

} // namespace

TEST_CASE("global plan: every (step, rank) holds exactly B records, the last step the rest, and "
          "every record is placed once",
          "[global_plan]") {
    const std::vector<distribution> dists = every_distribution();
    bcl::global_planner planner; // one planner for everything: its scratch must not leak
    for (std::uint64_t i = 0; i < 120; ++i) {
        const window_case w = case_of(i);
        for (const distribution& d : dists) {
            const cost_list costs = d.generate(w.n, case_seed(i));
            for (const bool padded : {false, true})
                for (const bool level : {true, false}) {
                    INFO(fmt::format("{}: R={} K={} B={} n={} padded={} level_steps={}", d.name,
                                     w.shape.ranks, w.shape.steps, w.shape.batch, w.n, padded,
                                     level));
                    bcl::plan_options opt;
                    opt.batching = padded ? bcl::batch_cost::padded : bcl::batch_cost::packed;
                    opt.level_steps = level;
                    plan_slots out(
                        w.n, bcl::plan_slot{~0U, ~0U}); // any slot left unwritten is out of range
                    (void)planner.plan(costs, w.shape, opt, out);
                    CHECK(check_layout(out, w.n, w.shape).empty());
                    CHECK(check_layout(bcl::plan_window(costs, w.shape, opt), w.n, w.shape) == "");
                }
        }
    }
}

TEST_CASE("global plan: the full window R*K*B uses every step; a short one uses ceil(m/B) steps "
          "and leaves the rest of the window unused",
          "[global_plan]") {
    const std::vector<double> costs = lognormal_costs(3 * 2 * 4, 1);
    // R = 3, K = 5, B = 4, n = 24: m = 8 per rank, two full steps, steps 2..4 unused.
    const plan_slots two_steps = bcl::plan_window(costs, {.ranks = 3, .steps = 5, .batch = 4});
    CHECK(check_layout(two_steps, 24, {3, 5, 4}).empty());
    CHECK(std::all_of(two_steps.begin(), two_steps.end(),
                      [](const bcl::plan_slot& s) { return s.step < 2; }));
    // R = 3, K = 5, B = 5, n = 24: m = 8, one full step of 5 and a short one of 3 per rank.
    const plan_slots short_last = bcl::plan_window(costs, {.ranks = 3, .steps = 5, .batch = 5});
    CHECK(check_layout(short_last, 24, {3, 5, 5}).empty());
    // n = 0: nothing to place, nothing thrown.
    CHECK(bcl::plan_window({}, {.ranks = 3, .steps = 5, .batch = 5}).empty());
    // One record per rank, B = 16: one short step of one record each.
    const plan_slots single = bcl::plan_window(std::vector<double>{5, 1, 3}, {3, 8, 16});
    CHECK(check_layout(single, 3, {3, 8, 16}).empty());
}

TEST_CASE("global plan: the plan and its digest are pure functions of the costs, the shape and "
          "the options",
          "[global_plan]") {
    bcl::global_planner used;
    for (std::uint64_t i = 0; i < 40; ++i) {
        const window_case w = case_of(i);
        for (const distribution& d : every_distribution()) {
            const cost_list costs = d.generate(w.n, case_seed(i + 1000));
            INFO(fmt::format("{}: R={} K={} B={} n={}", d.name, w.shape.ranks, w.shape.steps,
                             w.shape.batch, w.n));
            plan_slots first(w.n);
            const bcl::plan_summary s1 = used.plan(costs, w.shape, first);
            // Another window in between, then the same one again, and a fresh planner.
            plan_slots other(w.n);
            (void)used.plan(lognormal_costs(w.n, i), w.shape, other);
            plan_slots again(w.n);
            const bcl::plan_summary s2 = used.plan(costs, w.shape, again);
            bcl::global_planner fresh;
            plan_slots third(w.n);
            const bcl::plan_summary s3 = fresh.plan(costs, w.shape, third);
            CHECK(again == first);
            CHECK(third == first);
            CHECK(s1.digest == s2.digest);
            CHECK(s1.digest == s3.digest);
            CHECK(s1.digest == bcl::plan_digest(first));
            CHECK(s1.objective == s3.objective);
        }
    }
}

TEST_CASE("global plan: the digest changes with any one slot and chains windows in order",
          "[global_plan]") {
    const cost_list costs = pareto_costs(4 * 3 * 5, 7);
    const plan_slots p = bcl::plan_window(costs, {4, 3, 5});
    const std::uint64_t d = bcl::plan_digest(p);
    for (std::size_t i = 0; i < p.size(); ++i) {
        plan_slots changed = p;
        changed[i].rank = (changed[i].rank + 1) % 4;
        CHECK(bcl::plan_digest(changed) != d);
        changed = p;
        changed[i].step += 1;
        CHECK(bcl::plan_digest(changed) != d);
    }
    // Two records in different slots trade places: the same multiset of slots, another plan.
    plan_slots swapped = p;
    const auto other =
        std::find_if(p.begin(), p.end(), [&](const bcl::plan_slot& s) { return !(s == p[0]); });
    REQUIRE(other != p.end());
    std::swap(swapped[0], swapped[static_cast<std::size_t>(other - p.begin())]);
    CHECK(bcl::plan_digest(swapped) != d);
    // Chaining: an epoch of two windows, in order; the order matters, and so does the seed.
    const plan_slots q = bcl::plan_window(lognormal_costs(4 * 3 * 5, 8), {4, 3, 5});
    const std::uint64_t epoch = bcl::plan_digest(q, bcl::plan_digest(p));
    CHECK(epoch == bcl::plan_digest(q, d));
    CHECK(epoch != bcl::plan_digest(p, bcl::plan_digest(q)));
    CHECK(bcl::plan_digest(p, 1) != d);
    CHECK(bcl::plan_digest({}) != bcl::plan_digest({}, 1));
}

TEST_CASE("global plan: a bad cost is a bcl::error naming its index and value, and changes "
          "nothing",
          "[global_plan]") {
    const bcl::plan_shape shape{.ranks = 2, .steps = 3, .batch = 4};
    const cost_list good = lognormal_costs(24, 3);
    bcl::global_planner planner;
    plan_slots before(24);
    const bcl::plan_summary reference = planner.plan(good, shape, before);
    struct bad_value {
        double value;
        const char* text;
    };
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double inf = std::numeric_limits<double>::infinity();
    for (const bad_value bad :
         {bad_value{nan, "nan"}, bad_value{-1.0, "-1"}, bad_value{-1e-300, "-1e-300"},
          bad_value{inf, "inf"}, bad_value{-inf, "-inf"},
          bad_value{1.0000001e120, "1.0000001e+120"}}) {
        for (const std::size_t at : {std::size_t{0}, std::size_t{13}, std::size_t{23}}) {
            INFO(bad.text << " at " << at);
            cost_list costs = good;
            costs[at] = bad.value;
            plan_slots out = before;
            const std::string message =
                bcl_error_message([&] { (void)planner.plan(costs, shape, out); });
            CHECK_THAT(message, Contains("index " + std::to_string(at)) && Contains(bad.text));
            CHECK(out == before); // the plan given is untouched
            CHECK_THAT(bcl_error_message([&] { (void)bcl::plan_window(costs, shape); }),
                       Contains("index " + std::to_string(at)));
            // The planner is as it was: the next window plans as a fresh one would.
            plan_slots after(24);
            CHECK(planner.plan(good, shape, after).digest == reference.digest);
            CHECK(after == before);
        }
    }
    // -0.0 is a cost of 0, and max_estimate itself is allowed.
    cost_list edge = good;
    edge[5] = -0.0;
    edge[6] = bcl::max_estimate;
    CHECK(check_layout(bcl::plan_window(edge, shape), 24, shape).empty());
}

TEST_CASE("global plan: a bad shape, count or option is a bcl::error naming the numbers",
          "[global_plan]") {
    const cost_list costs = uniform_costs(24, 1);
    const auto message = [&](bcl::plan_shape shape, std::span<const double> c = {},
                             bcl::plan_options opt = {}) {
        return bcl_error_message([&] { (void)bcl::plan_window(c, shape, opt); });
    };
    CHECK_THAT(message({0, 3, 4}, costs), Contains("ranks = 0"));
    CHECK_THAT(message({2, 0, 4}, costs), Contains("steps = 0"));
    CHECK_THAT(message({2, 3, 0}, costs), Contains("batch = 0"));
    // 24 costs over 5 ranks; 24 costs into a window of 2 * 2 * 4 = 16.
    CHECK_THAT(message({5, 3, 4}, costs), Contains("24") && Contains("5 ranks"));
    CHECK_THAT(message({2, 2, 4}, costs), Contains("24") && Contains("R*K*B = 16"));
    // R*K*B above bcl::max_plan_records, and one whose product overflows 64 bits.
    CHECK_THAT(message({1 << 16, 1 << 10, 1 << 5}),
               Contains(std::to_string(bcl::max_plan_records)));
    const std::size_t huge = std::size_t{1} << 40;
    CHECK_THAT(message({huge, huge, huge}), Contains(std::to_string(bcl::max_plan_records)));
    // The largest window a plan takes is accepted (here empty: no memory needed).
    CHECK(message({1 << 10, 1 << 10, 1 << 10}) == "<no exception>");
    // The plan's length must match; reserve() refuses what plan() refuses.
    plan_slots out(23);
    bcl::global_planner planner;
    CHECK_THAT(bcl_error_message([&] { planner.reserve({2, 0, 4}); }), Contains("steps = 0"));
    CHECK_THAT(bcl_error_message([&] {
                   planner.reserve({1 << 16, 1 << 10, 1 << 5});
               }),
               Contains(std::to_string(bcl::max_plan_records)));
    CHECK_THAT(bcl_error_message([&] {
                   (void)planner.plan(costs, {2, 3, 4}, out);
               }),
               Contains("23 slots for 24 costs"));
    // A cap must be a cost: not negative, not NaN.
    bcl::plan_options opt;
    opt.cap = -3.0;
    CHECK_THAT(message({2, 3, 4}, costs, opt), Contains("cap -3"));
    opt.cap = std::numeric_limits<double>::quiet_NaN();
    CHECK_THAT(message({2, 3, 4}, costs, opt), Contains("cap nan"));
    opt.cap = 0.0;
    opt.batching = static_cast<bcl::batch_cost>(7);
    CHECK_THAT(message({2, 3, 4}, costs, opt), Contains("batching"));
}

TEST_CASE("global plan: a record too dear to balance away gets a step whose other packs are "
          "filled up to it",
          "[global_plan]") {
    // R = 2, K = 2, B = 2: costs 100, 1, 2, 3, 50, 49, 10, 10 (total 225). The pack of 100 costs
    // at least 100 + 1 = 101, whatever the plan, and so does its step. Its other pack can hold at
    // most 50 + 49 = 99, so the other step holds at least 225 - 101 - 99 = 25 over two packs:
    // at least 13 in integers. The best objective is 101 + 13 = 114: {100, 1} {50, 49} and
    // {10, 3} {10, 2}.
    const std::vector<double> costs{100, 1, 2, 3, 50, 49, 10, 10};
    const bcl::plan_shape shape{2, 2, 2};
    CHECK(brute_force_plan_objective(costs, shape.ranks, shape.batch, false) == 114.0);
    const plan_slots levelled = bcl::plan_window(costs, shape);
    CHECK(objective(costs, levelled, shape) == 114.0);
    CHECK(levelled[0].step == 0); // the dear record's step comes first
    CHECK(levelled[4].step == 0); // 50 and 49 share it,
    CHECK(levelled[5].step == 0); // on the other rank
    CHECK(levelled[4].rank != levelled[0].rank);
    // Without levelling, LPT makes every pack as close to the mean as it can: {100, 1},
    // {50, 2}, {49, 3}, {10, 10}; two steps of the heaviest first: 101 + 52 = 153.
    bcl::plan_options flat;
    flat.level_steps = false;
    CHECK(objective(costs, bcl::plan_window(costs, shape, flat), shape) == 153.0);
}

TEST_CASE("global plan: the default plan's objective is never above the flat plan's "
          "(level_steps = false) of the same window, and the plan kept keeps the contract",
          "[global_plan]") {
    // Every shape up to R = 8, K = 4, B = 8 (K = 1 and B = 1 included), every distribution, six
    // seeds: three full windows and three short ones (n < R*K*B, a multiple of R). The objectives
    // are computed here from the slots, in the plan's own integer units, so the comparison is
    // exact.
    bcl::global_planner planner;
    bcl::plan_options flat;
    flat.level_steps = false;
    const std::vector<distribution> dists = every_distribution();
    std::size_t better = 0; // windows where the default plan beats the flat one
    for (std::size_t ranks = 1; ranks <= 8; ++ranks)
        for (std::size_t steps = 1; steps <= 4; ++steps)
            for (std::size_t batch = 1; batch <= 8; ++batch)
                for (std::uint64_t seed = 0; seed < 6; ++seed) {
                    const bcl::plan_shape shape{ranks, steps, batch};
                    const std::size_t per_rank = steps * batch;
                    // Even seeds: the full window; odd ones: a short one.
                    const std::size_t m =
                        seed % 2 == 0 || per_rank == 1
                            ? per_rank
                            : 1 + case_seed(seed + 100 * per_rank) % (per_rank - 1);
                    const std::size_t n = ranks * m;
                    for (const distribution& d : dists) {
                        const cost_list costs = d.generate(n, case_seed(seed));
                        INFO(fmt::format("{} seed {}: R={} K={} B={} n={}", d.name, seed, ranks,
                                         steps, batch, n));
                        plan_slots kept(n, bcl::plan_slot{~0U, ~0U});
                        plan_slots flat_plan(n, bcl::plan_slot{~0U, ~0U});
                        const bcl::plan_summary s = planner.plan(costs, shape, kept);
                        const bcl::plan_summary sf = planner.plan(costs, shape, flat, flat_plan);
                        REQUIRE(check_layout(kept, n, shape) == "");
                        REQUIRE(s.scale == sf.scale);
                        const std::vector<std::uint64_t> batches =
                            quantized_batches(costs, kept, shape, s.scale);
                        const std::uint64_t got = objective_of(batches, ranks);
                        const std::uint64_t reference = objective_of(
                            quantized_batches(costs, flat_plan, shape, sf.scale), ranks);
                        CHECK(got <= reference);
                        better += got < reference ? 1 : 0;
                        CHECK(check_order(batches, n, shape) == "");
                        // The summary describes the plan kept.
                        CHECK(s.objective == got);
                        CHECK(s.heaviest == *std::max_element(batches.begin(), batches.end()));
                        CHECK(s.digest == bcl::plan_digest(kept));
                        CHECK(s.total == sf.total);
                        CHECK(s.lower_bound == sf.lower_bound);
                        CHECK(s.lower_bound <= s.objective);
                        CHECK(s.steps == steps_of(n, ranks, batch).steps);
                    }
                }
    CHECK(better > 0); // levelling does win somewhere: the default is not the flat plan alone
}

TEST_CASE("global plan: a window of one step gets the best plan, where levelling alone loses",
          "[global_plan]") {
    // R = 3, K = 1, B = 3: the total is 18.3, so no plan beats 6.1, and {5.9, 0.0, 0.2},
    // {4.1, 1.8, 0.2}, {3.2, 2.3, 0.6} reach it. Levelling alone sees 5.9 with the two cheapest
    // records (6.1) at or above the mean pack and levels the step at the dearest of 5.9 + 0.0 +
    // 0.2, 4.1 + 0.2 + 0.6 and 3.2 + 1.8 + 2.3 = 7.3; filled up to that greedily ({5.9, 0.6,
    // 0.2}, {4.1, 3.2, 0.0}, {2.3, 1.8, 0.2}) it costs 7.3. The flat plan of the window is better
    // and is kept.
    const std::vector<double> costs{2.3, 4.1, 1.8, 5.9, 0.2, 0.0, 3.2, 0.2, 0.6};
    const std::vector<std::size_t> packs_of_three{3, 3, 3};
    const double best = brute_force_min_heaviest(costs, packs_of_three); // one step: its heaviest
    CHECK(best == Approx(6.1).epsilon(1e-12));
    // The same window as the last step of an epoch in a window of K = 8 (n = R*B: one step).
    for (const bcl::plan_shape shape :
         {bcl::plan_shape{3, 1, 3}, bcl::plan_shape{.ranks = 3, .steps = 8, .batch = 3}}) {
        INFO("K = " << shape.steps);
        CHECK(brute_force_plan_objective(costs, shape.ranks, shape.batch, false) ==
              Approx(best).epsilon(1e-12));
        bcl::global_planner planner;
        plan_slots p(costs.size());
        const bcl::plan_summary s = planner.plan(costs, shape, p);
        CHECK(objective(costs, p, shape) == Approx(best).epsilon(1e-12));
        CHECK(s.cost_of(s.objective) == Approx(best).epsilon(1e-9));
        CHECK(s.cost_of(s.heaviest) == Approx(best).epsilon(1e-9));
        CHECK(s.digest == bcl::plan_digest(p));
    }
}

namespace {

/// One tiny window solved both ways: the plans' objectives (default, flat, padded), the summaries'
/// lower bounds and the optima by exhaustive search, all in cost units.
struct tiny_window {
    std::string name;
    bcl::plan_shape shape;
    double best = 0.0;        // packed optimum
    double best_padded = 0.0; // padded optimum
    double levelled = 0.0;    // the default plan (level_steps = true)
    double flat = 0.0;        // level_steps = false
    double padded = 0.0;
    double lower_bound = 0.0; // the default summary's
    double lower_bound_padded = 0.0;
};

/// Tiny windows of every test distribution, 12 seeds each: K = 1 (where levelling alone loses
/// most), K = 2 and 3, full and short, and B = 1 or R = 1, where a packed plan is provably optimal.
const std::vector<tiny_window>& tiny_windows() {
    struct tiny {
        bcl::plan_shape shape;
        std::size_t n;
    };
    static const std::vector<tiny_window> solved = [] {
        std::vector<tiny_window> all;
        bcl::global_planner planner;
        bcl::plan_options flat;
        flat.level_steps = false;
        bcl::plan_options padded;
        padded.batching = bcl::batch_cost::padded;
        for (const tiny t :
             {tiny{{3, 1, 3}, 9}, tiny{{2, 1, 4}, 8}, tiny{{4, 1, 2}, 8}, tiny{{3, 1, 2}, 6},
              tiny{{3, 1, 3}, 6}, tiny{{2, 2, 2}, 8}, tiny{{2, 2, 3}, 10}, tiny{{3, 2, 2}, 9},
              tiny{{2, 3, 2}, 6}, tiny{{2, 2, 2}, 6}, tiny{{4, 2, 1}, 8}, tiny{{1, 3, 3}, 9}})
            for (std::uint64_t seed = 0; seed < 12; ++seed)
                for (const distribution& d : all_distributions()) {
                    const cost_list costs = d.generate(t.n, case_seed(seed));
                    tiny_window w;
                    w.name = fmt::format("{} seed {}: R={} K={} B={} n={}", d.name, seed,
                                         t.shape.ranks, t.shape.steps, t.shape.batch, t.n);
                    w.shape = t.shape;
                    w.best = brute_force_plan_objective(costs, t.shape.ranks, t.shape.batch, false);
                    w.best_padded =
                        brute_force_plan_objective(costs, t.shape.ranks, t.shape.batch, true);
                    plan_slots p(t.n);
                    const bcl::plan_summary s = planner.plan(costs, t.shape, p);
                    w.levelled = objective(costs, p, t.shape);
                    w.lower_bound = s.cost_of(s.lower_bound);
                    (void)planner.plan(costs, t.shape, flat, p);
                    w.flat = objective(costs, p, t.shape);
                    const bcl::plan_summary sp = planner.plan(costs, t.shape, padded, p);
                    w.padded = objective(costs, p, t.shape, true);
                    w.lower_bound_padded = sp.cost_of(sp.lower_bound);
                    all.push_back(w);
                }
        return all;
    }();
    return solved;
}

/// How one plan (`got`, a member of tiny_window) fares against exhaustive search on the tiny
/// windows where it is a heuristic (packed, R and B at least 2), of K = `steps` (0: every K).
struct search_figures {
    std::size_t windows = 0;
    std::size_t optimal = 0;
    double mean_excess = 0.0;  // mean of got / best - 1
    double worst_excess = 0.0; // largest got / best - 1
};

search_figures figures_of(double tiny_window::*got, std::size_t steps = 0) {
    search_figures f;
    for (const tiny_window& w : tiny_windows()) {
        if (w.shape.batch == 1 || w.shape.ranks == 1 || w.best <= 0.0) continue;
        if (steps != 0 && w.shape.steps != steps) continue;
        const double excess = w.*got / w.best - 1.0;
        ++f.windows;
        f.optimal += excess <= 1e-12 ? 1 : 0;
        f.mean_excess += excess;
        f.worst_excess = std::max(f.worst_excess, excess);
    }
    f.mean_excess /= static_cast<double>(f.windows);
    return f;
}

} // namespace

TEST_CASE("global plan: on tiny windows the plan is optimal where that is provable, and close to "
          "the best elsewhere",
          "[global_plan]") {
    // Against exhaustive search. Padded plans are optimal (sorted runs, see docs/global.md); so
    // are packed plans with B = 1 (a step costs its dearest record: sorted runs again) or R = 1
    // (every plan costs the total). Elsewhere the packed plan is a heuristic, never worse than the
    // flat plan of its window. The summary's lower bound is below the best, both ways.
    for (const tiny_window& w : tiny_windows()) {
        INFO(w.name);
        CHECK(w.padded == Approx(w.best_padded).epsilon(1e-12));
        CHECK(w.lower_bound <= w.best * (1 + 1e-12));
        CHECK(w.lower_bound_padded <= w.best_padded * (1 + 1e-12));
        CHECK(w.levelled <= w.flat * (1 + 1e-12));
        if (w.shape.batch == 1 || w.shape.ranks == 1)
            CHECK(w.levelled == Approx(w.best).epsilon(1e-12));
    }
    // The figures of docs/global.md (`bcl-tests "[global_plan_figures]"` prints them), as bounds a
    // change must not cross: the default plan is optimal on 1019 of these 1200 windows, 0.44%
    // above the best on average and 10% at worst; the flat plan on 772, 1.63% and 20%.
    const search_figures levelled = figures_of(&tiny_window::levelled);
    const search_figures flat = figures_of(&tiny_window::flat);
    CHECK(levelled.windows == 1200);
    CHECK(levelled.optimal * 6 >= levelled.windows * 5);
    CHECK(levelled.mean_excess <= 0.005);
    CHECK(levelled.worst_excess <= 0.1 + 1e-9);
    CHECK(flat.optimal * 5 >= flat.windows * 3);
    CHECK(flat.mean_excess <= 0.02);
    CHECK(flat.worst_excess <= 0.2 + 1e-9);
}

TEST_CASE("global plan: the exhaustive-search figures of docs/global.md",
          "[.][global_plan_figures]") {
    for (const auto& [name, got] :
         {std::pair{"default (level_steps = true)", &tiny_window::levelled},
          std::pair{"flat (level_steps = false)", &tiny_window::flat}})
        for (const std::size_t steps : {0U, 1U, 2U, 3U}) {
            const search_figures f = figures_of(got, steps);
            fmt::print("{}, {}: optimal on {} of {} windows, {:.2f}% above the best on average, "
                       "{:.1f}% at worst\n",
                       name, steps == 0 ? "every K" : fmt::format("K={}", steps), f.optimal,
                       f.windows, 100 * f.mean_excess, 100 * f.worst_excess);
        }
    SUCCEED();
}

TEST_CASE("global plan: steps come heaviest first, the short step last, and the j-th heaviest "
          "batch of step s goes to rank (j + s) mod R",
          "[global_plan]") {
    for (std::uint64_t i = 0; i < 60; ++i) {
        const window_case w = case_of(i);
        for (const distribution& d : all_distributions()) {
            // Whole numbers, so every sum below is exact.
            cost_list costs = d.generate(w.n, case_seed(i + 7));
            for (double& c : costs) c = std::round(c);
            for (const bool padded : {false, true}) {
                INFO(fmt::format("{}: R={} K={} B={} n={} padded={}", d.name, w.shape.ranks,
                                 w.shape.steps, w.shape.batch, w.n, padded));
                bcl::plan_options opt;
                opt.batching = padded ? bcl::batch_cost::padded : bcl::batch_cost::packed;
                const plan_slots p = bcl::plan_window(costs, w.shape, opt);
                CHECK(check_order(batch_costs(costs, p, w.shape, padded), w.n, w.shape) == "");
            }
        }
    }
}

TEST_CASE("global plan: a cap plans as if every cost were clipped to it, and places every record",
          "[global_plan]") {
    for (std::uint64_t i = 0; i < 30; ++i) {
        const window_case w = case_of(i);
        const cost_list costs = pareto_costs(w.n, case_seed(i));
        for (const double cap : {150.0, 400.0, 1e6}) {
            cost_list clipped = costs;
            for (double& c : clipped) c = std::min(c, cap);
            bcl::plan_options opt;
            opt.cap = cap;
            CHECK(bcl::plan_window(costs, w.shape, opt) == bcl::plan_window(clipped, w.shape));
        }
        // +infinity caps nothing; 0 is no cap.
        bcl::plan_options open;
        open.cap = std::numeric_limits<double>::infinity();
        CHECK(bcl::plan_window(costs, w.shape, open) == bcl::plan_window(costs, w.shape));
    }
}

TEST_CASE("global plan: the summary's figures are the plan's own", "[global_plan]") {
    bcl::global_planner planner;
    for (std::uint64_t i = 0; i < 40; ++i) {
        const window_case w = case_of(i);
        for (const distribution& d : all_distributions()) {
            cost_list costs = d.generate(w.n, case_seed(i));
            for (double& c : costs) c = std::round(c); // exact sums in doubles
            INFO(fmt::format("{}: R={} K={} B={} n={}", d.name, w.shape.ranks, w.shape.steps,
                             w.shape.batch, w.n));
            plan_slots p(w.n);
            const bcl::plan_summary s = planner.plan(costs, w.shape, p);
            const expected_steps e = steps_of(w.n, w.shape.ranks, w.shape.batch);
            CHECK(s.steps == e.steps);
            CHECK(s.ranks == w.shape.ranks);
            CHECK(s.lower_bound <= s.objective);
            double total = 0.0;
            for (const double c : costs) total += c;
            // Quantized values are floors at a relative resolution of 2^-30 or better.
            CHECK(s.cost_of(s.total) == Approx(total).epsilon(1e-6).margin(1e-6));
            CHECK(s.cost_of(s.objective) ==
                  Approx(objective(costs, p, w.shape)).epsilon(1e-6).margin(1e-6));
            CHECK(s.gap() >= 0.0);
            CHECK(s.efficiency() <= 1.0);
            CHECK(s.digest == bcl::plan_digest(p));
        }
    }
}
