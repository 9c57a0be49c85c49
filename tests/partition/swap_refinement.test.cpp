// bcl/partition/swap_refinement.hpp, as a specification: swap_refinement improves a partition in
// place by exchanging items between packs, so pack sizes never change and the heaviest pack never
// gets heavier; it stops as soon as the heaviest pack meets the lower bound (touching nothing
// more), uses 2-for-2 exchanges only while refinement_effort allows, and depends only on the
// costs and the start. A pack_of that is not a partition of the shape is a bcl::error naming the
// item and the pack. refined<P> is P followed by that pass.

#include "../support/brute_force.hpp"
#include "../support/distributions.hpp"
#include "../support/error_message.hpp"

#include <bcl/partition/snake.hpp>
#include <bcl/partition/swap_refinement.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace {

using bcl::detail::swap_refinement;

double max_of(const std::vector<double>& v) {
    return *std::max_element(v.begin(), v.end());
}

} // namespace

TEST_CASE("swap_refinement: one swap takes {6,5 | 4,1} to the bound 9 and stops there",
          "[partition][swap_refinement]") {
    // Loads 11 and 5, gap 6. Swaps: 6<->4 and 5<->1 leave 9 and 7 (the best, half the gap is
    // 3); the bound is 9 (6 and 5 apart leave 4 and 1 as partners: 5 + 4), so one swap ends it.
    swap_refinement refine;
    const std::vector<double> costs{6, 5, 4, 1};
    std::vector<std::uint32_t> pack_of{0, 0, 1, 1};
    const bcl::partition_summary s = refine(costs, {2, 2}, pack_of);
    std::vector<double> loads = bcl_test::pack_sums(costs, pack_of, 2);
    std::sort(loads.begin(), loads.end());
    CHECK(loads == std::vector<double>{7.0, 9.0});
    CHECK(s.heaviest == 9.0);
    CHECK(s.lower_bound == 9.0);
}

TEST_CASE("swap_refinement: a partition whose heaviest pack meets the bound is left exactly as it "
          "was",
          "[partition][swap_refinement]") {
    // {4,4} 8, {6,2} 8, {3,2} 5. The bound is 8 (6 needs a partner, at least 2), so nothing
    // moves, though a swap of {4,4} with {3,2} would even those two out.
    swap_refinement refine;
    const std::vector<double> costs{4, 4, 6, 2, 3, 2};
    std::vector<std::uint32_t> pack_of{0, 0, 1, 1, 2, 2};
    const bcl::partition_summary s = refine(costs, {3, 2}, pack_of);
    CHECK(pack_of == std::vector<std::uint32_t>{0, 0, 1, 1, 2, 2});
    CHECK(s.heaviest == 8.0);
    CHECK(s.lower_bound == 8.0);
}

TEST_CASE("swap_refinement: when no single swap helps, a 2-for-2 exchange does, but only with "
          "phase 2 allowed",
          "[partition][swap_refinement]") {
    // {20,13,5,4} = 42 against {17,9,7,6} = 39, gap 3: every difference x - y is <= 0 or >= 3,
    // so no single swap lowers 42. Exchanging {13,4} for {9,7} moves 1: 41 and 40, the optimum
    // (the total is 81). The bound is 40.5, so phase 2 is entitled to run.
    const std::vector<double> costs{20, 13, 5, 4, 17, 9, 7, 6};
    const std::vector<std::uint32_t> start{0, 0, 0, 0, 1, 1, 1, 1};

    std::vector<std::uint32_t> pack_of = start;
    swap_refinement full;
    CHECK(full(costs, {2, 4}, pack_of).heaviest == 41.0);
    CHECK(bcl_test::check_fill(pack_of, {4, 4}) == "");
    CHECK(bcl_test::brute_force_min_heaviest(costs, bcl_test::window_capacities(8, 2, 4)) == 41.0);

    pack_of = start;
    swap_refinement singles_only{bcl::refinement_effort{.above = 0.0, .searches_per_pack = 0}};
    CHECK(singles_only(costs, {2, 4}, pack_of).heaviest == 42.0);
    CHECK(pack_of == start);

    pack_of = start; // the gap 42/40.5 - 1 is under 4%: an `above` of 5% leaves it alone
    swap_refinement lazy{bcl::refinement_effort{.above = 0.05, .searches_per_pack = 4}};
    CHECK(lazy(costs, {2, 4}, pack_of).heaviest == 42.0);
}

