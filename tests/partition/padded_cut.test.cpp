// bcl/partition/padded_cut.hpp, as a specification: padded_cut ranks a window by cost and cuts it
// into consecutive runs, the costliest B items one pack, the next B the next, so that the total
// padded cost (each pack's size times its costliest item) is the least over all partitions into
// packs of these sizes. In a short window the short run goes where it costs least and is always
// the last pack. The summary's pack_loads are the padded costs, heaviest is their maximum and no
// lower bound is claimed. Checked against hand cuts and an exhaustive search over labellings.

#include "../support/brute_force.hpp"
#include "../support/distributions.hpp"
#include "../support/error_message.hpp"

#include <bcl/partition/padded_cut.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace {

using bcl::detail::padded_cut;

/// Each pack's size times its costliest item.
std::vector<double> padded_loads(const std::vector<double>& costs,
                                 const std::vector<std::uint32_t>& pack_of, std::size_t k) {
    std::vector<double> top(k, 0.0);
    std::vector<double> count(k, 0.0);
    for (std::size_t i = 0; i < costs.size(); ++i) {
        top[pack_of[i]] = std::max(top[pack_of[i]], costs[i]);
        count[pack_of[i]] += 1.0;
    }
    for (std::size_t p = 0; p < k; ++p) top[p] *= count[p];
    return top;
}

double total(const std::vector<double>& v) {
    double sum = 0.0;
    for (const double x : v) sum += x;
    return sum;
}

/// The least total padded cost over every labelling that gives pack p exactly caps[p] items.
double least_padded_total(const std::vector<double>& costs, const std::vector<std::size_t>& caps) {
    const std::size_t n = costs.size();
    const std::size_t k = caps.size();
    std::vector<std::uint32_t> label(n, 0);
    double best = std::numeric_limits<double>::infinity();
    for (;;) {
        std::vector<std::size_t> count(k, 0);
        for (const std::uint32_t p : label) ++count[p];
        if (count == caps) best = std::min(best, total(padded_loads(costs, label, k)));
        std::size_t i = 0;
        while (i < n && ++label[i] == k) label[i++] = 0;
        if (i == n) return best;
    }
}

} // namespace

TEST_CASE("padded_cut: a full window is cut into runs of B by cost, dearest run first",
          "[partition][padded_cut]") {
    // Ranked 9,7,5 | 3,2,1: pack 0 = {9,7,5}, padded 3*9 = 27; pack 1 = {3,2,1}, padded 3*3 = 9.
    padded_cut cut;
    const std::vector<double> costs{1, 5, 3, 9, 7, 2};
    std::vector<std::uint32_t> pack_of(6);
    const bcl::partition_summary s = cut(costs, {2, 3}, pack_of);
    CHECK(pack_of == std::vector<std::uint32_t>{1, 0, 1, 0, 0, 1});
    CHECK(s.heaviest == 27.0);
    CHECK(s.lower_bound == 0.0);
    REQUIRE(s.pack_loads.size() == 2);
    CHECK(s.pack_loads[0] == 27.0);
    CHECK(s.pack_loads[1] == 9.0);
}

TEST_CASE("padded_cut: the short run goes where it costs least, and is the last pack",
          "[partition][padded_cut]") {
    padded_cut cut;
    SECTION("a lone giant: the short run of one takes it") {
        // {100,9,8,7,6,5,4} in packs of 3, 3, 1. Short run first: 1*100 + 3*9 + 3*6 = 145;
        // second: 3*100 + 1*7 + 3*6 = 325; last: 3*100 + 3*7 + 1*4 = 325. So {100} alone, as
        // the last pack; {9,8,7} is pack 0 and {6,5,4} pack 1.
        const std::vector<double> costs{100, 9, 8, 7, 6, 5, 4};
        std::vector<std::uint32_t> pack_of(7);
        const bcl::partition_summary s = cut(costs, {3, 3}, pack_of);
        CHECK(pack_of == std::vector<std::uint32_t>{2, 0, 0, 0, 1, 1, 1});
        REQUIRE(s.pack_loads.size() == 3);
        CHECK(s.pack_loads[0] == 27.0);
        CHECK(s.pack_loads[1] == 18.0);
        CHECK(s.pack_loads[2] == 100.0);
        CHECK(s.heaviest == 100.0);
    }
    SECTION("a cheap tail: the short run takes the cheapest item") {
        // {10,9,8,7,6,5,1}: first 10 + 27 + 18 = 55, second 30 + 7 + 18 = 55, last
        // 30 + 21 + 1 = 52. So the short run is {1}, the runs before it {10,9,8} and {7,6,5}.
        const std::vector<double> costs{1, 5, 6, 7, 8, 9, 10};
        std::vector<std::uint32_t> pack_of(7);
        cut(costs, {3, 3}, pack_of);
        CHECK(pack_of == std::vector<std::uint32_t>{2, 1, 1, 1, 0, 0, 0});
    }
    SECTION("places that cost the same: the one furthest down the ranking") {
        // {5,4,3,2,1} in packs of 2, 2, 1. Short run first: 1*5 + 2*4 + 2*2 = 17; second:
        // 2*5 + 1*3 + 2*2 = 17; last: 2*5 + 2*3 + 1*1 = 17. All three tie, so the short run is
        // {1}, after {5,4} and {3,2}. Positions scrambled so that each place gives other packs.
        const std::vector<double> costs{2, 5, 1, 4, 3};
        std::vector<std::uint32_t> pack_of(5);
        const bcl::partition_summary s = cut(costs, {3, 2}, pack_of);
        CHECK(pack_of == std::vector<std::uint32_t>{1, 0, 2, 0, 1});
        CHECK(std::vector<double>(s.pack_loads.begin(), s.pack_loads.end()) ==
              std::vector<double>{10.0, 6.0, 1.0});
    }
}

