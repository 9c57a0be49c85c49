// bcl::token_planner, as a specification: a held batch (or K of them) and a stream's windows are
// planned into micro-batches of at most T tokens with the same number on every rank in every step
// (a multiple of m), none empty, every record exactly once, groups kept to a rank or to one
// micro-batch; the same plan for the same input; against exhaustive search on tiny batches; bad
// input refused naming it, the output untouched.

#include "support/case_count.hpp"
#include "support/distributions.hpp"
#include "support/error_message.hpp"

#include <bcl/token_plan.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <tuple>
#include <vector>

namespace {

using Catch::Matchers::Contains;
using micro_slots = std::vector<bcl::micro_slot>;

double default_cost(std::uint64_t t) {
    return static_cast<double>(t) + static_cast<double>(t) * static_cast<double>(t) / 24576.0;
}

// Token counts of a test distribution (scaled so that a few records fill a micro-batch).
std::vector<std::uint64_t> tokens_of(std::size_t n, std::uint64_t seed, std::uint64_t max_tokens) {
    const auto& list = bcl_test::all_distributions();
    const std::vector<double> c = list[seed % list.size()].generate(n, seed);
    const double top = std::max(1e-300, *std::max_element(c.begin(), c.end()));
    std::vector<std::uint64_t> t(n);
    for (std::size_t i = 0; i < n; ++i)
        t[i] = static_cast<std::uint64_t>(std::floor(c[i] / top * static_cast<double>(max_tokens)));
    return t;
}

struct cell_key {
    std::uint32_t step, micro, rank;
    friend auto operator<=>(const cell_key&, const cell_key&) = default;
};

// The contract of a plan of `n` records over `steps` steps: every (step, micro, rank) cell of
// the summary's shape holds a record (so every rank runs as many micro-batches in every step), at
// most T tokens but a record alone above it; groups on one rank and step (or in one cell).
void check_plan(const std::vector<std::uint64_t>& tokens, const std::vector<std::uint64_t>& groups,
                const bcl::token_budget& b, const bcl::token_plan_options& opt,
                const micro_slots& out, const bcl::token_plan_summary& s) {
    const std::size_t n = s.records;
    REQUIRE(s.ranks == b.ranks);
    REQUIRE(s.micro_batches % b.multiple_of == 0);
    // Each step its count, a positive multiple of m; the counts add up to the micro-steps.
    std::size_t counted = 0;
    for (std::size_t step = 0; step < s.steps; ++step) {
        REQUIRE(s.first_micro_step(step) == counted);
        REQUIRE(s.micro_batches_in(step) > 0);
        REQUIRE(s.micro_batches_in(step) <= s.micro_batches);
        REQUIRE(s.micro_batches_in(step) % b.multiple_of == 0);
        counted += s.micro_batches_in(step);
    }
    REQUIRE(counted == s.micro_steps);
    std::map<cell_key, std::vector<std::size_t>> cells;
    for (std::size_t i = 0; i < n; ++i) {
        REQUIRE(out[i].rank < b.ranks);
        REQUIRE(out[i].step < s.steps);
        REQUIRE(out[i].micro < s.micro_batches_in(out[i].step));
        cells[{out[i].step, out[i].micro, out[i].rank}].push_back(i);
    }
    // Every cell of every micro-step holds a record: equal counts on every rank, none empty.
    REQUIRE(cells.size() == s.micro_steps * b.ranks);
    std::size_t alone = 0;
    for (const auto& [key, members] : cells) {
        std::uint64_t sum = 0;
        for (const std::size_t i : members) sum += tokens[i];
        if (members.size() == 1 && tokens[members[0]] > b.max_tokens) {
            REQUIRE(opt.oversized_alone);
            ++alone;
        } else {
            REQUIRE(sum <= b.max_tokens);
        }
    }
    REQUIRE(s.oversized == alone);
    if (!groups.empty()) {
        std::map<std::uint64_t, std::set<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>>>
            where;
        for (std::size_t i = 0; i < n; ++i)
            where[groups[i]].insert(
                {out[i].step, out[i].rank, opt.group_together ? out[i].micro : 0U});
        for (const auto& [g, places] : where) REQUIRE(places.size() == 1);
    }
    // The token bound counts what the tokens need; the plan uses at least that.
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < n; ++i) sum += std::min(tokens[i], b.max_tokens);
    const std::uint64_t per_step = b.max_tokens * b.ranks;
    REQUIRE(s.micro_steps_bound == std::max<std::uint64_t>(1, (sum + per_step - 1) / per_step));
    REQUIRE(s.micro_steps >= s.micro_steps_bound);
}

// The sum over micro-steps of the dearest cell, in cost units, from the slots and costs.
double micro_objective_of(const micro_slots& out, std::size_t n,
                          const std::function<double(std::size_t)>& cost) {
    std::map<std::pair<std::uint32_t, std::uint32_t>, std::map<std::uint32_t, double>> step;
    for (std::size_t i = 0; i < n; ++i) step[{out[i].step, out[i].micro}][out[i].rank] += cost(i);
    double sum = 0.0;
    for (const auto& [k, ranks] : step) {
        double top = 0.0;
        for (const auto& [r, c] : ranks) top = std::max(top, c);
        sum += top;
    }
    return sum;
}

} // namespace