TEST_CASE("swap_refinement: from any start, pack sizes stay, the heaviest pack never rises, and "
          "the same start gives the same result",
          "[partition][swap_refinement]") {
    swap_refinement refine;
    std::mt19937_64 gen(17);
    for (const std::size_t k : {2U, 3U, 8U})
        for (const std::size_t b : {1U, 2U, 5U, 12U})
            for (const auto& dist : bcl_test::all_distributions()) {
                const std::size_t n = k * b - (b > 1 ? 1 : 0);
                const std::vector<double> costs = dist.generate(n, gen());
                std::vector<std::uint32_t> start(n);
                for (std::size_t s = 0; s < n; ++s) start[s] = static_cast<std::uint32_t>(s / b);
                std::shuffle(start.begin(), start.end(), gen);
                std::vector<std::uint32_t> once = start;
                const bcl::partition_summary s = refine(costs, {k, b}, once);
                INFO("K=" << k << " B=" << b << " n=" << n << " " << dist.name);
                CHECK(bcl_test::check_fill(once, bcl_test::window_capacities(n, k, b)) == "");
                CHECK(max_of(bcl_test::pack_sums(costs, once, k)) <=
                      max_of(bcl_test::pack_sums(costs, start, k)) * (1 + 1e-12));
                CHECK(s.heaviest == Approx(max_of(bcl_test::pack_sums(costs, once, k))));
                std::vector<std::uint32_t> again = start;
                refine(costs, {k, b}, again);
                CHECK(again == once);
            }
}

TEST_CASE("swap_refinement: a pack_of that is not a partition of the shape is a bcl::error naming "
          "the item and the pack",
          "[partition][swap_refinement][errors]") {
    swap_refinement refine;
    const std::vector<double> costs{5, 4, 3, 2, 1, 0};
    std::vector<std::uint32_t> out_of_range{0, 0, 1, 1, 2, 7};
    CHECK_THAT(bcl_test::bcl_error_message([&] {
                   refine(costs, {3, 2}, out_of_range);
               }),
               Catch::Contains("swap_refinement") && Catch::Contains("item 5") &&
                   Catch::Contains("pack 7"));
    std::vector<std::uint32_t> overfull{1, 1, 1, 0, 0, 2};
    CHECK_THAT(bcl_test::bcl_error_message([&] {
                   refine(costs, {3, 2}, overfull);
               }),
               Catch::Contains("swap_refinement") && Catch::Contains("pack 1"));
    std::vector<std::uint32_t> five(5);
    CHECK_THROWS_AS(refine(costs, {3, 2}, five), bcl::error);
}

TEST_CASE("swap_refinement: refined<P> is P followed by swap_refinement, with both parts at hand",
          "[partition][swap_refinement]") {
    bcl::detail::refined<bcl::detail::snake_partitioner> composed;
    bcl::detail::snake_partitioner snake;
    swap_refinement refine;
    std::uint64_t counter = 12000;
    for (const std::size_t k : {2U, 5U, 16U})
        for (const std::size_t b : {2U, 7U})
            for (const auto& dist : bcl_test::all_distributions()) {
                const std::vector<double> costs =
                    dist.generate(k * b - 1, bcl_test::case_seed(++counter));
                std::vector<std::uint32_t> by_hand(costs.size());
                snake(costs, {k, b}, by_hand);
                const bcl::partition_summary want = refine(costs, {k, b}, by_hand);
                std::vector<std::uint32_t> together(costs.size());
                const bcl::partition_summary got = composed(costs, {k, b}, together);
                INFO("K=" << k << " B=" << b << " " << dist.name);
                CHECK(together == by_hand);
                CHECK(got.heaviest == want.heaviest);
                CHECK(got.lower_bound == want.lower_bound);
            }
    // The effort handed to the constructor is the one the refinement part uses.
    bcl::detail::refined<bcl::detail::snake_partitioner> plain{
        {}, swap_refinement{bcl::refinement_effort{.above = 0.5, .searches_per_pack = 0}}};
    CHECK(plain.refinement().effort.searches_per_pack == 0);
    CHECK(plain.refinement().effort.above == 0.5);
    static_cast<void>(plain.first());
}