TEST_CASE("padded_cut: its total padded cost is the least over every partition into packs of "
          "these sizes, and its summary reads off the packs it wrote",
          "[partition][padded_cut]") {
    padded_cut cut;
    std::uint64_t counter = 9300;
    for (std::size_t k = 1; k <= 4; ++k)
        for (std::size_t b = 1; b <= 4 && k * b <= 8; ++b)
            for (std::size_t n = (k - 1) * b + 1; n <= k * b; ++n)
                for (const auto& dist : bcl_test::all_distributions()) {
                    const std::vector<double> costs =
                        dist.generate(n, bcl_test::case_seed(++counter));
                    const auto caps = bcl_test::window_capacities(n, k, b);
                    std::vector<std::uint32_t> pack_of(n, 9);
                    const bcl::partition_summary s = cut(costs, {k, b}, pack_of);
                    INFO("K=" << k << " B=" << b << " n=" << n << " " << dist.name);
                    REQUIRE(bcl_test::check_fill(pack_of, caps) == "");
                    const std::vector<double> loads = padded_loads(costs, pack_of, k);
                    CHECK(total(loads) == Approx(least_padded_total(costs, caps)));
                    REQUIRE(s.pack_loads.size() == k);
                    for (std::size_t p = 0; p < k; ++p) CHECK(s.pack_loads[p] == loads[p]);
                    CHECK(s.heaviest == *std::max_element(loads.begin(), loads.end()));
                    CHECK(s.lower_bound == 0.0);
                }
}

TEST_CASE("padded_cut: every pack is a run of consecutive ranks, in large windows too",
          "[partition][padded_cut]") {
    padded_cut cut;
    std::uint64_t counter = 9900;
    for (const std::size_t k : {5U, 64U})
        for (const std::size_t b : {3U, 32U})
            for (const auto& dist : bcl_test::all_distributions()) {
                const std::vector<double> costs =
                    dist.generate(k * b - 1, bcl_test::case_seed(++counter));
                std::vector<std::uint32_t> pack_of(costs.size());
                cut(costs, {k, b}, pack_of);
                // Runs of ranks: any item of a pack is at least as dear as every item of a pack
                // whose costliest item is cheaper.
                std::vector<double> lo(k, 1e300);
                std::vector<double> hi(k, -1.0);
                for (std::size_t i = 0; i < costs.size(); ++i) {
                    lo[pack_of[i]] = std::min(lo[pack_of[i]], costs[i]);
                    hi[pack_of[i]] = std::max(hi[pack_of[i]], costs[i]);
                }
                INFO("K=" << k << " B=" << b << " " << dist.name);
                for (std::size_t p = 0; p < k; ++p)
                    for (std::size_t q = 0; q < k; ++q)
                        if (hi[q] < hi[p]) CHECK(lo[p] >= hi[q]);
            }
}

TEST_CASE("padded_cut: bad input is a bcl::error naming padded_cut",
          "[partition][padded_cut][errors]") {
    padded_cut cut;
    std::vector<double> costs{1, 2, 3, 4};
    std::vector<std::uint32_t> pack_of(4);
    costs[3] = std::numeric_limits<double>::infinity();
    CHECK_THAT(bcl_test::bcl_error_message([&] {
                   cut(costs, {2, 2}, pack_of);
               }),
               Catch::Contains("padded_cut") && Catch::Contains("cost 3"));
    costs[3] = 4;
    CHECK_NOTHROW(cut(costs, {4, 1}, pack_of));
    CHECK_THAT(bcl_test::bcl_error_message([&] {
                   cut(costs, {5, 1}, pack_of);
               }),
               Catch::Contains("padded_cut") && Catch::Contains("do not fill"));
    const bcl::partition_summary none = cut({}, {2, 2}, {});
    CHECK(none.heaviest == 0.0);
    CHECK(none.pack_loads.empty());
}
