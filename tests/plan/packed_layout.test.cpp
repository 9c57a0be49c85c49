// bcl::detail::plan::packed_layout, as a specification of run()'s last steps: every (step, rank)
// holds its share; the steps come heaviest first with the short step last; the j-th heaviest
// pack of step s goes to rank (j + s) mod R; the totals are the plan's own; the levelled plan is
// never heavier than the flat one (step 7), and a window of one step never heavier than the
// Karmarkar-Karp groups of its records (step 8). The checks read the slots, not the layout.

#include "support/distributions.hpp"
#include "support/plan_checks.hpp"

#include <bcl/detail/plan/geometry.hpp>
#include <bcl/detail/plan/kk_groups.hpp>
#include <bcl/detail/plan/packed_layout.hpp>
#include <bcl/global_plan.hpp>

#include <catch2/catch.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

using namespace bcl_test;

namespace plan = bcl::detail::plan;

TEST_CASE("packed_layout: steps heaviest first, the short step last, the j-th heaviest pack of "
          "step s on rank (j + s) mod R, and the totals the plan's own",
          "[plan][packed_layout]") {
    plan::packed_layout layout; // one layout for every window: its scratch must not leak
    std::size_t one_step = 0;
    for (std::uint64_t i = 0; i < 100; ++i) {
        const auto [shape, n] = window_case_of(i, {.ranks = 8, .steps = 5, .batch = 9});
        const plan::geometry g =
            plan::geometry_of(n, shape.ranks, shape.steps, shape.batch, 1 << 20, "test");
        one_step += g.steps == 1 ? 1 : 0;
        for (const distribution& d : all_distributions()) {
            const ordered_window w = in_cost_order(d.generate(n, case_seed(i)), i);
            std::uint64_t total = 0;
            for (const std::uint64_t c : w.cost) total += c;
            for (const bool levelling : {true, false}) {
                std::vector<bcl::plan_slot> out(n, bcl::plan_slot{~0U, ~0U});
                const plan::layout_totals totals =
                    layout.run(g, w.cost, w.index, std::span<bcl::plan_slot>(out), levelling);
                INFO(fmt::format("{} case {}: R={} K={} B={} n={} levelling={}", d.name, i,
                                 shape.ranks, shape.steps, shape.batch, n, levelling));
                REQUIRE(check_layout(out, n, shape) == "");
                const std::vector<double> batches = batch_costs(w.by_input, out, shape, false);
                CHECK(check_order(batches, n, shape) == "");
                CHECK(totals.total == total);
                CHECK(static_cast<double>(totals.objective) == objective_of(batches, shape.ranks));
                CHECK(static_cast<double>(totals.heaviest) ==
                      *std::max_element(batches.begin(), batches.end()));
                CHECK(totals.lower_bound <= totals.objective);
            }
        }
    }
    CHECK(one_step > 0);
}

TEST_CASE("packed_layout: levelling never yields a heavier plan than dealing flat, and a window "
          "of one step is never heavier than its Karmarkar-Karp groups",
          "[plan][packed_layout]") {
    plan::packed_layout layout;
    plan::kk_groups kk;
    std::size_t one_step = 0;
    for (std::uint64_t i = 0; i < 150; ++i) {
        const auto [shape, n] = window_case_of(i + 300, {.ranks = 8, .steps = 4, .batch = 8});
        const plan::geometry g =
            plan::geometry_of(n, shape.ranks, shape.steps, shape.batch, 1 << 20, "test");
        for (const distribution& d : all_distributions()) {
            const ordered_window w = in_cost_order(d.generate(n, case_seed(i)), i);
            INFO(fmt::format("{} case {}: R={} K={} B={} n={}", d.name, i, shape.ranks, shape.steps,
                             shape.batch, n));
            std::vector<bcl::plan_slot> out(n);
            const std::uint64_t levelled =
                layout.run(g, w.cost, w.index, std::span<bcl::plan_slot>(out), true).objective;
            const std::uint64_t flat =
                layout.run(g, w.cost, w.index, std::span<bcl::plan_slot>(out), false).objective;
            CHECK(levelled <= flat);
            if (g.steps != 1) continue;
            ++one_step;
            // The groups by input index, as the layout splits them; a group's sum is its load.
            std::vector<std::uint64_t> by_input(n);
            for (std::size_t at = 0; at < n; ++at) by_input[w.index[at]] = w.cost[at];
            kk.split(by_input, shape.ranks);
            CHECK(levelled <= kk.load(0));
            CHECK(flat <= kk.load(0));
        }
    }
    CHECK(one_step > 0);
}
