// bcl::detail::plan::padded_layout, as a specification: a batch costs its size times its dearest
// record, and the layout of records in cost order is optimal: on every tiny window its objective
// is the least that exhaustive search finds. Every (step, rank) holds its share, the steps come
// heaviest first with the short step last, the j-th heaviest batch of step s is rank
// (j + s) mod R's, and the totals are the plan's own (the lower bound is the objective).

#include "support/brute_force.hpp"
#include "support/distributions.hpp"
#include "support/plan_checks.hpp"

#include <bcl/detail/plan/geometry.hpp>
#include <bcl/detail/plan/padded_layout.hpp>
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

TEST_CASE("padded_layout: on tiny windows the objective is the optimum of exhaustive search",
          "[plan][padded_layout]") {
    struct tiny {
        bcl::plan_shape shape;
        std::size_t n;
    };
    std::size_t windows = 0;
    for (const tiny t : {tiny{{2, 1, 3}, 6}, tiny{{3, 1, 2}, 6}, tiny{{2, 2, 2}, 8},
                         tiny{{2, 2, 2}, 6}, tiny{{2, 3, 2}, 6}, tiny{{3, 2, 2}, 9},
                         tiny{{2, 2, 3}, 10}, tiny{{4, 2, 1}, 8}, tiny{{1, 3, 3}, 7}})
        for (std::uint64_t seed = 0; seed < 6; ++seed)
            for (const distribution& d : all_distributions()) {
                const ordered_window w = in_cost_order(d.generate(t.n, case_seed(seed)), seed);
                const plan::geometry g = plan::geometry_of(t.n, t.shape.ranks, t.shape.steps,
                                                           t.shape.batch, 1024, "test");
                std::vector<bcl::plan_slot> out(t.n, bcl::plan_slot{~0U, ~0U});
                const plan::layout_totals totals =
                    plan::padded_layout(g, w.cost, w.index, std::span<bcl::plan_slot>(out));
                INFO(fmt::format("{} seed {}: R={} K={} B={} n={}", d.name, seed, t.shape.ranks,
                                 t.shape.steps, t.shape.batch, t.n));
                REQUIRE(check_layout(out, t.n, t.shape) == "");
                const std::vector<double> batches = batch_costs(w.by_input, out, t.shape, true);
                const double got = objective_of(batches, t.shape.ranks);
                CHECK(got ==
                      brute_force_plan_objective(w.by_input, t.shape.ranks, t.shape.batch, true));
                CHECK(static_cast<double>(totals.objective) == got);
                CHECK(totals.lower_bound == totals.objective);
                ++windows;
            }
    CHECK(windows == 9 * 6 * all_distributions().size());
}

TEST_CASE("padded_layout: steps heaviest first, the short step last, the j-th heaviest batch of "
          "step s on rank (j + s) mod R, and the totals the plan's own",
          "[plan][padded_layout]") {
    for (std::uint64_t i = 0; i < 80; ++i) {
        const auto [shape, n] = window_case_of(i, {.ranks = 8, .steps = 5, .batch = 9});
        const plan::geometry g =
            plan::geometry_of(n, shape.ranks, shape.steps, shape.batch, 1 << 20, "test");
        for (const distribution& d : all_distributions()) {
            const ordered_window w = in_cost_order(d.generate(n, case_seed(i)), i);
            std::vector<bcl::plan_slot> out(n, bcl::plan_slot{~0U, ~0U});
            const plan::layout_totals totals =
                plan::padded_layout(g, w.cost, w.index, std::span<bcl::plan_slot>(out));
            INFO(fmt::format("{} case {}: R={} K={} B={} n={}", d.name, i, shape.ranks, shape.steps,
                             shape.batch, n));
            REQUIRE(check_layout(out, n, shape) == "");
            const std::vector<double> batches = batch_costs(w.by_input, out, shape, true);
            CHECK(check_order(batches, n, shape) == "");
            double total = 0;
            for (const double b : batches) total += b;
            CHECK(static_cast<double>(totals.total) == total);
            CHECK(static_cast<double>(totals.objective) == objective_of(batches, shape.ranks));
            CHECK(static_cast<double>(totals.heaviest) ==
                  *std::max_element(batches.begin(), batches.end()));
        }
    }
}