TEST_CASE("token plan: held batches keep the contract on every shape and distribution",
          "[token_plan]") {
    std::mt19937_64 gen(11);
    bcl::token_planner planner;
    std::size_t plans = 0;
    for (std::size_t trial = 0; trial < bcl_test::random_cases(1500); ++trial) {
        const bcl::token_budget b{
            .ranks = 1 + gen() % 6, .max_tokens = 8 + gen() % 120, .multiple_of = 1 + gen() % 3};
        const std::size_t steps = 1 + gen() % 3;
        const std::size_t n = b.ranks * steps * b.multiple_of * (1 + gen() % 6) + gen() % 7;
        const std::vector<std::uint64_t> tokens = tokens_of(n, gen(), b.max_tokens);
        bcl::token_plan_options opt;
        std::vector<std::uint64_t> groups;
        if (trial % 5 == 1) {
            groups.resize(n);
            for (auto& g : groups) g = gen() % (n / 2 + 1);
            opt.group_together = trial % 10 == 1;
        }
        std::vector<double> costs;
        if (trial % 3 == 2) {
            costs = bcl_test::lognormal_costs(n, gen());
        }
        CAPTURE(trial, b.ranks, b.max_tokens, b.multiple_of, steps, n, tokens, groups);
        micro_slots out(n);
        try {
            const bcl::token_plan_summary s =
                planner.plan_held(tokens, costs, groups, b, steps, opt, out);
            REQUIRE(s.records == n);
            REQUIRE(s.steps == steps);
            check_plan(tokens, groups, b, opt, out, s);
            // The summary's objective is the plan's, in cost units.
            const auto cost = [&](std::size_t i) {
                return costs.empty() ? default_cost(tokens[i]) : costs[i];
            };
            const double objective = micro_objective_of(out, n, cost);
            CHECK(s.cost_of(s.objective) == Approx(objective).epsilon(1e-6).margin(1e-9));
            CHECK(s.objective >= s.lower_bound);
            ++plans;
        } catch (const bcl::error& e) {
            // Only a batch that cannot fill R micro-batches of a multiple of m is refused; with
            // groups kept to a rank or a micro-batch, so can one whose groups are too few.
            const std::string what = e.what();
            CAPTURE(what);
            REQUIRE((what.find("do not fill") != std::string::npos ||
                     what.find("above max_tokens") != std::string::npos));
        }
    }
    CHECK(plans > bcl_test::random_cases(900));
}

TEST_CASE("token plan: the plan is a function of its input alone", "[token_plan]") {
    const std::vector<std::uint64_t> tokens = tokens_of(500, 1, 4096);
    const bcl::token_budget b{.ranks = 4, .max_tokens = 4096};
    micro_slots a(500);
    micro_slots c(500);
    bcl::token_planner first;
    bcl::token_planner second;
    const auto s1 = first.plan_held(tokens, {}, {}, b, 2, {}, a);
    (void)second.plan_held(tokens_of(300, 9, 4096), {}, {}, b, 1, {}, std::span(c).first(300));
    const auto s2 = second.plan_held(tokens, {}, {}, b, 2, {}, c);
    REQUIRE(a == c);
    REQUIRE(s1.digest == s2.digest);
    REQUIRE(s1.digest == bcl::token_plan_digest(a));
    // A plan that differs in one slot has another digest; digests chain.
    micro_slots d = a;
    d[17].micro ^= 1U;
    CHECK(bcl::token_plan_digest(d) != s1.digest);
    CHECK(bcl::token_plan_digest(a, 1) != bcl::token_plan_digest(a, 2));
}

TEST_CASE("token plan: the micro-batch count is the token bound, rounded up to m, where the "
          "records pack",
          "[token_plan]") {
    // 8 ranks, 64 records a rank of 1..2000 tokens, T = 16384: LPT packs at the bound.
    std::mt19937_64 gen(5);
    bcl::token_planner planner;
    std::size_t at_bound = 0;
    constexpr int batches = 200;
    for (int k = 0; k < batches; ++k) {
        std::vector<std::uint64_t> tokens(512);
        for (auto& t : tokens) t = 1 + gen() % 2000;
        micro_slots out(tokens.size());
        const auto s =
            planner.plan_held(tokens, {}, {}, {.ranks = 8, .max_tokens = 16384}, 1, {}, out);
        at_bound += s.micro_steps == s.micro_steps_bound;
        REQUIRE(s.micro_steps <= s.micro_steps_bound + 1);
    }
    CHECK(at_bound >= batches * 9 / 10);
    // m rounds the count up.
    const std::vector<std::uint64_t> tokens(48, 100);
    micro_slots out(48);
    bcl::token_planner p;
    CHECK(p.plan_held(tokens, {}, {}, {.ranks = 2, .max_tokens = 1000}, 1, {}, out).micro_batches ==
          3);
    CHECK(
        p.plan_held(tokens, {}, {}, {.ranks = 2, .max_tokens = 1000, .multiple_of = 2}, 1, {}, out)
            .micro_batches == 4);
}

