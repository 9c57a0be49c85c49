// bcl/partition/lower_bound.hpp, as a specification: pack_lower_bound(_sorted, _prefix) is a lower
// bound on the heaviest pack of every partition of a window into K packs of exactly B items: the
// largest of total/K, the largest item, the item terms v_i + v_(n-i(B-1)+1) + s_(B-2), the
// pigeonhole terms v_(tK-t+1) + ... + v_(tK+1) + s_(B-t-1) and the grouped terms
// min over m of (P_j + s_(mB-j))/m for j <= min(K, 128); a short window gets only the first two.
// Checked against a plain transcription of that formula, against the exhaustive optimum (never
// above it, and attained by hand-built windows where each term binds), and for the invariances
// a bound must have. The three entry points agree up to rounding.

#include "../support/brute_force.hpp"
#include "../support/distributions.hpp"

#include <bcl/partition/lower_bound.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <random>
#include <vector>

namespace {

using bcl::detail::pack_lower_bound;

/// The documented formula, term by term, with 1-based v and plain loops.
double formula_bound(std::vector<double> costs, std::size_t k, std::size_t b) {
    const std::size_t n = costs.size();
    if (n == 0 || k == 0) return 0.0;
    std::sort(costs.begin(), costs.end(), std::greater<>{});
    const auto v = [&](std::size_t i) { return costs[i - 1]; };
    const auto s = [&](std::size_t r) { // sum of the r smallest
        double sum = 0.0;
        for (std::size_t i = 0; i < r; ++i) sum += costs[n - 1 - i];
        return sum;
    };
    const auto p = [&](std::size_t j) { // sum of the j largest
        double sum = 0.0;
        for (std::size_t i = 1; i <= j; ++i) sum += v(i);
        return sum;
    };
    double bound = std::max(s(n) / static_cast<double>(k), v(1));
    if (b < 2 || n != k * b) return bound;
    for (std::size_t i = 1; i <= k; ++i)
        bound = std::max(bound, v(i) + v(n - i * (b - 1) + 1) + s(b - 2));
    for (std::size_t t = 1; t <= b - 1; ++t) {
        double run = 0.0;
        for (std::size_t i = t * k - t + 1; i <= t * k + 1; ++i) run += v(i);
        bound = std::max(bound, run + s(b - t - 1));
    }
    for (std::size_t j = 1; j <= std::min<std::size_t>(k, 128); ++j) {
        double best = std::numeric_limits<double>::infinity();
        for (std::size_t m = (j + b - 1) / b; m <= j; ++m)
            best = std::min(best, (p(j) + s(m * b - j)) / static_cast<double>(m));
        bound = std::max(bound, best);
    }
    return bound;
}

std::vector<double> descending(std::vector<double> costs) {
    std::sort(costs.begin(), costs.end(), std::greater<>{});
    return costs;
}

std::vector<double> prefix_sums(const std::vector<double>& desc) {
    std::vector<double> prefix(desc.size() + 1, 0.0);
    for (std::size_t i = 0; i < desc.size(); ++i) prefix[i + 1] = prefix[i] + desc[i];
    return prefix;
}

double optimum(const std::vector<double>& costs, std::size_t k, std::size_t b) {
    return bcl_test::brute_force_min_heaviest(costs,
                                              bcl_test::window_capacities(costs.size(), k, b));
}

} // namespace

TEST_CASE("lower_bound: the item term for i = 2 binds, and the optimum attains it",
          "[partition][lower-bound]") {
    // {10,10,5,5,5,5,0,0,0}, K=3, B=3. total/K = 40/3; i=1: 10+0+0; pigeonhole: 5+5+0, 5+5+0;
    // grouped: 12.5 at most. i=2: v_2 + v_6 + s_1 = 10 + 5 + 0 = 15: the packs of the two 10s
    // hold four more items, and seven items (four 5s) leave at least one 5 for them.
    // {10,0,0} {10,5,0} {5,5,5} reaches 15.
    const std::vector<double> costs{0, 5, 10, 0, 5, 5, 0, 10, 5};
    CHECK(pack_lower_bound(costs, {3, 3}) == 15.0);
    CHECK(optimum(costs, 3, 3) == 15.0);
}

TEST_CASE("lower_bound: the pigeonhole term for t = 2 binds, and the optimum attains it",
          "[partition][lower-bound]") {
    // Seven 4s and two 0s, K=3, B=3. total/K = 28/3; t=1: v_3 + v_4 + s_1 = 8. t=2:
    // v_5 + v_6 + v_7 + s_0 = 12: seven items in three packs, one pack holds three of them.
    const std::vector<double> costs{4, 4, 4, 4, 4, 4, 4, 0, 0};
    CHECK(pack_lower_bound(costs, {3, 3}) == 12.0);
    CHECK(optimum(costs, 3, 3) == 12.0);
}

