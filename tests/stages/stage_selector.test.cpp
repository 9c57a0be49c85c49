// bcl::detail::stages::stage_selector, as a specification: it chooses exactly `count` records, the
// `forced` oldest always among them; the distance it returns is the sum over stages of |total -
// target| of what it chose; it is never farther than the oldest records; it keeps the oldest when
// they are within tolerance; and on small buffers it comes near the best choice of all.

#include "support/distributions.hpp"

#include <bcl/detail/stages/stage_selector.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace {

using bcl::detail::stages::stage_selector;

std::vector<double> selector_costs_of(std::size_t n, std::size_t d, std::uint64_t seed) {
    std::vector<double> out(n * d);
    for (std::size_t s = 0; s < d; ++s) {
        const std::vector<double> column = bcl_test::costs_of_seed(n, seed * 3 + s);
        for (std::size_t i = 0; i < n; ++i) out[i * d + s] = column[i];
    }
    return out;
}

double selector_distance_of(const std::vector<double>& costs, std::size_t d,
                            const std::vector<std::uint8_t>& chosen,
                            const std::vector<double>& targets) {
    double sum = 0.0;
    for (std::size_t s = 0; s < d; ++s) {
        double total = 0.0;
        for (std::size_t i = 0; i < chosen.size(); ++i)
            if (chosen[i] != 0) total += costs[i * d + s];
        sum += std::abs(total - targets[s]);
    }
    return sum;
}

// The least distance of any choice of `count` records with the first `forced` among them.
double selector_best_distance(const std::vector<double>& costs, std::size_t d, std::size_t n,
                              std::size_t forced, std::size_t count,
                              const std::vector<double>& targets) {
    double best = std::numeric_limits<double>::infinity();
    for (std::uint32_t mask = 0; mask < (1U << n); ++mask) {
        if (static_cast<std::size_t>(std::popcount(mask)) != count) continue;
        if ((mask & ((1U << forced) - 1)) != (1U << forced) - 1) continue;
        std::vector<std::uint8_t> chosen(n);
        for (std::size_t i = 0; i < n; ++i) chosen[i] = (mask >> i) & 1U;
        best = std::min(best, selector_distance_of(costs, d, chosen, targets));
    }
    return best;
}

} // namespace

TEST_CASE("It chooses exactly count records, the forced oldest among them, and returns the "
          "distance of what it chose, never farther than the oldest records",
          "[stage_selector]") {
    stage_selector select;
    for (std::uint64_t seed = 1; seed <= 400; ++seed) {
        std::mt19937_64 gen(bcl_test::case_seed(seed));
        const std::size_t d = 1 + bcl_test::uniform_integer(gen, 0, 3);
        const std::size_t n = 1 + bcl_test::uniform_integer(gen, 0, 60);
        const std::size_t count = 1 + bcl_test::uniform_integer(gen, 0, n - 1);
        const std::size_t forced = bcl_test::uniform_integer(gen, 0, count);
        const std::vector<double> costs = selector_costs_of(n, d, seed);
        std::vector<double> targets(d);
        for (std::size_t s = 0; s < d; ++s) {
            double mean = 0.0;
            for (std::size_t i = 0; i < n; ++i) mean += costs[i * d + s];
            targets[s] = mean / static_cast<double>(n) * static_cast<double>(count) *
                         (0.5 + bcl_test::unit_interval(gen));
        }
        std::vector<std::uint8_t> chosen(n, 7);
        const double got = select(costs, d, forced, count, targets, chosen);
        INFO("seed " << seed << " D=" << d << " n=" << n << " count=" << count
                     << " forced=" << forced);
        CHECK(static_cast<std::size_t>(std::count(chosen.begin(), chosen.end(), 1)) == count);
        CHECK(static_cast<std::size_t>(std::count(chosen.begin(), chosen.end(), 0)) == n - count);
        CHECK(std::all_of(chosen.begin(), chosen.begin() + static_cast<std::ptrdiff_t>(forced),
                          [](std::uint8_t c) { return c == 1; }));
        const double recomputed = selector_distance_of(costs, d, chosen, targets);
        CHECK(got == Approx(recomputed).epsilon(1e-9).margin(1e-9 * (1 + recomputed)));
        std::vector<std::uint8_t> oldest(n, 0);
        std::fill(oldest.begin(), oldest.begin() + static_cast<std::ptrdiff_t>(count), 1);
        CHECK(recomputed <= selector_distance_of(costs, d, oldest, targets) * (1 + 1e-12));
    }
}

TEST_CASE("Oldest records within tolerance of the targets are kept as they are",
          "[stage_selector]") {
    // Two stages, records of (1, 2): the oldest four hit (4, 8) exactly; a later record would
    // fit as well, and is not taken.
    const std::vector<double> costs = {1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2};
    std::vector<std::uint8_t> chosen(6);
    stage_selector select;
    CHECK(select(costs, 2, 0, 4, std::vector<double>{4.0, 8.0}, chosen) == 0.0);
    CHECK(chosen == std::vector<std::uint8_t>{1, 1, 1, 1, 0, 0});
}

TEST_CASE("On small buffers it comes near the best choice of all", "[stage_selector]") {
    stage_selector select;
    double found = 0.0;
    double best = 0.0;
    std::size_t exact = 0;
    std::size_t cases = 0;
    for (std::uint64_t seed = 1; seed <= 300; ++seed) {
        std::mt19937_64 gen(bcl_test::case_seed(seed + 5000));
        const std::size_t d = 2;
        const std::size_t n = 6 + bcl_test::uniform_integer(gen, 0, 6);
        const std::size_t count = n / 2;
        const std::size_t forced = bcl_test::uniform_integer(gen, 0, 2);
        std::vector<double> costs(n * d);
        for (double& c : costs) c = std::exp(2.0 * bcl_test::standard_normal(gen));
        std::vector<double> targets(d, 0.0);
        for (std::size_t i = 0; i < n; ++i)
            for (std::size_t s = 0; s < d; ++s) targets[s] += costs[i * d + s] / 2;
        std::vector<std::uint8_t> chosen(n);
        const double got = select(costs, d, forced, count, targets, chosen);
        const double least = selector_best_distance(costs, d, n, forced, count, targets);
        const double scale = (targets[0] + targets[1]) / static_cast<double>(count);
        found += got / scale;
        best += least / scale;
        if (got <= least + 1e-3 * scale) ++exact;
        ++cases;
    }
    INFO("distance in mean record costs: found "
         << found / static_cast<double>(cases) << ", best " << best / static_cast<double>(cases)
         << "; best or within tolerance in " << exact << " of " << cases);
    CHECK(found <= 1.1 * best + 0.01 * static_cast<double>(cases));
    CHECK(exact * 3 >= cases * 2);
}