TEST_CASE("token plan: against exhaustive search on tiny batches", "[token_plan]") {
    // Every assignment of n records to R*M cells: the least M that packs them (none empty, none
    // above T) and, at it, the least sum over micro-steps (cells, dearest first, cut into steps
    // of R is the best cut of any given cells).
    std::mt19937_64 gen(21);
    bcl::token_planner planner;
    int same_count = 0;
    int optimal = 0;
    int cases = 0;
    double worst = 0.0;
    for (std::size_t trial = 0; trial < bcl_test::random_cases(300); ++trial) {
        const std::size_t r = 2;
        const std::size_t n = 4 + gen() % 4;
        const std::uint64_t t_max = 10;
        std::vector<std::uint64_t> tokens(n);
        for (auto& t : tokens) t = 1 + gen() % 7;
        std::vector<double> costs(n);
        for (auto& c : costs) c = static_cast<double>(1 + gen() % 20);
        std::size_t best_m = 0;
        double best = std::numeric_limits<double>::infinity();
        for (std::size_t m = 1; m * r <= n && best_m == 0; ++m) {
            const std::size_t cells = r * m;
            std::vector<std::size_t> cell(n, 0);
            for (;;) {
                std::vector<double> load(cells, 0.0);
                std::vector<std::uint64_t> tok(cells, 0);
                std::vector<int> count(cells, 0);
                for (std::size_t i = 0; i < n; ++i) {
                    load[cell[i]] += costs[i];
                    tok[cell[i]] += tokens[i];
                    ++count[cell[i]];
                }
                if (std::all_of(count.begin(), count.end(), [](int c) { return c > 0; }) &&
                    std::all_of(tok.begin(), tok.end(), [&](auto x) { return x <= t_max; })) {
                    std::sort(load.rbegin(), load.rend());
                    double sum = 0.0;
                    for (std::size_t k = 0; k < cells; k += r) sum += load[k];
                    best = std::min(best, sum);
                    best_m = m;
                }
                std::size_t i = 0;
                while (i < n && ++cell[i] == cells) cell[i++] = 0;
                if (i == n) break;
            }
        }
        if (best_m == 0) continue;
        ++cases;
        micro_slots out(n);
        const auto s =
            planner.plan_held(tokens, costs, {}, {.ranks = r, .max_tokens = t_max}, 1, {}, out);
        check_plan(tokens, {}, {.ranks = r, .max_tokens = t_max}, {}, out, s);
        REQUIRE(s.micro_batches >= best_m);
        if (s.micro_batches == best_m) {
            ++same_count;
            const double ours = micro_objective_of(out, n, [&](std::size_t i) { return costs[i]; });
            REQUIRE(ours >= best - 1e-9);
            optimal += ours <= best + 1e-9;
            worst = std::max(worst, ours / best - 1.0);
        }
    }
    // The figures docs/tokens.md gives (300 of 300 at the least count, 205 of those optimal, 29%
    // above the best at worst): costs here do not follow tokens, the hardest case for the deals.
    CAPTURE(cases, same_count, optimal, worst);
    CHECK(same_count >= cases * 98 / 100);
    CHECK(optimal >= same_count * 65 / 100);
    CHECK(worst <= 0.3);
}

TEST_CASE("token plan: a record above T is refused naming it, or alone in its micro-batch",
          "[token_plan][errors]") {
    std::vector<std::uint64_t> tokens(16, 100);
    tokens[5] = 1001;
    bcl::token_planner planner;
    micro_slots out(16, bcl::micro_slot{9, 9, 9});
    const bcl::token_budget b{.ranks = 2, .max_tokens = 1000};
    REQUIRE_THROWS_WITH(planner.plan_held(tokens, {}, {}, b, 1, {}, out),
                        Contains("record 5 has 1001 tokens, above max_tokens (1000)"));
    REQUIRE(out[0] == bcl::micro_slot{9, 9, 9});
    bcl::token_plan_options alone;
    alone.oversized_alone = true;
    const auto s = planner.plan_held(tokens, {}, {}, b, 1, alone, out);
    check_plan(tokens, {}, b, alone, out, s);
    CHECK(s.oversized == 1);
    for (std::size_t i = 0; i < 16; ++i)
        if (i != 5) CHECK_FALSE((out[i].micro == out[5].micro && out[i].rank == out[5].rank));
}

TEST_CASE("token plan: groups stay on one rank, or in one micro-batch", "[token_plan]") {
    std::mt19937_64 gen(3);
    std::vector<std::uint64_t> tokens(96);
    for (auto& t : tokens) t = 1 + gen() % 600;
    std::vector<std::uint64_t> groups(96);
    for (std::size_t i = 0; i < 96; ++i) groups[i] = 1000 + i / 4; // 24 groups of 4
    bcl::token_planner planner;
    micro_slots out(96);
    const bcl::token_budget b{.ranks = 4, .max_tokens = 4096};
    for (const bool together : {false, true}) {
        bcl::token_plan_options opt;
        opt.group_together = together;
        const auto s = planner.plan_held(tokens, {}, groups, b, 1, opt, out);
        check_plan(tokens, groups, b, opt, out, s);
    }
    // A group above T cannot share one micro-batch.
    std::vector<std::uint64_t> big(8, 600);
    const std::vector<std::uint64_t> one_group(8, 7);
    bcl::token_plan_options together;
    together.group_together = true;
    micro_slots few(8);
    REQUIRE_THROWS_WITH(
        planner.plan_held(big, {}, one_group, {.ranks = 1, .max_tokens = 1000}, 1, together, few),
        Contains("group 7 has 4800 tokens, above max_tokens (1000)"));
}

