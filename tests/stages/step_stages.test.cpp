// bcl::detail::stages (step_stages.hpp), as a specification: stage costs in fixed point of one unit
// for every stage; a step's objective is the sum over stages of the largest rank load; improve()
// never raises it, keeps every rank's count and stops at a point no single swap improves
// (checked against every swap); deal() keeps every rank's count and, with improve(), reaches the
// best partition on most tiny steps (against every partition) and within 25% on all.

#include "support/distributions.hpp"

#include <bcl/detail/stages/step_stages.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

namespace {

using bcl::detail::stages::stage_table;
using bcl::detail::stages::step_stages;

// A step of n records of D stages: each stage's costs from one of the test distributions.
stage_table step_of(std::size_t n, std::size_t d, std::uint64_t seed) {
    std::vector<double> costs(n * d);
    for (std::size_t s = 0; s < d; ++s) {
        const std::vector<double> column = bcl_test::costs_of_seed(n, seed * 7 + s);
        for (std::size_t i = 0; i < n; ++i) costs[i * d + s] = column[i];
    }
    stage_table t;
    t.assign(costs, d);
    return t;
}

std::uint64_t brute_objective(const stage_table& t, const std::vector<std::uint32_t>& rank_of,
                              std::size_t ranks) {
    std::uint64_t sum = 0;
    for (std::size_t s = 0; s < t.stages; ++s) {
        std::vector<std::uint64_t> load(ranks, 0);
        for (std::size_t i = 0; i < rank_of.size(); ++i) load[rank_of[i]] += t.of(i)[s];
        sum += *std::max_element(load.begin(), load.end());
    }
    return sum;
}

std::vector<std::size_t> counts_of(const std::vector<std::uint32_t>& rank_of, std::size_t ranks) {
    std::vector<std::size_t> c(ranks, 0);
    for (const std::uint32_t r : rank_of) ++c[r];
    return c;
}

// The least objective over every partition of the step with `per_rank` records a rank.
std::uint64_t best_objective(const stage_table& t, std::size_t ranks, std::size_t per_rank) {
    const std::size_t n = t.records();
    std::vector<std::uint32_t> rank_of(n);
    for (std::size_t i = 0; i < n; ++i) rank_of[i] = static_cast<std::uint32_t>(i / per_rank);
    std::uint64_t best = brute_objective(t, rank_of, ranks);
    while (std::next_permutation(rank_of.begin(), rank_of.end()))
        best = std::min(best, brute_objective(t, rank_of, ranks));
    return best;
}

} // namespace

TEST_CASE("step stages: one unit for every stage, a power of two that puts the largest cost in "
          "[2^27, 2^28), subnormal and huge costs too",
          "[stages][step_stages]") {
    stage_table t;
    const std::vector<double> costs{1.0, 2.0, 4.0, 0.0};
    t.assign(costs, 2);
    REQUIRE(t.records() == 2);
    REQUIRE(t.of(1)[0] == std::uint64_t{1} << 27);
    REQUIRE(t.of(0)[1] == std::uint64_t{1} << 26);
    REQUIRE(t.of(1)[1] == 0);
    REQUIRE(t.sum(0) == (std::uint64_t{1} << 25) + (std::uint64_t{1} << 26));
    REQUIRE(t.unit == std::ldexp(1.0, -25));
    for (const double largest : {std::numeric_limits<double>::denorm_min(), 1e-310, 1e-300, 0.7,
                                 3e9, 1e300, std::numeric_limits<double>::max()}) {
        const std::vector<double> one{largest / 3.0, largest};
        t.assign(one, 1);
        CAPTURE(largest, t.unit);
        REQUIRE(t.unit > 0.0);
        REQUIRE(t.of(1)[0] <= std::uint64_t{1} << 28);
        REQUIRE(t.of(0)[0] <= t.of(1)[0]);
    }
    const std::vector<double> zeros{0.0, 0.0};
    t.assign(zeros, 2);
    REQUIRE(t.unit == 1.0);
    REQUIRE(t.sum(0) == 0);
}

TEST_CASE("step stages: improve() never raises the objective, keeps every rank's count and ends "
          "where no single swap improves",
          "[stages][step_stages]") {
    step_stages stages;
    for (std::uint64_t seed = 1; seed <= 40; ++seed)
        for (const std::size_t d : {std::size_t{1}, std::size_t{2}, std::size_t{3}}) {
            const std::size_t ranks = 2 + seed % 5;
            const std::size_t per_rank = 1 + seed % 4;
            const stage_table t = step_of(ranks * per_rank, d, seed);
            std::vector<std::uint32_t> records(t.records());
            std::iota(records.begin(), records.end(), 0U);
            std::vector<std::uint32_t> rank_of(records.size());
            for (std::size_t i = 0; i < rank_of.size(); ++i)
                rank_of[i] = static_cast<std::uint32_t>(i % ranks);
            CAPTURE(seed, d, ranks, per_rank);
            const std::uint64_t before = brute_objective(t, rank_of, ranks);
            REQUIRE(stages.objective(records, rank_of, ranks, t) == before);
            const std::vector<std::size_t> counts = counts_of(rank_of, ranks);
            const std::uint64_t after = stages.improve(records, rank_of, ranks, t, 1000);
            REQUIRE(after <= before);
            REQUIRE(after == brute_objective(t, rank_of, ranks));
            REQUIRE(counts_of(rank_of, ranks) == counts);
            for (std::size_t a = 0; a < rank_of.size(); ++a)
                for (std::size_t b = 0; b < rank_of.size(); ++b) {
                    if (rank_of[a] == rank_of[b]) continue;
                    std::vector<std::uint32_t> swapped = rank_of;
                    std::swap(swapped[a], swapped[b]);
                    REQUIRE(brute_objective(t, swapped, ranks) >= after);
                }
        }
}

TEST_CASE("step stages: deal() keeps every rank's count; with improve() it finds the best "
          "partition of most tiny steps, and none 25% above it",
          "[stages][step_stages]") {
    step_stages stages;
    std::size_t best_found = 0;
    std::size_t cases = 0;
    for (std::uint64_t seed = 1; seed <= 120; ++seed) {
        const std::size_t ranks = 2 + seed % 2;
        const std::size_t per_rank = 2 + seed % 2;
        const stage_table t = step_of(ranks * per_rank, 2, seed);
        std::vector<std::uint32_t> records(t.records());
        std::iota(records.begin(), records.end(), 0U);
        const std::vector<std::size_t> counts(ranks, per_rank);
        std::vector<std::uint32_t> rank_of(records.size());
        stages.deal(records, counts, rank_of, t);
        REQUIRE(counts_of(rank_of, ranks) == counts);
        const std::uint64_t got = stages.improve(records, rank_of, ranks, t);
        const std::uint64_t best = best_objective(t, ranks, per_rank);
        CAPTURE(seed, ranks, per_rank, got, best);
        REQUIRE(got >= best);
        REQUIRE(static_cast<double>(got) <= 1.25 * static_cast<double>(best));
        best_found += got == best ? 1 : 0;
        ++cases;
    }
    CAPTURE(best_found, cases);
    REQUIRE(best_found * 10 >= cases * 8); // the best on at least 80% of them
}
