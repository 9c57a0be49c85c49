// bcl::detail::stages (step_stages.hpp), as a specification: stage costs in fixed point of one unit
// for every stage; a step's objective is the sum over stages of the largest rank load, and its
// bound the sum over stages of the larger of the mean load and the dearest record. improve()
// never raises the objective nor takes it below the bound, keeps every rank's count (empty ranks
// and ranks of different counts too), returns the objective it leaves, stops at its floor, is
// the same twice, and, with at most polish_partners + 1 ranks, ends where no single swap lowers
// the objective (checked against every swap). deal() keeps every rank's count and deals by its
// rule (a step dealt by hand); with improve() it reaches the best partition on nine tiny steps in
// ten (against every partition) and is within 10% of it on all.

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

// A table of whole-number costs that assign() keeps as they are (the largest 2^27).
stage_table exact(std::vector<double> costs, std::size_t d) {
    costs.push_back(std::ldexp(1.0, 27)); // a last record, in no step, that fixes the unit at 1
    for (std::size_t s = 1; s < d; ++s) costs.push_back(0.0);
    stage_table t;
    t.assign(costs, d);
    REQUIRE(t.unit == 1.0);
    return t;
}

std::uint64_t brute_objective(const stage_table& t, const std::vector<std::uint32_t>& records,
                              const std::vector<std::uint32_t>& rank_of, std::size_t ranks) {
    std::uint64_t sum = 0;
    for (std::size_t s = 0; s < t.stages; ++s) {
        std::vector<std::uint64_t> load(ranks, 0);
        for (std::size_t k = 0; k < records.size(); ++k) load[rank_of[k]] += t.of(records[k])[s];
        sum += *std::max_element(load.begin(), load.end());
    }
    return sum;
}

std::uint64_t brute_bound(const stage_table& t, const std::vector<std::uint32_t>& records,
                          std::size_t ranks) {
    std::uint64_t sum = 0;
    for (std::size_t s = 0; s < t.stages; ++s) {
        std::uint64_t total = 0;
        std::uint64_t dearest = 0;
        for (const std::uint32_t r : records) {
            total += t.of(r)[s];
            dearest = std::max(dearest, t.of(r)[s]);
        }
        sum += std::max((total + ranks - 1) / ranks, dearest);
    }
    return sum;
}

std::vector<std::size_t> counts_of(const std::vector<std::uint32_t>& rank_of, std::size_t ranks) {
    std::vector<std::size_t> c(ranks, 0);
    for (const std::uint32_t r : rank_of) ++c[r];
    return c;
}

std::vector<std::uint32_t> all_records(const stage_table& t) {
    std::vector<std::uint32_t> records(t.records());
    std::iota(records.begin(), records.end(), 0U);
    return records;
}