TEST_CASE("token plan: groups kept to a rank are planned whenever one record a micro-batch is a "
          "plan",
          "[token_plan]") {
    // R*K*m records of at most T tokens each, each its own group: a record a micro-batch always
    // fits, so the count is there to find. A deal by cost alone leaves a dear record alone in
    // its (step, rank) bin of m micro-batches.
    bcl::token_planner planner;
    std::size_t planned = 0;
    for (std::uint64_t seed = 0; seed < 300; ++seed) {
        std::mt19937_64 gen(seed);
        const bcl::token_budget b{
            .ranks = 1 + gen() % 4, .max_tokens = 16 + gen() % 100, .multiple_of = 1 + gen() % 3};
        const std::size_t steps = 1 + gen() % 3;
        const std::size_t n = b.ranks * steps * b.multiple_of;
        std::vector<std::uint64_t> tokens(n);
        for (auto& t : tokens) t = 1 + gen() % b.max_tokens;
        std::vector<std::uint64_t> groups(n);
        std::iota(groups.begin(), groups.end(), std::uint64_t{0});
        micro_slots out(n);
        INFO("seed " << seed);
        const auto s = planner.plan_held(tokens, {}, groups, b, steps, {}, out);
        check_plan(tokens, groups, b, {}, out, s);
        ++planned;
    }
    REQUIRE(planned == 300);
    // The smallest case found: 8 records, R = 2, K = 2, m = 2, T = 64.
    const std::vector<std::uint64_t> tokens{55, 41, 33, 18, 20, 3, 5, 2};
    std::vector<std::uint64_t> groups(8);
    std::iota(groups.begin(), groups.end(), std::uint64_t{0});
    const bcl::token_budget b{.ranks = 2, .max_tokens = 64, .multiple_of = 2};
    micro_slots out(8);
    const auto s = planner.plan_held(tokens, {}, groups, b, 2, {}, out);
    check_plan(tokens, groups, b, {}, out, s);
    CHECK(s.micro_steps == 4);
    // One group cannot fill two ranks: the error names groups, not records.
    const std::vector<std::uint64_t> one_group(6, 0);
    micro_slots six(6);
    CHECK_THAT(bcl_test::bcl_error_message([&] {
                   (void)planner.plan_held(std::vector<std::uint64_t>(6, 10), {}, one_group,
                                           {.ranks = 2, .max_tokens = 100}, 1, {}, six);
               }),
               Contains("1 group (6 records)") && Contains("too few groups") &&
                   Contains("a group's records share one rank and step") &&
                   Contains("padding=\"empty\""));
}

TEST_CASE("token plan: bad input is an error naming the field, and the output is untouched",
          "[token_plan][errors]") {
    const std::vector<std::uint64_t> tokens(12, 10);
    micro_slots out(12, bcl::micro_slot{7, 7, 7});
    bcl::token_planner planner;
    const auto refused = [&](auto&& call, const std::string& words) {
        CAPTURE(words);
        REQUIRE_THROWS_AS(call(), bcl::error);
        REQUIRE_THROWS_WITH(call(), Contains(words));
        REQUIRE(std::all_of(out.begin(), out.end(), [](const bcl::micro_slot& s) {
            return s == bcl::micro_slot{7, 7, 7};
        }));
    };
    const bcl::token_budget ok{.ranks = 2, .max_tokens = 100};
    refused(
        [&] {
            return planner.plan_held(tokens, {}, {}, {.ranks = 0, .max_tokens = 100}, 1, {}, out);
        },
        "must all be at least 1");
    refused(
        [&] {
            return planner.plan_held(tokens, {}, {}, {.ranks = 2, .max_tokens = 0}, 1, {}, out);
        },
        "must all be at least 1");
    refused(
        [&] {
            return planner.plan_held(tokens, {}, {},
                                     {.ranks = 2, .max_tokens = 100, .multiple_of = 0}, 1, {}, out);
        },
        "must all be at least 1");
    refused([&] { return planner.plan_held(tokens, {}, {}, ok, 0, {}, out); },
            "must all be at least 1");
    refused(
        [&] {
            return planner.plan_held(
                tokens, {}, {}, {.ranks = 2, .max_tokens = std::uint64_t{1} << 32}, 1, {}, out);
        },
        "above 2^31");
    refused(
        [&] { return planner.plan_held(tokens, std::vector<double>(11, 1.0), {}, ok, 1, {}, out); },
        "11 costs for 12 records");
    refused(
        [&] {
            return planner.plan_held(tokens, {}, std::vector<std::uint64_t>(3, 1), ok, 1, {}, out);
        },
        "3 group ids for 12 records");
    refused([&] { return planner.plan_held(tokens, {}, {}, ok, 1, {}, std::span(out).first(11)); },
            "11 slots for 12 records");
    std::vector<double> bad(12, 1.0);
    bad[4] = std::numeric_limits<double>::quiet_NaN();
    refused([&] { return planner.plan_held(tokens, bad, {}, ok, 1, {}, out); },
            "the cost at index 4 is nan");
    refused(
        [&] {
            return planner.plan_held(tokens, {}, {},
                                     {.ranks = 2, .max_tokens = 100, .multiple_of = 7}, 1, {}, out);
        },
        "do not fill 2 ranks' micro-batches");
    refused(
        [&] {
            return planner.plan_held(std::vector<std::uint64_t>{}, {}, {}, ok, 1, {},
                                     std::span(out).first(0));
        },
        "no records to plan");
    refused(
        [&] {
            return planner.plan_stream(tokens, {},
                                       {.ranks = 2, .max_tokens = 100, .multiple_of = 2}, 3, 1,
                                       false, {}, out);
        },
        "a positive multiple of multiple_of");
    bcl::token_plan_options fill;
    fill.max_fill = 1.5;
    refused([&] { return planner.plan_stream(tokens, {}, ok, 2, 1, false, fill, out); },
            "max_fill must be in (0, 1]");
}

