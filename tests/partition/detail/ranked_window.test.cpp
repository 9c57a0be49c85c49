// bcl/partition/detail/ranked_window.hpp, as a specification: ranked_window::start checks a
// partitioner's call (shape, output length, costs) under the partitioner's name, ranks the costs,
// and returns the window's lower bound, or nothing for an empty window. It leaves the pack table
// alone: resetting it is the caller's choice.

#include "../../support/brute_force.hpp"
#include "../../support/distributions.hpp"
#include "../../support/error_message.hpp"

#include <bcl/partition/detail/ranked_window.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

using bcl::detail::ranked_window;

TEST_CASE("ranked_window: start ranks the costs and returns a lower bound: 11 for {10,1,1,1} in "
          "two packs of two",
          "[partition][ranked_window]") {
    // 10 needs a partner, at least 1: 11 (above the average 6.5). {10,1} {1,1} attains it.
    ranked_window w;
    const std::vector<double> costs{1, 10, 1, 1};
    const std::optional<double> bound = w.start("who", costs, {2, 2}, 4);
    REQUIRE(bound.has_value());
    CHECK(*bound == 11.0);
    CHECK(w.ranked.size() == 4);
    CHECK(w.ranked.cost(0) == 10.0);
    CHECK(w.ranked.position(0) == 1);
}

TEST_CASE("ranked_window: the bound start returns never exceeds the exhaustive optimum and is the "
          "lower bound of the window up to rounding",
          "[partition][ranked_window]") {
    ranked_window w;
    std::uint64_t counter = 16000;
    for (std::size_t k = 1; k <= 4; ++k)
        for (std::size_t b = 1; b <= 4 && k * b <= 12; ++b)
            for (std::size_t n = (k - 1) * b + 1; n <= k * b; ++n)
                for (const auto& dist : bcl_test::all_distributions()) {
                    const std::vector<double> costs =
                        dist.generate(n, bcl_test::case_seed(++counter));
                    const std::optional<double> bound = w.start("who", costs, {k, b}, n);
                    REQUIRE(bound.has_value());
                    INFO("K=" << k << " B=" << b << " n=" << n << " " << dist.name);
                    const double optimum = bcl_test::brute_force_min_heaviest(
                        costs, bcl_test::window_capacities(n, k, b));
                    CHECK(*bound <= optimum * (1 + 1e-12));
                    CHECK(*bound ==
                          Approx(bcl::detail::pack_lower_bound(costs, {k, b})).epsilon(1e-12));
                }
}

TEST_CASE("ranked_window: an empty window gives nothing; a bad call is a bcl::error naming the "
          "caller; the pack table is left alone",
          "[partition][ranked_window][errors]") {
    ranked_window w;
    CHECK_FALSE(w.start("who", {}, {3, 3}, 0).has_value());
    w.packs.reset({2, 2}, 4);
    w.packs.append(1, 0, 7.0);
    const std::vector<double> costs{1, 2, 3, 4};
    CHECK_THAT(bcl_test::bcl_error_message([&] {
                   w.start("caller_name", costs, {2, 2}, 3);
               }),
               Catch::Contains("caller_name") && Catch::Contains("pack_of"));
    CHECK_THAT(bcl_test::bcl_error_message([&] {
                   w.start("caller_name", costs, {3, 1}, 4);
               }),
               Catch::Contains("caller_name") && Catch::Contains("do not fill"));
    const std::vector<double> bad{1, 2, -3, 4};
    CHECK_THAT(bcl_test::bcl_error_message([&] {
                   w.start("caller_name", bad, {2, 2}, 4);
               }),
               Catch::Contains("caller_name") && Catch::Contains("cost 2"));
    CHECK(w.start("who", costs, {2, 2}, 4).has_value());
    CHECK(w.packs.count(1) == 1); // start never touches the packs
    CHECK(w.packs.load(1) == 7.0);
}
