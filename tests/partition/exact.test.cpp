// bcl/partition/exact.hpp, as a specification: exact_partitioner returns a partition of a window
// of at most max_items items whose heaviest pack is the least possible, every pack holding exactly
// its capacity, and reports that optimum as its own lower bound (the search proved it). Larger
// windows are refused with a bcl::error naming the size and the limit. Checked against plain
// enumeration of every labelling and against hand-solved windows, above all those where the
// default heuristic it starts from is not optimal.

#include "../support/brute_force.hpp"
#include "../support/distributions.hpp"
#include "../support/error_message.hpp"

#include <bcl/partition/exact.hpp>
#include <bcl/partition/lpt_swap.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace {

using bcl::detail::exact_partitioner;

double heaviest_of(const std::vector<double>& costs, const std::vector<std::uint32_t>& pack_of,
                   std::size_t k) {
    std::vector<double> loads(k, 0.0);
    for (std::size_t i = 0; i < costs.size(); ++i) loads[pack_of[i]] += costs[i];
    return *std::max_element(loads.begin(), loads.end());
}

} // namespace

TEST_CASE("exact: hand-solved windows", "[partition][exact]") {
    exact_partitioner exact;
    SECTION("{8,7,6,5,4} in packs of 3 and 2: {6,5,4} {8,7}, 15") {
        const std::vector<double> costs{8, 7, 6, 5, 4};
        std::vector<std::uint32_t> pack_of(5);
        const bcl::partition_summary s = exact(costs, {2, 3}, pack_of);
        CHECK(pack_of == std::vector<std::uint32_t>{1, 1, 0, 0, 0});
        CHECK(s.heaviest == 15.0);
        CHECK(s.lower_bound == 15.0);
    }
    SECTION("{11,10,8,2,2,2,2,1,0}, K=3, B=3: 13") {
        // 11 and 10 apart, with 0+2 and 1+2: {11,2,0} {10,2,1} {8,2,2}.
        const std::vector<double> costs{11, 10, 8, 2, 2, 2, 2, 1, 0};
        std::vector<std::uint32_t> pack_of(9);
        const bcl::partition_summary s = exact(costs, {3, 3}, pack_of);
        CHECK(heaviest_of(costs, pack_of, 3) == 13.0);
        CHECK(s.heaviest == 13.0);
        CHECK(pack_of[0] != pack_of[1]);
    }
}

TEST_CASE("exact: on every window of up to 8 items its heaviest pack is the least over all "
          "labellings",
          "[partition][exact]") {
    exact_partitioner exact;
    std::uint64_t counter = 8100;
    std::size_t windows = 0;
    for (std::size_t k = 1; k <= 4; ++k)
        for (std::size_t b = 1; b <= 4 && k * b <= 8; ++b)
            for (std::size_t n = (k - 1) * b + 1; n <= k * b; ++n)
                for (const auto& dist : bcl_test::all_distributions())
                    for (int rep = 0; rep < 3; ++rep) {
                        const std::vector<double> costs =
                            dist.generate(n, bcl_test::case_seed(++counter));
                        const auto caps = bcl_test::window_capacities(n, k, b);
                        std::vector<std::uint32_t> pack_of(n, 50);
                        const bcl::partition_summary s = exact(costs, {k, b}, pack_of);
                        INFO("K=" << k << " B=" << b << " n=" << n << " " << dist.name);
                        REQUIRE(bcl_test::check_fill(pack_of, caps) == "");
                        const double best = bcl_test::plain_enumeration_min_heaviest(costs, caps);
                        CHECK(heaviest_of(costs, pack_of, k) == Approx(best).epsilon(1e-12));
                        CHECK(s.heaviest == Approx(best).epsilon(1e-12));
                        CHECK(s.lower_bound == s.heaviest);
                        ++windows;
                    }
    CHECK(windows > 500);
}

TEST_CASE("exact: where the default heuristic stops above the optimum, the search finds the "
          "optimum",
          "[partition][exact]") {
    // Only windows the heuristic gets wrong show that the search runs at all.
    exact_partitioner exact;
    bcl::lpt_swap_partitioner heuristic;
    std::size_t improved = 0;
    std::uint64_t counter = 8800;
    for (int rep = 0; rep < 400 && improved < 25; ++rep)
        for (const auto& [k, b] : {std::pair<std::size_t, std::size_t>{3, 4}, {4, 3}, {2, 6}}) {
            std::vector<double> costs =
                bcl_test::pareto_costs(k * b, bcl_test::case_seed(++counter));
            for (double& c : costs) c = std::round(c); // whole numbers: exact ties are common
            std::vector<std::uint32_t> pack_of(costs.size());
            const double start = heuristic(costs, {k, b}, pack_of).heaviest;
            const double best = bcl_test::brute_force_min_heaviest(
                costs, bcl_test::window_capacities(costs.size(), k, b));
            if (start <= best) continue;
            ++improved;
            const bcl::partition_summary s = exact(costs, {k, b}, pack_of);
            INFO("K=" << k << " B=" << b << " case " << counter);
            CHECK(bcl_test::check_fill(pack_of, bcl_test::window_capacities(k * b, k, b)) == "");
            CHECK(heaviest_of(costs, pack_of, k) == best);
            CHECK(s.heaviest == best);
        }
    CHECK(improved > 0);
}

TEST_CASE("exact: a window above max_items is refused with a bcl::error naming both sizes, and "
          "the limit is adjustable",
          "[partition][exact][errors]") {
    exact_partitioner exact;
    CHECK(exact.max_items == 20);
    const std::vector<double> costs = bcl_test::lognormal_costs(21, 4);
    std::vector<std::uint32_t> pack_of(21);
    CHECK_THAT(bcl_test::bcl_error_message([&] {
                   exact(costs, {7, 3}, pack_of);
               }),
               Catch::Contains("exact_partitioner") && Catch::Contains("21 items") &&
                   Catch::Contains("max_items = 20"));
    exact.max_items = 4;
    const std::vector<double> five{1, 2, 3, 4, 5};
    std::vector<std::uint32_t> five_ids(5);
    CHECK_THROWS_AS(exact(five, {3, 2}, five_ids), bcl::error);
    exact.max_items = 5;
    const bcl::partition_summary s = exact(five, {3, 2}, five_ids);
    CHECK(s.heaviest == 5.0); // {5} alone or {4,1} {3,2}: 5 is the largest item
    std::vector<double> negative{1, 2, -2, 4};
    std::vector<std::uint32_t> four(4);
    CHECK_THAT(bcl_test::bcl_error_message([&] {
                   exact(negative, {2, 2}, four);
               }),
               Catch::Contains("exact_partitioner") && Catch::Contains("cost 2"));
    const bcl::partition_summary none = exact({}, {1, 1}, {});
    CHECK(none.heaviest == 0.0);
}