TEST_CASE("token plan: a stream's windows take records from its front, K steps of M "
          "micro-batches each, and its last window what is left",
          "[token_plan]") {
    std::mt19937_64 gen(8);
    std::vector<std::uint64_t> stream(5000);
    for (auto& t : stream) t = 1 + gen() % 3000;
    const bcl::token_budget b{.ranks = 4, .max_tokens = 8192, .multiple_of = 2};
    bcl::token_planner planner;
    std::size_t first = 0;
    std::size_t windows = 0;
    micro_slots out(stream.size());
    while (first < stream.size()) {
        const std::span<const std::uint64_t> rest =
            std::span<const std::uint64_t>(stream).subspan(first);
        const bool last = true;
        const auto s = planner.plan_stream(rest, {}, b, 4, 3, last, {}, out);
        const std::vector<std::uint64_t> taken(rest.begin(),
                                               rest.begin() + std::ptrdiff_t(s.records));
        check_plan(taken, {}, b, {}, out, s);
        if (first + s.records < stream.size()) {
            // A full window: 3 steps of 4, packed to the token bound or one micro-step past it.
            CHECK(s.micro_steps == 12);
            CHECK(s.steps == 3);
            CHECK(s.micro_steps <= s.micro_steps_bound + 1);
            // It took the longest prefix that packs, to 1/1024 of the records that fit: that many
            // records more do not pack (dealt as the plan deals them, dearest first, each to the
            // cheapest cell with room).
            std::size_t fit = 0;
            for (std::uint64_t sum = 0; fit < rest.size() && sum + rest[fit] <= 12 * 4 * 8192;)
                sum += rest[fit++];
            const std::size_t resolution = std::max<std::size_t>(1, fit / 1024);
            std::vector<std::uint64_t> more(
                rest.begin(), rest.begin() + std::ptrdiff_t(std::min(fit, s.records + resolution)));
            std::vector<std::uint64_t> cost(more.size());
            for (std::size_t i = 0; i < more.size(); ++i)
                cost[i] = more[i] * 24576 + more[i] * more[i];
            std::vector<std::uint32_t> order(more.size());
            std::iota(order.begin(), order.end(), 0U);
            std::sort(order.begin(), order.end(), [&](auto x, auto y) {
                return cost[x] > cost[y] || (cost[x] == cost[y] && x < y);
            });
            bcl::detail::tokens::cell_packer packer;
            CHECK_FALSE(packer.deal(order, more, cost, 48, 8192));
        } else {
            CHECK(s.micro_steps % 2 == 0);
        }
        first += s.records;
        ++windows;
    }
    CHECK(windows > 3);
}

TEST_CASE("token plan: every step of a stream's window is a fair sample of it: records as even "
          "as pairing micro-steps makes them, heavy records within one micro-step of the even "
          "share",
          "[token_plan]") {
    // Long-context lengths (a lognormal of median T/16, a tenth of the records near T): the
    // layout's dearest micro-steps hold the records above T/2, its cheapest the many short ones.
    const std::size_t r = 8;
    const std::size_t k = 8;
    const std::size_t m = 2;
    const std::uint64_t t_max = 131072;
    std::mt19937_64 gen(31);
    std::lognormal_distribution<double> body(std::log(8192.0), 1.0);
    std::uniform_int_distribution<std::uint64_t> long_one(t_max / 2, t_max);
    std::vector<std::uint64_t> stream(20000);
    for (auto& t : stream)
        t = gen() % 10 == 0
                ? long_one(gen)
                : std::clamp<std::uint64_t>(static_cast<std::uint64_t>(body(gen)), 1, t_max);
    bcl::token_planner planner;
    micro_slots out(stream.size());
    std::size_t first = 0;
    double spread_sum = 0.0;
    double paired_sum = 0.0;
    std::size_t windows = 0;
    while (stream.size() - first > 4 * r * k * m) {
        const auto rest = std::span<const std::uint64_t>(stream).subspan(first);
        const auto s =
            planner.plan_stream(rest, {}, {.ranks = r, .max_tokens = t_max}, m, k, false, {}, out);
        std::vector<std::uint64_t> step_records(k, 0);
        std::vector<std::uint64_t> step_heavy(k, 0);
        std::vector<std::uint64_t> micro_records(k * m, 0);
        std::vector<std::uint64_t> micro_heavy(k * m, 0);
        std::uint64_t heavy = 0;
        for (std::size_t i = 0; i < s.records; ++i) {
            const bool is_heavy = 2 * rest[i] > t_max;
            ++step_records[out[i].step];
            step_heavy[out[i].step] += is_heavy;
            ++micro_records[out[i].step * m + out[i].micro];
            micro_heavy[out[i].step * m + out[i].micro] += is_heavy;
            heavy += is_heavy;
        }
        // Heavy records: the fullest step at most R (one micro-step's worth) above ceil(h/K).
        CAPTURE(windows, heavy, step_heavy);
        REQUIRE(*std::max_element(step_heavy.begin(), step_heavy.end()) <= (heavy + k - 1) / k + r);
        // Records: pairing the richest micro-step with the poorest is the best deal of pairs.
        std::sort(micro_records.begin(), micro_records.end());
        std::vector<std::uint64_t> paired(k);
        for (std::size_t j = 0; j < k; ++j)
            paired[j] = micro_records[j] + micro_records[2 * k - 1 - j];
        const auto spread = [](const std::vector<std::uint64_t>& v) {
            const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
            return static_cast<double>(*hi) / static_cast<double>(*lo);
        };
        spread_sum += spread(step_records);
        paired_sum += spread(paired);
        first += s.records;
        ++windows;
    }
    CAPTURE(windows, spread_sum / static_cast<double>(windows),
            paired_sum / static_cast<double>(windows));
    REQUIRE(windows >= 10);
    CHECK(spread_sum <= paired_sum + 0.1 * static_cast<double>(windows));
}