// The least objective over every partition of the step with `per_rank` records a rank.
std::uint64_t best_objective(const stage_table& t, std::size_t ranks, std::size_t per_rank) {
    const std::vector<std::uint32_t> records = all_records(t);
    std::vector<std::uint32_t> rank_of(records.size());
    for (std::size_t i = 0; i < rank_of.size(); ++i)
        rank_of[i] = static_cast<std::uint32_t>(i / per_rank);
    std::uint64_t best = brute_objective(t, records, rank_of, ranks);
    while (std::next_permutation(rank_of.begin(), rank_of.end()))
        best = std::min(best, brute_objective(t, records, rank_of, ranks));
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

TEST_CASE("step stages: the bound is, stage by stage, the larger of the ranks' mean load (rounded "
          "up) and the dearest record",
          "[stages][step_stages]") {
    // Stage 0: 3 + 4 + 5 + 9 = 21 over 2 ranks, mean 10.5 -> 11, dearest 9: 11.
    // Stage 1: 1 + 0 + 30 + 2 = 33, mean 16.5 -> 17, dearest 30: 30.
    const stage_table t = exact({3, 1, 4, 0, 5, 30, 9, 2}, 2);
    const std::vector<std::uint32_t> records{0, 1, 2, 3};
    REQUIRE(step_stages::bound(records, 2, t) == 11 + 30);
    REQUIRE(step_stages::bound(records, 1, t) == 21 + 33);
    REQUIRE(step_stages::bound(records, 4, t) == 9 + 30);
}

TEST_CASE("step stages: improve() of two ranks, each heavy in one stage, swaps them level, at the "
          "bound",
          "[stages][step_stages]") {
    // Rank 0 holds two records of (10, 0), rank 1 two of (0, 10): loads (20, 0) and (0, 20),
    // objective 20 + 20. One swap gives both (10, 10): 10 + 10, the bound (mean 10, dearest 10).
    const stage_table t = exact({10, 0, 10, 0, 0, 10, 0, 10}, 2);
    const std::vector<std::uint32_t> records{0, 1, 2, 3};
    std::vector<std::uint32_t> rank_of{0, 0, 1, 1};
    step_stages stages;
    REQUIRE(stages.objective(records, rank_of, 2, t) == 40);
    REQUIRE(stages.improve(records, rank_of, 2, t) == 20);
    REQUIRE(brute_objective(t, records, rank_of, 2) == 20);
    REQUIRE(counts_of(rank_of, 2) == std::vector<std::size_t>{2, 2});
    REQUIRE(rank_of[0] != rank_of[1]);
}

TEST_CASE("step stages: improve() never raises the objective nor goes below the bound, keeps "
          "every rank's count, returns the objective it leaves, and is the same twice",
          "[stages][step_stages]") {
    // Up to 9 ranks: past level_partners + 2 the levelling leaves some partners untried.
    static_assert(step_stages::level_partners + 2 < 9);
    step_stages stages;
    step_stages other;
    std::mt19937_64 gen(11);
    for (std::uint64_t seed = 1; seed <= 60; ++seed)
        for (const std::size_t d :
             {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{5}}) {
            const std::size_t ranks = 1 + seed % 9;
            const std::size_t n = ranks * (1 + seed % 6) + seed % 3;
            const stage_table t = step_of(n, d, seed);
            const std::vector<std::uint32_t> records = all_records(t);
            // Ranks of different counts, some empty: each record to a random rank.
            std::vector<std::uint32_t> rank_of(n);
            for (std::uint32_t& r : rank_of)
                r = static_cast<std::uint32_t>(seed % 4 == 0 ? gen() % ranks : gen() % 2 % ranks);
            CAPTURE(seed, d, ranks, n);
            const std::uint64_t before = brute_objective(t, records, rank_of, ranks);
            REQUIRE(stages.objective(records, rank_of, ranks, t) == before);
            const std::vector<std::size_t> counts = counts_of(rank_of, ranks);
            std::vector<std::uint32_t> again = rank_of;
            const std::uint64_t after = stages.improve(records, rank_of, ranks, t);
            REQUIRE(after <= before);
            REQUIRE(after >= brute_bound(t, records, ranks));
            REQUIRE(after == brute_objective(t, records, rank_of, ranks));
            REQUIRE(counts_of(rank_of, ranks) == counts);
            REQUIRE(other.improve(records, again, ranks, t) == after);
            REQUIRE(again == rank_of);
        }
}

TEST_CASE("step stages: improve() stops at its floor: a step at or below it is left as it is",
          "[stages][step_stages]") {
    step_stages stages;
    for (std::uint64_t seed = 1; seed <= 30; ++seed) {
        const std::size_t ranks = 2 + seed % 5;
        const stage_table t = step_of(ranks * 4, 2, seed);
        const std::vector<std::uint32_t> records = all_records(t);
        std::vector<std::uint32_t> rank_of(records.size());
        for (std::size_t i = 0; i < rank_of.size(); ++i)
            rank_of[i] = static_cast<std::uint32_t>(i % ranks);
        const std::vector<std::uint32_t> given = rank_of;
        const std::uint64_t before = brute_objective(t, records, rank_of, ranks);
        CAPTURE(seed, ranks);
        REQUIRE(stages.improve(records, rank_of, ranks, t, before) == before);
        REQUIRE(rank_of == given);
        // With the floor at the bound, the objective goes no lower than needed, nor below it.
        const std::uint64_t bound = step_stages::bound(records, ranks, t);
        REQUIRE(stages.improve(records, rank_of, ranks, t, bound) >= bound);
    }
}

TEST_CASE("step stages: with at most polish_partners + 1 ranks, improve() ends where no single "
          "swap lowers the objective",
          "[stages][step_stages]") {
    step_stages stages;
    std::size_t stopped_at_floor = 0;
    for (std::uint64_t seed = 1; seed <= 60; ++seed)
        for (const std::size_t d : {std::size_t{1}, std::size_t{2}, std::size_t{3}}) {
            const std::size_t ranks = 2 + seed % step_stages::polish_partners;
            const std::size_t per_rank = 1 + seed % 5;
            const stage_table t = step_of(ranks * per_rank, d, seed);
            const std::vector<std::uint32_t> records = all_records(t);
            std::vector<std::uint32_t> rank_of(records.size());
            for (std::size_t i = 0; i < rank_of.size(); ++i)
                rank_of[i] = static_cast<std::uint32_t>(i % ranks);
            CAPTURE(seed, d, ranks, per_rank);
            const std::uint64_t after = stages.improve(records, rank_of, ranks, t);
            REQUIRE(after == brute_objective(t, records, rank_of, ranks));
            if (after == step_stages::bound(records, ranks, t)) ++stopped_at_floor;
            for (std::size_t a = 0; a < rank_of.size(); ++a)
                for (std::size_t b = a + 1; b < rank_of.size(); ++b) {
                    if (rank_of[a] == rank_of[b]) continue;
                    std::vector<std::uint32_t> swapped = rank_of;
                    std::swap(swapped[a], swapped[b]);
                    REQUIRE(brute_objective(t, records, swapped, ranks) >= after);
                }
        }
    CAPTURE(stopped_at_floor);
}

TEST_CASE("step stages: deal() deals the dearest record first to the rank where the objective "
          "grows least, ties to the least loaded rank, then the lower",
          "[stages][step_stages]") {
    // Records A (5, 1), B (4, 4), C (1, 5), D (1, 1); two ranks of two. By their sums: B (8),
    // then A and C (6; A, the earlier, first), then D.
    //   B: both ranks empty, each grows the objective by 8: the lower, rank 0 -> (4, 4).
    //   A: rank 0 -> (9, 5) grows it by 5 + 1; rank 1 -> (5, 1) by 1 + 0: rank 1.
    //   C: rank 0 -> (5, 9) grows (5, 4) by 0 + 5; rank 1 -> (6, 6) by 1 + 2: rank 1, full.
    //   D: rank 0, the only one with room -> (5, 5).
    const stage_table t = exact({5, 1, 4, 4, 1, 5, 1, 1}, 2);
    const std::vector<std::uint32_t> records{0, 1, 2, 3};
    const std::vector<std::size_t> counts{2, 2};
    std::vector<std::uint32_t> rank_of(4);
    step_stages stages;
    stages.deal(records, counts, rank_of, t);
    REQUIRE(rank_of == std::vector<std::uint32_t>{1, 0, 1, 0});
    REQUIRE(stages.objective(records, rank_of, 2, t) == 6 + 6);
}

TEST_CASE("step stages: deal() keeps every rank's count, ranks of no records and of different "
          "counts too",
          "[stages][step_stages]") {
    step_stages stages;
    for (std::uint64_t seed = 1; seed <= 40; ++seed)
        for (const std::size_t d : {std::size_t{1}, std::size_t{2}, std::size_t{4}}) {
            const std::size_t ranks = 1 + seed % 7;
            std::vector<std::size_t> counts(ranks);
            for (std::size_t r = 0; r < ranks; ++r) counts[r] = (seed + 3 * r) % 5;
            const std::size_t n = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
            const stage_table t = step_of(n, d, seed);
            std::vector<std::uint32_t> records = all_records(t);
            std::reverse(records.begin(), records.end());
            std::vector<std::uint32_t> rank_of(n);
            stages.deal(records, counts, rank_of, t);
            CAPTURE(seed, d, ranks);
            REQUIRE(counts_of(rank_of, ranks) == counts);
        }
}

TEST_CASE("step stages: deal() then improve() find the best partition of nine tiny steps in ten, "
          "and none 10% above it",
          "[stages][step_stages]") {
    step_stages stages;
    std::size_t best_found = 0;
    std::size_t cases = 0;
    for (std::uint64_t seed = 1; seed <= 120; ++seed) {
        const std::size_t ranks = 2 + seed % 2;
        const std::size_t per_rank = 2 + seed % 2;
        const stage_table t = step_of(ranks * per_rank, 2, seed);
        const std::vector<std::uint32_t> records = all_records(t);
        const std::vector<std::size_t> counts(ranks, per_rank);
        std::vector<std::uint32_t> rank_of(records.size());
        stages.deal(records, counts, rank_of, t);
        REQUIRE(counts_of(rank_of, ranks) == counts);
        const std::uint64_t got = stages.improve(records, rank_of, ranks, t);
        const std::uint64_t best = best_objective(t, ranks, per_rank);
        CAPTURE(seed, ranks, per_rank, got, best);
        REQUIRE(got >= best);
        REQUIRE(static_cast<double>(got) <= 1.10 * static_cast<double>(best));
        best_found += got == best ? 1 : 0;
        ++cases;
    }
    CAPTURE(best_found, cases);
    REQUIRE(best_found * 10 >= cases * 9); // the best on at least 90% of them
}
