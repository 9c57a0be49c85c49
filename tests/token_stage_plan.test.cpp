// bcl::token_stage_planner (token_stage_plan.hpp), as a specification: token-budget micro-batches
// of records with D stage costs keep token_planner's contract (every rank as many micro-batches in
// every step, none empty, at most T tokens but a record alone above T, groups kept together,
// every record once); the sum over micro-steps and stages of the dearest micro-batch is never
// above that of the plan of the summed costs and never below the bound; with D = 1 the plan is
// token_planner's; on a vision-language mix it gains what the summed costs leave; bad input is an
// error naming the record and the stage, and changes nothing.

#include "support/distributions.hpp"

#include <bcl/error.hpp>
#include <bcl/token_budget.hpp>
#include <bcl/token_plan.hpp>
#include <bcl/token_stage_plan.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <tuple>
#include <vector>

namespace {

using Catch::Matchers::Contains;
using micro_slots = std::vector<bcl::micro_slot>;
using cell = std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>; // step, micro, rank

// The contract, from the slots alone: every cell of the summary's shape holds a record and at
// most T tokens (but one record alone above T), groups keep to one rank and step.
void check_contract(const std::vector<std::uint64_t>& tokens,
                    const std::vector<std::uint64_t>& groups, const bcl::token_budget& b,
                    const micro_slots& out, const bcl::token_plan_summary& s) {
    std::map<cell, std::vector<std::size_t>> cells;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        REQUIRE(out[i].rank < b.ranks);
        REQUIRE(out[i].micro < s.micro_batches_in(out[i].step));
        cells[{out[i].step, out[i].micro, out[i].rank}].push_back(i);
    }
    REQUIRE(cells.size() == s.micro_steps * b.ranks);
    for (const auto& [key, members] : cells) {
        std::uint64_t sum = 0;
        for (const std::size_t i : members) sum += tokens[i];
        if (members.size() > 1 || sum <= b.max_tokens) REQUIRE(sum <= b.max_tokens);
    }
    std::map<std::uint64_t, std::set<std::pair<std::uint32_t, std::uint32_t>>> where;
    for (std::size_t i = 0; i < groups.size(); ++i)
        where[groups[i]].insert({out[i].step, out[i].rank});
    for (const auto& [g, places] : where) REQUIRE(places.size() == 1);
}

// The sum over micro-steps and stages of the dearest micro-batch, in cost units.
double stage_objective(const std::vector<double>& costs, std::size_t d, const micro_slots& out,
                       const bcl::token_plan_summary& s) {
    std::map<std::size_t, std::map<std::uint32_t, std::vector<double>>> steps;
    for (std::size_t i = 0; i < out.size(); ++i) {
        auto& load = steps[s.first_micro_step(out[i].step) + out[i].micro][out[i].rank];
        load.resize(d, 0.0);
        for (std::size_t k = 0; k < d; ++k) load[k] += costs[i * d + k];
    }
    double sum = 0.0;
    for (const auto& [step, ranks] : steps)
        for (std::size_t k = 0; k < d; ++k) {
            double top = 0.0;
            for (const auto& [r, load] : ranks) top = std::max(top, load[k]);
            sum += top;
        }
    return sum;
}

// Records of a vision-language mix: tokens T = text + P/4, the encoder's cost in the patches P,
// the language model's in T.
void vision_language(std::size_t n, std::uint64_t seed, std::vector<std::uint64_t>& tokens,
                     std::vector<double>& costs) {
    std::mt19937_64 rng(seed);
    std::lognormal_distribution<double> text(6.0, 0.9), one(std::log(1000.0), 0.8),
        many(std::log(4000.0), 0.9);
    std::uniform_real_distribution<double> kind(0.0, 1.0);
    tokens.resize(n);
    costs.resize(2 * n);
    for (std::size_t i = 0; i < n; ++i) {
        const double u = kind(rng);
        const double p = std::min(u < 0.3 ? 0.0 : u < 0.85 ? one(rng) : many(rng), 32768.0);
        const double t = std::min(text(rng), 8192.0) + p / 4.0;
        tokens[i] = static_cast<std::uint64_t>(t);
        costs[2 * i] = 0.09 * (p + p * p / 8192.0);
        costs[2 * i + 1] = t + t * t / 24576.0;
    }
}

} // namespace