TEST_CASE("token plan: held batches pooled over K steps deal their micro-steps fairly too, and "
          "where groups bind a step they stay",
          "[token_plan]") {
    std::mt19937_64 gen(12);
    std::vector<std::uint64_t> tokens(2000);
    for (auto& t : tokens) t = gen() % 5 == 0 ? 9000 + gen() % 7000 : 1 + gen() % 1500;
    const bcl::token_budget b{.ranks = 4, .max_tokens = 16384};
    bcl::token_planner planner;
    micro_slots out(tokens.size());
    const auto s = planner.plan_held(tokens, {}, {}, b, 4, {}, out);
    check_plan(tokens, {}, b, {}, out, s);
    std::vector<std::uint64_t> step_heavy(4, 0);
    std::uint64_t heavy = 0;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        step_heavy[out[i].step] += 2 * tokens[i] > b.max_tokens;
        heavy += 2 * tokens[i] > b.max_tokens;
    }
    CAPTURE(heavy, step_heavy);
    CHECK(*std::max_element(step_heavy.begin(), step_heavy.end()) <= (heavy + 3) / 4 + b.ranks);
    // Groups kept to a rank (and so to a step): each group's records share one step still.
    std::vector<std::uint64_t> groups(tokens.size());
    for (std::size_t i = 0; i < groups.size(); ++i) groups[i] = i / 3;
    const auto g = planner.plan_held(tokens, {}, groups, b, 4, {}, out);
    check_plan(tokens, groups, b, {}, out, g);
}

TEST_CASE("token plan: each step of a pooled held plan has its own count: K steps take the "
          "micro-steps one step of all their records takes, not that rounded up to K*m",
          "[token_plan]") {
    std::size_t uneven = 0;
    for (std::uint64_t seed = 1; seed <= bcl_test::random_cases(60); ++seed) {
        std::mt19937_64 gen(seed);
        const bcl::token_budget b{
            .ranks = 1 + gen() % 8, .max_tokens = 512 + gen() % 4096, .multiple_of = 1 + gen() % 2};
        const std::size_t steps = 2 + gen() % 4;
        std::vector<std::uint64_t> tokens(b.ranks * steps * b.multiple_of * (3 + gen() % 12));
        for (auto& t : tokens) t = 1 + gen() % b.max_tokens;
        bcl::token_planner planner;
        micro_slots pooled(tokens.size());
        micro_slots one(tokens.size());
        const bcl::token_plan_summary s = planner.plan_held(tokens, {}, {}, b, steps, {}, pooled);
        check_plan(tokens, {}, b, {}, pooled, s);
        const bcl::token_plan_summary alone = planner.plan_held(tokens, {}, {}, b, 1, {}, one);
        CAPTURE(seed, b.ranks, b.max_tokens, b.multiple_of, steps, alone.micro_steps);
        // The same search over the same cells: the same count wherever K steps of m allow it.
        if (alone.micro_steps >= steps * b.multiple_of) CHECK(s.micro_steps == alone.micro_steps);
        // The counts differ by m at most, the fuller steps first.
        for (std::size_t step = 1; step < steps; ++step) {
            CHECK(s.micro_batches_in(step) <= s.micro_batches_in(step - 1));
            CHECK(s.micro_batches_in(0) - s.micro_batches_in(step) <= b.multiple_of);
        }
        uneven += s.micro_steps % (steps * b.multiple_of) != 0;
    }
    CAPTURE(uneven);
    CHECK(uneven > 0); // the cases hold plans a single count per step would have rounded up
}

