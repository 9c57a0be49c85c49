// bcl/partition/detail/ranked_costs.hpp, as a specification: ranked_costs::assign ranks a window's
// costs high to low with ties to the lower position, exactly (also for costs closer together than
// its radix key can tell apart), keeps the input values, their prefix sums and the smallest
// positive difference between two costs, and rejects a negative, NaN or too large cost with a
// bcl::error naming the caller, the position and the value. check_partition_shape accepts exactly
// the shapes in which n items fill every pack but the last. Every expectation is a stable sort of
// the positions, or a hand-worked case.

#include "../../support/distributions.hpp"
#include "../../support/error_message.hpp"

#include <bcl/partition/detail/ranked_costs.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using bcl::detail::check_partition_shape;
using bcl::detail::ranked_costs;

/// Positions by cost high to low, ties to the lower position.
std::vector<std::uint32_t> stable_ranking(const std::vector<double>& costs) {
    std::vector<std::uint32_t> order(costs.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::uint32_t>(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return costs[a] > costs[b]; });
    return order;
}

/// The smallest positive difference between two costs, by comparing every pair.
double smallest_gap(const std::vector<double>& costs) {
    double best = std::numeric_limits<double>::infinity();
    for (const double x : costs)
        for (const double y : costs)
            if (x > y) best = std::min(best, x - y);
    return best;
}

/// Checks everything assign promises against the reference ranking.
void check_ranked(const ranked_costs& ranked, const std::vector<double>& costs) {
    const std::vector<std::uint32_t> order = stable_ranking(costs);
    REQUIRE(ranked.size() == costs.size());
    REQUIRE(ranked.prefix().size() == costs.size() + 1);
    bool same_order = true;
    bool prefix_ok = ranked.prefix()[0] == 0.0;
    double sum = 0.0;
    for (std::size_t r = 0; r < costs.size(); ++r) {
        same_order = same_order && ranked.position(r) == order[r] &&
                     ranked.cost(r) == costs[order[r]] && ranked.desc()[r] == costs[order[r]];
        sum += costs[order[r]];
        prefix_ok = prefix_ok && ranked.prefix()[r + 1] == Approx(sum).epsilon(1e-12);
    }
    CHECK(same_order);
    CHECK(prefix_ok);
}

} // namespace

TEST_CASE("ranked_costs: a hand-ranked window: dearest first, ties to the lower position",
          "[partition][ranked_costs]") {
    ranked_costs ranked;
    const std::vector<double> costs{3, 7, 3, 0, 7, 1};
    ranked.assign(costs, "test");
    // 7 (pos 1), 7 (pos 4), 3 (pos 0), 3 (pos 2), 1 (pos 5), 0 (pos 3).
    const std::vector<std::uint32_t> positions{1, 4, 0, 2, 5, 3};
    for (std::size_t r = 0; r < 6; ++r) CHECK(ranked.position(r) == positions[r]);
    CHECK(std::vector<double>(ranked.desc().begin(), ranked.desc().end()) ==
          std::vector<double>{7, 7, 3, 3, 1, 0});
    CHECK(std::vector<double>(ranked.prefix().begin(), ranked.prefix().end()) ==
          std::vector<double>{0, 7, 14, 17, 20, 21, 21});
    CHECK(ranked.smallest_step() == 1.0); // 1 - 0; the ties 7-7 and 3-3 do not count
}

TEST_CASE("ranked_costs: the ranking is the stable sort's on every distribution and size, on "
          "both sides of the insertion-sort limit",
          "[partition][ranked_costs]") {
    ranked_costs ranked; // reused: windows grow and shrink
    std::uint64_t counter = 14000;
    for (const std::size_t n : {1U, 2U, 63U, 64U, 65U, 1000U, 3U, 4096U})
        for (const auto& dist : bcl_test::all_distributions()) {
            const std::vector<double> costs = dist.generate(n, bcl_test::case_seed(++counter));
            ranked.assign(costs, "test");
            INFO("n=" << n << " " << dist.name);
            check_ranked(ranked, costs);
            if (n <= 1000) CHECK(ranked.smallest_step() == smallest_gap(costs));
        }
}