TEST_CASE("lower_bound: the average binds when the costs are even, and is attained",
          "[partition][lower-bound]") {
    // {1,2,3,4,5,6,7,8}, K=2, B=4: total/K = 18, and {8,1,2,7} {3,4,5,6} is 18/18.
    const std::vector<double> costs{1, 2, 3, 4, 5, 6, 7, 8};
    CHECK(pack_lower_bound(costs, {2, 4}) == 18.0);
    CHECK(optimum(costs, 2, 4) == 18.0);
}

TEST_CASE("lower_bound: it equals the documented formula, term for term, on every distribution "
          "and shape, including K above the 128 grouped terms",
          "[partition][lower-bound]") {
    std::uint64_t counter = 7000;
    for (const std::size_t k : {1U, 2U, 3U, 5U, 16U, 130U})
        for (const std::size_t b : {1U, 2U, 3U, 4U, 9U})
            for (const auto& dist : bcl_test::all_distributions())
                for (const std::size_t n : {k * b, k * b - (b > 1 ? 1 : 0)}) {
                    const std::vector<double> costs =
                        dist.generate(n, bcl_test::case_seed(++counter));
                    const double want = formula_bound(costs, k, b);
                    const std::vector<double> desc = descending(costs);
                    const std::vector<double> prefix = prefix_sums(desc);
                    INFO("K=" << k << " B=" << b << " n=" << n << " " << dist.name);
                    CHECK(pack_lower_bound(costs, {k, b}) == Approx(want).epsilon(1e-12));
                    CHECK(bcl::detail::pack_lower_bound_sorted(desc, {k, b}) ==
                          Approx(want).epsilon(1e-12));
                    CHECK(bcl::detail::pack_lower_bound_prefix(desc, prefix, {k, b}) ==
                          Approx(want).epsilon(1e-12));
                }
}

TEST_CASE("lower_bound: the grouped term alone is at most the exhaustive optimum",
          "[partition][lower-bound]") {
    std::uint64_t counter = 7700;
    for (std::size_t k = 2; k <= 4; ++k)
        for (std::size_t b = 2; b * k <= 12; ++b)
            for (const auto& dist : bcl_test::all_distributions())
                for (int rep = 0; rep < 6; ++rep) {
                    const std::vector<double> costs =
                        dist.generate(k * b, bcl_test::case_seed(++counter));
                    const double best = optimum(costs, k, b);
                    INFO("K=" << k << " B=" << b << " " << dist.name);
                    CHECK(bcl::detail::grouped_pack_bound(descending(costs), {k, b}) <=
                          best * (1 + 1e-12));
                    CHECK(pack_lower_bound(costs, {k, b}) <= best * (1 + 1e-12));
                }
}

TEST_CASE("lower_bound: raising a cost never lowers the bound, and scaling all costs by a power "
          "of two scales it exactly",
          "[partition][lower-bound]") {
    std::mt19937_64 gen(11);
    for (int rep = 0; rep < 300; ++rep) {
        const std::size_t k = 1 + gen() % 6;
        const std::size_t b = 1 + gen() % 6;
        std::vector<double> costs = bcl_test::pareto_costs(k * b, gen());
        const double before = pack_lower_bound(costs, {k, b});
        std::vector<double> scaled = costs;
        for (double& c : scaled) c *= 8.0;
        CHECK(pack_lower_bound(scaled, {k, b}) == 8.0 * before);
        costs[gen() % costs.size()] += 1000.0 * bcl_test::unit_interval(gen);
        INFO("K=" << k << " B=" << b << " rep " << rep);
        CHECK(pack_lower_bound(costs, {k, b}) >= before);
    }
}

TEST_CASE("lower_bound: no packs or no items give 0, and costs near bcl::max_estimate stay "
          "finite",
          "[partition][lower-bound]") {
    STATIC_REQUIRE(noexcept(bcl::detail::pack_lower_bound_sorted({}, {})));
    CHECK(pack_lower_bound({}, {3, 3}) == 0.0);
    const std::vector<double> some{1, 2};
    CHECK(pack_lower_bound(some, {0, 2}) == 0.0);
    const std::vector<double> huge(64, 1e120);
    const double bound = pack_lower_bound(huge, {8, 8});
    CHECK(std::isfinite(bound));
    CHECK(bound == Approx(8e120));
}