TEST_CASE("token stage plan: the contract on every shape, the objective between the bound and "
          "the summed plan's, the same plan twice",
          "[token_stage_plan]") {
    std::mt19937_64 gen(5);
    bcl::token_stage_planner planner;
    bcl::token_planner flat_planner;
    std::size_t plans = 0;
    for (std::size_t trial = 0; trial < 300; ++trial) {
        const bcl::token_budget b{
            .ranks = 1 + gen() % 6, .max_tokens = 64 + gen() % 200, .multiple_of = 1 + gen() % 2};
        const std::size_t steps = 1 + gen() % 2;
        const std::size_t d = 2 + gen() % 3;
        const std::size_t n = b.ranks * steps * b.multiple_of * (2 + gen() % 6);
        std::vector<std::uint64_t> tokens(n);
        for (auto& t : tokens) t = 1 + gen() % (b.max_tokens / 2);
        std::vector<double> costs(n * d);
        for (std::size_t k = 0; k < d; ++k) {
            const std::vector<double> column = bcl_test::costs_of_seed(n, gen() % 1000);
            for (std::size_t i = 0; i < n; ++i) costs[i * d + k] = column[i];
        }
        std::vector<std::uint64_t> groups;
        bcl::token_plan_options opt;
        if (trial % 4 == 1) {
            groups.resize(n);
            for (auto& g : groups) g = gen() % (n / 2 + 1);
        }
        opt.allow_empty_micro_batches = trial % 7 == 3;
        CAPTURE(trial, b.ranks, b.max_tokens, b.multiple_of, steps, d, n);
        micro_slots out(n);
        bcl::token_stage_summary s;
        try {
            s = planner.plan_held(tokens, costs, d, groups, b, steps, opt, out);
        } catch (const bcl::error& e) {
            REQUIRE_THAT(e.what(), Contains("do not fill"));
            continue;
        }
        ++plans;
        if (!opt.allow_empty_micro_batches) check_contract(tokens, groups, b, out, s.plan);
        const double objective = stage_objective(costs, d, out, s.plan);
        REQUIRE(s.objective == Approx(objective).epsilon(1e-6).margin(1e-300));
        REQUIRE(s.lower_bound <= s.objective * (1 + 1e-9) + 1e-300);
        REQUIRE(s.objective <= s.summed_objective * (1 + 1e-9) + 1e-300);
        micro_slots again(n);
        (void)planner.plan_held(tokens, costs, d, groups, b, steps, opt, again);
        REQUIRE(again == out);
    }
    CHECK(plans > 150);
    // One stage: token_planner's plan of the costs, slot for slot.
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
        const bcl::token_budget b{.ranks = 1 + seed % 4, .max_tokens = 100};
        const std::size_t n = b.ranks * (3 + seed % 9);
        std::vector<std::uint64_t> tokens(n);
        for (std::size_t i = 0; i < n; ++i) tokens[i] = 1 + (i * 37 + seed) % 60;
        const std::vector<double> costs = bcl_test::costs_of_seed(n, seed);
        micro_slots mine(n), theirs(n);
        (void)planner.plan_held(tokens, costs, 1, {}, b, 1, {}, mine);
        (void)flat_planner.plan_held(tokens, costs, {}, b, 1, {}, theirs);
        REQUIRE(mine == theirs);
    }
}

TEST_CASE("token stage plan: on a vision-language mix at R=8 it gains what the summed costs "
          "leave",
          "[token_stage_plan]") {
    bcl::token_stage_planner planner;
    double total = 0.0, objective = 0.0, summed = 0.0;
    for (std::uint64_t seed = 1; seed <= 10; ++seed) {
        std::vector<std::uint64_t> tokens;
        std::vector<double> costs;
        vision_language(8 * 48, seed, tokens, costs);
        micro_slots out(tokens.size());
        const bcl::token_stage_summary s =
            planner.plan_held(tokens, costs, 2, {}, {.ranks = 8, .max_tokens = 16384}, 1,
                              {.oversized_alone = true}, out);
        total += s.total;
        objective += s.objective;
        summed += s.summed_objective;
    }
    const double stages = total / 8 / objective;
    const double flat = total / 8 / summed;
    CAPTURE(stages, flat);
    REQUIRE(stages >= flat + 0.02);
}

TEST_CASE("token stage plan: bad stages and costs are errors naming them, the plan unchanged",
          "[token_stage_plan]") {
    bcl::token_stage_planner planner;
    const std::vector<std::uint64_t> tokens(8, 10);
    std::vector<double> costs(16, 1.0);
    const micro_slots untouched(8, bcl::micro_slot{7, 7, 7});
    micro_slots out = untouched;
    const bcl::token_budget b{.ranks = 2, .max_tokens = 40};
    REQUIRE_THROWS_WITH(planner.plan_held(tokens, costs, 0, {}, b, 1, {}, out),
                        Contains("0 stages"));
    REQUIRE_THROWS_WITH(planner.plan_held(tokens, costs, 4, {}, b, 1, {}, out),
                        Contains("4 rows of stage costs for 8 records"));
    costs[5] = std::numeric_limits<double>::quiet_NaN(); // record 2, stage 1
    REQUIRE_THROWS_WITH(planner.plan_held(tokens, costs, 2, {}, b, 1, {}, out),
                        Contains("record 2's cost of stage 1 is nan"));
    REQUIRE(out == untouched);
}