TEST_CASE("token plan: ranks short of records get empty micro-batches with "
          "allow_empty_micro_batches, and only where no plan without them exists",
          "[token_plan]") {
    // 17 records that need a micro-batch each cannot give 8 ranks equal non-empty counts.
    const std::vector<std::uint64_t> tokens(17, 100000);
    const bcl::token_budget b{.ranks = 8, .max_tokens = 131072};
    bcl::token_planner planner;
    micro_slots out(tokens.size(), bcl::micro_slot{9, 9, 9});
    const micro_slots untouched = out;
    const std::string message = bcl_test::bcl_error_message(
        [&] { (void)planner.plan_held(tokens, {}, {}, b, 1, {}, out); });
    CHECK_THAT(message, Contains("17 records") && Contains("allow_empty_micro_batches") &&
                            Contains("padding=\"empty\""));
    CHECK(out == untouched);
    bcl::token_plan_options pad;
    pad.allow_empty_micro_batches = true;
    const auto s = planner.plan_held(tokens, {}, {}, b, 1, pad, out);
    CHECK(s.micro_batches == 3);
    CHECK(s.padding == 3 * 8 - 17);
    std::set<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> cells;
    for (const bcl::micro_slot& slot : out) {
        REQUIRE(slot.micro < 3);
        REQUIRE(slot.rank < 8);
        cells.insert({slot.step, slot.micro, slot.rank});
    }
    CHECK(cells.size() == 17); // each record alone: none of them shares a micro-batch

    // Random small batches: where a plan without empty micro-batches exists the option changes
    // nothing; where none does, every record is planned once, no micro-batch above T, and the
    // summary counts the empty ones.
    std::mt19937_64 gen(44);
    std::size_t padded_plans = 0;
    for (std::size_t trial = 0; trial < bcl_test::random_cases(400); ++trial) {
        const std::size_t r = 1 + gen() % 8;
        const std::size_t steps = 1 + gen() % 3;
        const std::uint64_t t_max = 100;
        std::vector<std::uint64_t> t(1 + gen() % 40);
        for (auto& x : t) x = gen() % 2 == 0 ? 51 + gen() % 50 : 1 + gen() % 100;
        const bcl::token_budget tb{.ranks = r, .max_tokens = t_max, .multiple_of = 1 + gen() % 2};
        micro_slots strict(t.size());
        micro_slots padded(t.size());
        CAPTURE(trial, r, steps, t);
        bool strict_plans = true;
        bcl::token_plan_summary ss;
        try {
            ss = planner.plan_held(t, {}, {}, tb, steps, {}, strict);
        } catch (const bcl::error&) {
            strict_plans = false;
        }
        const auto ps = planner.plan_held(t, {}, {}, tb, steps, pad, padded);
        if (strict_plans) {
            REQUIRE(ps.padding == 0);
            REQUIRE(padded == strict);
            REQUIRE(ps.digest == ss.digest);
            continue;
        }
        ++padded_plans;
        REQUIRE(ps.micro_batches % tb.multiple_of == 0);
        std::map<cell_key, std::uint64_t> used;
        for (std::size_t i = 0; i < t.size(); ++i) {
            REQUIRE(padded[i].step < ps.steps);
            REQUIRE(padded[i].micro < ps.micro_batches);
            REQUIRE(padded[i].rank < r);
            used[{padded[i].step, padded[i].micro, padded[i].rank}] += t[i];
        }
        for (const auto& [cell, sum] : used) REQUIRE(sum <= t_max);
        REQUIRE(ps.padding == ps.micro_steps * r - used.size());
        REQUIRE(ps.padding > 0);
    }
    CHECK(padded_plans >= bcl_test::random_cases(400) / 10);
}

TEST_CASE("token plan: pad_to_multiple_of counts each record as its length rounded up, for the "
          "budget and the default cost",
          "[token_plan]") {
    // Lengths 5, 7 and 9 padded to multiples of 4 are 8, 8 and 12: two fit T = 16 together only
    // as 8 + 8; unpadded, 7 + 9 fit too.
    const std::vector<std::uint64_t> tokens{5, 7, 9, 9};
    const bcl::token_budget b{.ranks = 1, .max_tokens = 16};
    bcl::token_planner planner;
    micro_slots out(tokens.size());
    bcl::token_plan_options cp;
    cp.pad_to_multiple_of = 4;
    const auto s = planner.plan_held(tokens, {}, {}, b, 1, cp, out);
    CHECK(s.tokens == 8 + 8 + 12 + 12);
    CHECK(s.micro_steps == 3); // 12 | 12 | 8 + 8
    std::map<std::uint32_t, std::uint64_t> padded;
    for (std::size_t i = 0; i < tokens.size(); ++i) padded[out[i].micro] += (tokens[i] + 3) / 4 * 4;
    for (const auto& [micro, sum] : padded) CHECK(sum <= 16);
    CHECK(planner.plan_held(tokens, {}, {}, b, 1, {}, out).micro_steps == 2);
    // The default cost is the padded length's: (8 + 8 + 12 + 12) tokens' worth.
    const double padded_cost = 2 * default_cost(8) + 2 * default_cost(12);
    CHECK(s.cost_of(s.total) == Approx(padded_cost).epsilon(1e-9));
    // A record padded above T is refused naming its padded length, or alone with
    // oversized_alone.
    const std::vector<std::uint64_t> near{15, 3};
    micro_slots two(2);
    CHECK(planner
              .plan_held(near, {}, {}, {.ranks = 1, .max_tokens = 16}, 1, {.pad_to_multiple_of = 8},
                         two)
              .micro_steps == 2); // 16 | 8
    CHECK_THAT(bcl_test::bcl_error_message([&] {
                   (void)planner.plan_held(near, {}, {}, {.ranks = 1, .max_tokens = 14}, 1,
                                           {.pad_to_multiple_of = 8}, two);
               }),
               Contains("record 0 has 15 tokens (16 padded to a multiple of 8), above max_tokens "
                        "(14)"));
    // 0 and above T are errors naming the field; nothing is written.
    for (const std::uint64_t bad : {std::uint64_t{0}, std::uint64_t{17}}) {
        micro_slots kept(tokens.size(), bcl::micro_slot{7, 7, 7});
        const micro_slots before = kept;
        CHECK_THAT(bcl_test::bcl_error_message([&] {
                       (void)planner.plan_held(tokens, {}, {}, b, 1, {.pad_to_multiple_of = bad},
                                               kept);
                   }),
                   Contains("pad_to_multiple_of is " + std::to_string(bad)));
        CHECK(kept == before);
        CHECK_THAT(bcl_test::bcl_error_message([&] {
                       (void)planner.plan_stream(tokens, {}, b, 1, 1, true,
                                                 {.pad_to_multiple_of = bad}, kept);
                   }),
                   Contains("pad_to_multiple_of is " + std::to_string(bad)));
        CHECK(kept == before);
    }
}

