// bcl/partition/lpt.hpp, as a specification: lpt_partitioner is capped LPT. Items are taken by
// cost high to low (ties by position) and each goes to the lightest pack that still has a free
// slot (ties to the lowest pack id), so every pack gets exactly its capacity. Where the cap never
// binds it is Graham's LPT and keeps Graham's 4/3 - 1/(3K) bound; with the cap it promises no
// bound. Its summary reports the heaviest pack and the lower bound of lower_bound.hpp. Bad input
// is a bcl::error that names the partitioner.

#include "../support/brute_force.hpp"
#include "../support/distributions.hpp"
#include "../support/error_message.hpp"

#include <bcl/partition/lpt.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace {

using bcl::detail::lpt_partitioner;

/// Graham's LPT without any cap, the textbook way: dearest first (ties by position), each to the
/// lightest pack (ties to the lowest id). Returns the pack of every item.
std::vector<std::uint32_t> uncapped_lpt(const std::vector<double>& costs, std::size_t k) {
    std::vector<std::size_t> order(costs.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return costs[a] > costs[b]; });
    std::vector<double> load(k, 0.0);
    std::vector<std::uint32_t> pack_of(costs.size());
    for (const std::size_t i : order) {
        const auto p =
            static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
        pack_of[i] = static_cast<std::uint32_t>(p);
        load[p] += costs[i];
    }
    return pack_of;
}

/// The least heaviest pack over all k^n assignments with no cardinality constraint.
double uncapped_optimum(const std::vector<double>& costs, std::size_t k) {
    std::vector<std::size_t> label(costs.size(), 0);
    double best = std::numeric_limits<double>::infinity();
    for (;;) {
        std::vector<double> load(k, 0.0);
        for (std::size_t i = 0; i < costs.size(); ++i) load[label[i]] += costs[i];
        best = std::min(best, *std::max_element(load.begin(), load.end()));
        std::size_t i = 0;
        while (i < label.size() && ++label[i] == k) label[i++] = 0;
        if (i == label.size()) return best;
    }
}

} // namespace

TEST_CASE("lpt: hand-dealt windows come out as capped LPT deals them", "[partition][lpt]") {
    lpt_partitioner lpt;
    SECTION("{9,7,6,5,4,3}, K=2, B=3") {
        // 9 -> p0 (9); 7 -> p1 (7); 6 -> p1 (13); 5 -> p0 (14); 4 -> p1 (17, now full);
        // 3 -> p0, the only pack with a slot (17).
        const std::vector<double> costs{9, 7, 6, 5, 4, 3};
        std::vector<std::uint32_t> pack_of(6);
        const bcl::partition_summary s = lpt(costs, {2, 3}, pack_of);
        CHECK(pack_of == std::vector<std::uint32_t>{0, 1, 1, 0, 1, 0});
        CHECK(s.heaviest == 17.0);
    }
    SECTION("ties: equal costs by position, equal loads to the lowest pack id") {
        // Ranked: 5 (pos 1), 5 (pos 3), 2 (pos 0), 2 (pos 2). 5 -> p0; 5 -> p1; 2 -> p0 (tie at
        // 5, lowest id); 2 -> p1.
        const std::vector<double> costs{2, 5, 2, 5};
        std::vector<std::uint32_t> pack_of(4);
        lpt(costs, {2, 2}, pack_of);
        CHECK(pack_of == std::vector<std::uint32_t>{0, 0, 1, 1});
    }
    SECTION("the cap binds: a full pack takes nothing however light it is") {
        // 10 -> p0; 1 -> p1; 1 -> p1 (1 < 10; p1 now full); 1 -> p0. Uncapped LPT would have put
        // all three 1s with each other.
        const std::vector<double> costs{10, 1, 1, 1};
        std::vector<std::uint32_t> pack_of(4);
        const bcl::partition_summary s = lpt(costs, {2, 2}, pack_of);
        CHECK(pack_of == std::vector<std::uint32_t>{0, 1, 1, 0});
        CHECK(s.heaviest == 11.0);
    }
    SECTION("Graham's tight example for two machines, {3,3,2,2,2} in packs of 3 and 2") {
        // 3 -> p0; 3 -> p1; 2 -> p0 (tie); 2 -> p1 (p1 full: 2 slots); 2 -> p0: 7 against the
        // optimum {2,2,2} {3,3} = 6, exactly Graham's 4/3 - 1/(3*2) = 7/6.
        const std::vector<double> costs{3, 3, 2, 2, 2};
        std::vector<std::uint32_t> pack_of(5);
        const bcl::partition_summary s = lpt(costs, {2, 3}, pack_of);
        CHECK(pack_of == std::vector<std::uint32_t>{0, 1, 0, 1, 0});
        CHECK(s.heaviest == 7.0);
        const double optimum =
            bcl_test::brute_force_min_heaviest(costs, bcl_test::window_capacities(5, 2, 3));
        CHECK(optimum == 6.0);
        CHECK(s.heaviest == Approx(optimum * (4.0 / 3.0 - 1.0 / 6.0)));
    }
}