TEST_CASE("ranked_costs: costs closer together than the radix key resolves are still ranked "
          "exactly",
          "[partition][ranked_costs]") {
    // The key keeps 12 mantissa bits: costs within about 2.4e-4 of each other share it.
    ranked_costs ranked;
    std::mt19937_64 gen(3);
    SECTION("a few near-ties among spread costs") {
        std::vector<double> costs = bcl_test::lognormal_costs(500, 8);
        for (std::size_t i = 0; i + 1 < costs.size(); i += 50) costs[i + 1] = costs[i] * (1 + 1e-9);
        std::shuffle(costs.begin(), costs.end(), gen);
        ranked.assign(costs, "test");
        check_ranked(ranked, costs);
    }
    SECTION("every cost crowded within 1e-6 of 1000, in random order") {
        std::vector<double> costs(2000);
        for (std::size_t i = 0; i < costs.size(); ++i)
            costs[i] = 1000.0 + 1e-9 * static_cast<double>(i % 997);
        std::shuffle(costs.begin(), costs.end(), gen);
        ranked.assign(costs, "test");
        check_ranked(ranked, costs);
        CHECK(ranked.smallest_step() == Approx(1e-9).epsilon(1e-3));
    }
    SECTION("all equal: position order, and no step") {
        const std::vector<double> costs(300, 5.0);
        ranked.assign(costs, "test");
        check_ranked(ranked, costs);
        CHECK(ranked.smallest_step() == std::numeric_limits<double>::infinity());
    }
}

TEST_CASE("ranked_costs: a negative, NaN, infinite or too large cost is a bcl::error naming the "
          "caller, the position and the value; -0.0 and bcl::max_estimate are fine",
          "[partition][ranked_costs][errors]") {
    ranked_costs ranked;
    for (const std::size_t n : {5U, 100U}) {
        for (const double bad : {-1.0, -1e-300, std::nan(""), HUGE_VAL, 1.0001e120}) {
            std::vector<double> costs(n, 1.0);
            costs[3] = bad;
            INFO("n=" << n << " value " << bad);
            const std::string message =
                bcl_test::bcl_error_message([&] { ranked.assign(costs, "my_partitioner"); });
            CHECK_THAT(message, Catch::Contains("my_partitioner") && Catch::Contains("cost 3"));
        }
        std::vector<double> costs(n, 1.0);
        costs[1] = -0.0;
        costs[2] = bcl::max_estimate;
        ranked.assign(costs, "test");
        CHECK(ranked.cost(0) == bcl::max_estimate);
        CHECK(ranked.cost(n - 1) == 0.0);
        CHECK(!std::signbit(ranked.cost(n - 1))); // ranked as +0.0
    }
    const std::vector<double> one{-2.5};
    CHECK_THAT(bcl_test::bcl_error_message([&] { ranked.assign(one, "x"); }),
               Catch::Contains("-2.5"));
}

TEST_CASE("ranked_costs: check_partition_shape accepts n items that fill every pack but the last, "
          "and names the caller otherwise",
          "[partition][ranked_costs][errors]") {
    const auto message = [](std::size_t n, bcl::pack_shape shape, std::size_t out) {
        return bcl_test::bcl_error_message([&] { check_partition_shape("who", n, shape, out); });
    };
    CHECK(message(6, {2, 3}, 6) == "<no exception>");
    CHECK(message(4, {2, 3}, 4) == "<no exception>"); // last pack holds 1
    CHECK(message(0, {0, 0}, 0) == "<no exception>"); // an empty window fits anything
    CHECK_THAT(message(6, {2, 3}, 5), Catch::Contains("who") && Catch::Contains("5 slots"));
    CHECK_THAT(message(7, {2, 3}, 7), Catch::Contains("who") && Catch::Contains("do not fill"));
    CHECK_THAT(message(3, {2, 3}, 3), Catch::Contains("do not fill")); // last pack empty
    CHECK_THAT(message(3, {0, 3}, 3), Catch::Contains("do not fill"));
    CHECK_THAT(message(3, {3, 0}, 3), Catch::Contains("do not fill"));
    // K * B overflowing a size_t is no way around the check: 3 * 2^63 wraps to 2^63 and
    // 2 * 2^63 to 0, which would let 5 items "fit".
    const std::size_t half = std::size_t{1} << 63;
    CHECK_THAT(message(5, {3, half}, 5), Catch::Contains("do not fill"));
    // Positions are 32-bit: a window above 2^32 items is refused (checked without allocating).
    const std::size_t big = (std::size_t{1} << 32) + 1;
    CHECK_THAT(message(big, {2, big / 2 + 1}, big), Catch::Contains("too large"));
}