TEST_CASE("token plan: a stream's last window pads with empty micro-batches where its records "
          "are too few",
          "[token_plan]") {
    // Three records of T tokens left at the stream's end, two ranks: two micro-steps, one empty.
    const std::vector<std::uint64_t> tokens(3, 1000);
    const bcl::token_budget b{.ranks = 2, .max_tokens = 1000};
    bcl::token_planner planner;
    micro_slots out(tokens.size());
    CHECK_THAT(bcl_test::bcl_error_message(
                   [&] { (void)planner.plan_stream(tokens, {}, b, 2, 2, true, {}, out); }),
               Contains("allow_empty_micro_batches"));
    bcl::token_plan_options pad;
    pad.allow_empty_micro_batches = true;
    const auto s = planner.plan_stream(tokens, {}, b, 2, 2, true, pad, out);
    CHECK(s.records == 3);
    CHECK(s.micro_steps == 2);
    CHECK(s.padding == 1);
}

namespace {

// Whether `tokens` pack into `cells` cells of `capacity`, none empty: every assignment, largest
// first, a cell's tokens never above capacity, empty cells tried once.
bool packs_exactly(std::vector<std::uint64_t> tokens, std::size_t cells, std::uint64_t capacity) {
    if (tokens.size() < cells) return false;
    std::sort(tokens.rbegin(), tokens.rend());
    std::vector<std::uint64_t> used(cells, 0);
    std::vector<std::size_t> count(cells, 0);
    const std::function<bool(std::size_t, std::size_t)> place = [&](std::size_t k,
                                                                    std::size_t empty) {
        if (k == tokens.size()) return empty == 0;
        if (tokens.size() - k < empty) return false;
        bool tried_empty = false;
        for (std::size_t c = 0; c < cells; ++c) {
            if (used[c] + tokens[k] > capacity) continue;
            if (count[c] == 0) {
                if (tried_empty) continue;
                tried_empty = true;
            }
            used[c] += tokens[k];
            const bool was_empty = count[c]++ == 0;
            if (place(k + 1, empty - (was_empty ? 1 : 0))) return true;
            --count[c];
            used[c] -= tokens[k];
        }
        return false;
    };
    return place(0, cells);
}

} // namespace

TEST_CASE("token plan: the least count, against exhaustive search on tight batches",
          "[token_plan]") {
    // The batch where first fit needs 3 micro-batches a rank and 2 fit: {491, 489}, {448, 432},
    // {420, 336, 218}, {423, 333, 215}.
    bcl::token_planner planner;
    const std::vector<std::uint64_t> example{420, 491, 423, 432, 489, 333, 218, 215, 448, 336};
    micro_slots out(example.size());
    CHECK(planner.plan_held(example, {}, {}, {.ranks = 2, .max_tokens = 1000}, 1, {}, out)
              .micro_batches == 2);
    // Tight batches: records of T/5 to T/2 tokens, as many as fill a few micro-steps nearly full.
    std::mt19937_64 gen(61);
    std::size_t cases = 0;
    std::size_t least = 0;
    for (std::size_t trial = 0; trial < bcl_test::random_cases(2400); ++trial) {
        const std::size_t r = 1 + gen() % 3;
        const std::uint64_t t_max = 1000;
        std::vector<std::uint64_t> tokens(4 + gen() % 9);
        for (auto& t : tokens) t = 200 + gen() % 301;
        std::vector<double> costs;
        if (gen() % 2 == 0)
            for (std::size_t i = 0; i < tokens.size(); ++i)
                costs.push_back(static_cast<double>(1 + gen() % 100));
        std::size_t best = 0;
        for (std::size_t m = 1; m * r <= tokens.size() && best == 0; ++m)
            if (packs_exactly(tokens, r * m, t_max)) best = m;
        if (best == 0) continue;
        ++cases;
        micro_slots slots(tokens.size());
        const auto s =
            planner.plan_held(tokens, costs, {}, {.ranks = r, .max_tokens = t_max}, 1, {}, slots);
        CAPTURE(trial, r, tokens, best, s.micro_batches);
        REQUIRE(s.micro_batches >= best);
        REQUIRE(s.micro_batches <= best + 1); // never two or more above the least
        least += s.micro_batches == best;
    }
    CAPTURE(cases, least);
    CHECK(cases >= bcl_test::random_cases(2400) * 9 / 10);
    CHECK(least >= cases * 995 / 1000);
}

TEST_CASE("token plan: at the least count, records small against T are balanced to 0.995 and "
          "better",
          "[token_plan]") {
    // 32 ranks, T = 2048, 256 records a rank of lognormal lengths up to T/4: the count is the
    // token bound, where first fit (tokens only) often takes over from LPT; moves and swaps
    // with the cheapest cells win the balance back.
    std::mt19937_64 gen(71);
    bcl::token_planner planner;
    double worst = 1.0;
    for (const double median : {30.0, 60.0, 120.0})
        for (const double sigma : {0.5, 1.0, 1.5}) {
            std::lognormal_distribution<double> length(std::log(median), sigma);
            for (std::size_t trial = 0; trial < bcl_test::random_cases(4); ++trial) {
                std::vector<std::uint64_t> tokens(32 * 256);
                for (auto& t : tokens)
                    t = std::min<std::uint64_t>(512, 1 + static_cast<std::uint64_t>(length(gen)));
                micro_slots out(tokens.size());
                const auto s = planner.plan_held(tokens, {}, {}, {.ranks = 32, .max_tokens = 2048},
                                                 1, {}, out);
                CAPTURE(median, sigma, trial, s.micro_steps, s.micro_steps_bound);
                REQUIRE(s.micro_steps == s.micro_steps_bound);
                worst = std::min(worst, s.efficiency());
            }
        }
    CAPTURE(worst);
    CHECK(worst >= 0.995);
}
