// bcl/partition/snake.hpp, as a specification: snake_partitioner sorts the items high to low
// (ties by position) and deals them in rows of K, left to right on even rows and right to left on
// odd ones, so pack 0 gets ranks 0, 2K-1, 2K, 4K-1, ... and every pack one item of each row. A
// short window is dealt as if full, with zero-cost placeholders gathered into the last pack. It
// promises no bound on the gap; its summary reports the heaviest pack and the window's lower
// bound. Bad input is a bcl::error naming the partitioner.

#include "../support/brute_force.hpp"
#include "../support/distributions.hpp"
#include "../support/error_message.hpp"

#include <bcl/partition/snake.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace {

using bcl::detail::snake_partitioner;

/// The positions of the items by cost high to low, ties by position.
std::vector<std::size_t> rank_order(const std::vector<double>& costs) {
    std::vector<std::size_t> order(costs.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return costs[a] > costs[b]; });
    return order;
}

/// Snake dealing of a full window written from its description: rank r is in row r / K, column
/// r % K, and odd rows run right to left.
std::vector<std::uint32_t> reference_snake(const std::vector<double>& costs, std::size_t k) {
    const std::vector<std::size_t> order = rank_order(costs);
    std::vector<std::uint32_t> pack_of(costs.size());
    for (std::size_t r = 0; r < order.size(); ++r) {
        const std::size_t row = r / k;
        const std::size_t column = r % k;
        pack_of[order[r]] = static_cast<std::uint32_t>(row % 2 == 0 ? column : k - 1 - column);
    }
    return pack_of;
}

} // namespace

TEST_CASE("snake: hand-dealt windows", "[partition][snake]") {
    snake_partitioner snake;
    SECTION("9 items in 3 packs of 3, given out of order") {
        // Ranks 0..8 are the costs 9..1. Row 0 deals ranks 0,1,2 to p0,p1,p2; row 1 deals 3,4,5
        // to p2,p1,p0; row 2 deals 6,7,8 to p0,p1,p2. p0 = 9+4+3 = 16, p1 = 8+5+2 = 15,
        // p2 = 7+6+1 = 14.
        const std::vector<double> costs{1, 9, 5, 7, 3, 8, 2, 6, 4};
        std::vector<std::uint32_t> pack_of(9);
        const bcl::partition_summary s = snake(costs, {3, 3}, pack_of);
        CHECK(pack_of == std::vector<std::uint32_t>{2, 0, 1, 2, 0, 1, 1, 2, 0});
        CHECK(s.heaviest == 16.0);
    }
    SECTION("a short window whose placeholder already falls in the last pack") {
        // {5,4,3,2,1} in packs of 3 and 2, dealt as six: p0 gets ranks 0,3,4 (5+2+1 = 8), p1
        // ranks 1,2 and the placeholder 5 (4+3 = 7), which is simply dropped.
        const std::vector<double> costs{5, 4, 3, 2, 1};
        std::vector<std::uint32_t> pack_of(5);
        const bcl::partition_summary s = snake(costs, {2, 3}, pack_of);
        CHECK(pack_of == std::vector<std::uint32_t>{0, 1, 1, 0, 0});
        CHECK(s.heaviest == 8.0);
    }
    SECTION("a short window whose placeholder falls in pack 0: that pack becomes the last") {
        // {3,2,1} in packs of 2 and 1, dealt as four: p0 gets rank 0 and placeholder 3, p1 ranks
        // 1,2. The pack holding the placeholder is the short one, and the short one is the last:
        // {3} is pack 1, {2,1} pack 0.
        const std::vector<double> costs{3, 2, 1};
        std::vector<std::uint32_t> pack_of(3);
        snake(costs, {2, 2}, pack_of);
        CHECK(pack_of == std::vector<std::uint32_t>{1, 0, 0});
    }
}

TEST_CASE("snake: a full window is dealt exactly as the serpentine description says, one item of "
          "every row of K to each pack",
          "[partition][snake]") {
    snake_partitioner snake; // reused across windows of every size, as a balancer does
    std::uint64_t counter = 300;
    for (const std::size_t k : {1U, 2U, 3U, 8U, 33U})
        for (const std::size_t b : {1U, 2U, 5U, 16U})
            for (const auto& dist : bcl_test::all_distributions()) {
                const std::vector<double> costs =
                    dist.generate(k * b, bcl_test::case_seed(++counter));
                std::vector<std::uint32_t> pack_of(costs.size());
                snake(costs, {k, b}, pack_of);
                INFO("K=" << k << " B=" << b << " " << dist.name);
                CHECK(pack_of == reference_snake(costs, k));
                // One item of each row per pack.
                const std::vector<std::size_t> order = rank_order(costs);
                for (std::size_t row = 0; row < b; ++row) {
                    std::vector<int> seen(k, 0);
                    for (std::size_t c = 0; c < k; ++c) ++seen[pack_of[order[row * k + c]]];
                    CHECK(std::count(seen.begin(), seen.end(), 1) ==
                          static_cast<std::ptrdiff_t>(k));
                }
            }
}

TEST_CASE("snake: a short window still fills every pack to its capacity, and the summary is "
          "honest",
          "[partition][snake]") {
    snake_partitioner snake;
    std::uint64_t counter = 900;
    for (const std::size_t k : {2U, 3U, 5U})
        for (const std::size_t b : {2U, 3U})
            for (std::size_t n = (k - 1) * b + 1; n <= k * b; ++n)
                for (const auto& dist : bcl_test::all_distributions()) {
                    const std::vector<double> costs =
                        dist.generate(n, bcl_test::case_seed(++counter));
                    std::vector<std::uint32_t> pack_of(n, 1000);
                    const bcl::partition_summary s = snake(costs, {k, b}, pack_of);
                    INFO("K=" << k << " B=" << b << " n=" << n << " " << dist.name);
                    const auto caps = bcl_test::window_capacities(n, k, b);
                    REQUIRE(bcl_test::check_fill(pack_of, caps) == "");
                    std::vector<double> loads(k, 0.0);
                    for (std::size_t i = 0; i < n; ++i) loads[pack_of[i]] += costs[i];
                    CHECK(s.heaviest == Approx(*std::max_element(loads.begin(), loads.end())));
                    if (n <= 12) {
                        const double optimum = bcl_test::brute_force_min_heaviest(costs, caps);
                        CHECK(s.lower_bound <= optimum * (1 + 1e-12));
                    }
                }
}

TEST_CASE("snake: bad input is a bcl::error naming snake_partitioner",
          "[partition][snake][errors]") {
    snake_partitioner snake;
    std::vector<double> costs{1, 2, 3, 4, 5, 6};
    std::vector<std::uint32_t> pack_of(6);
    costs[5] = 2e120; // above bcl::max_estimate
    CHECK_THAT(bcl_test::bcl_error_message([&] {
                   snake(costs, {3, 2}, pack_of);
               }),
               Catch::Contains("snake_partitioner") && Catch::Contains("cost 5"));
    costs[5] = 6;
    CHECK_THAT(bcl_test::bcl_error_message([&] {
                   snake(costs, {2, 2}, pack_of);
               }),
               Catch::Contains("snake_partitioner") && Catch::Contains("do not fill"));
}