TEST_CASE("lpt: where the cap never binds it is Graham's LPT, within 4/3 - 1/(3K) of the best "
          "partition with no cap at all",
          "[partition][lpt]") {
    lpt_partitioner lpt;
    std::size_t uncapped_windows = 0;
    std::uint64_t counter = 0;
    for (std::size_t k = 2; k <= 3; ++k)
        for (std::size_t b = 2; b <= 6 - k; ++b) // n <= 9 for K = 3: 3^9 labellings
            for (int rep = 0; rep < 200; ++rep) {
                const std::vector<double> costs =
                    bcl_test::uniform_costs(k * b, bcl_test::case_seed(++counter));
                const std::vector<std::uint32_t> graham = uncapped_lpt(costs, k);
                std::vector<std::size_t> count(k, 0);
                for (const std::uint32_t p : graham) ++count[p];
                if (std::count(count.begin(), count.end(), b) != static_cast<std::ptrdiff_t>(k))
                    continue; // the cap would have bound: no bound is promised
                ++uncapped_windows;
                std::vector<std::uint32_t> pack_of(costs.size());
                const double heaviest = lpt(costs, {k, b}, pack_of).heaviest;
                INFO("K=" << k << " B=" << b << " case " << counter);
                CHECK(pack_of == graham);
                const double kd = static_cast<double>(k);
                CHECK(heaviest <=
                      (4.0 / 3.0 - 1.0 / (3.0 * kd)) * uncapped_optimum(costs, k) * (1 + 1e-12));
            }
    CHECK(uncapped_windows > 100);
}

TEST_CASE("lpt: the summary is the heaviest pack of the partition written and a bound below the "
          "optimum",
          "[partition][lpt]") {
    lpt_partitioner lpt;
    std::uint64_t counter = 40;
    for (const auto& dist : bcl_test::all_distributions())
        for (const std::size_t n : {9U, 8U, 7U}) {
            const std::vector<double> costs = dist.generate(n, bcl_test::case_seed(++counter));
            std::vector<std::uint32_t> pack_of(n, 99);
            const bcl::partition_summary s = lpt(costs, {3, 3}, pack_of);
            INFO(dist.name << " n=" << n);
            const auto caps = bcl_test::window_capacities(n, 3, 3);
            CHECK(bcl_test::check_fill(pack_of, caps) == "");
            const std::vector<double> loads = bcl_test::pack_sums(costs, pack_of, 3);
            CHECK(s.heaviest == Approx(*std::max_element(loads.begin(), loads.end())));
            const double optimum = bcl_test::brute_force_min_heaviest(costs, caps);
            CHECK(s.lower_bound <= optimum * (1 + 1e-12));
            CHECK(s.heaviest >= optimum * (1 - 1e-12));
        }
}

TEST_CASE("lpt: bad input is a bcl::error naming lpt_partitioner, and an empty window is fine",
          "[partition][lpt][errors]") {
    lpt_partitioner lpt;
    std::vector<double> costs{1, 2, 3, 4};
    std::vector<std::uint32_t> pack_of(4);
    costs[2] = -3.0;
    const std::string message = bcl_test::bcl_error_message([&] { lpt(costs, {2, 2}, pack_of); });
    CHECK_THAT(message, Catch::Contains("lpt_partitioner") && Catch::Contains("cost 2"));
    costs[2] = 3.0;
    std::vector<std::uint32_t> three(3);
    CHECK_THAT(bcl_test::bcl_error_message([&] {
                   lpt(costs, {2, 2}, three);
               }),
               Catch::Contains("lpt_partitioner") && Catch::Contains("pack_of"));
    CHECK_THAT(bcl_test::bcl_error_message([&] {
                   lpt(costs, {1, 3}, pack_of);
               }),
               Catch::Contains("lpt_partitioner"));
    const bcl::partition_summary none = lpt({}, {2, 2}, {});
    CHECK(none.heaviest == 0.0);
    CHECK(none.lower_bound == 0.0);
}
