// bcl::detail::tokens::least_count, as a specification: the least multiple of m in [least, most]
// at which a monotone "plans" holds, in at most 2 log2(g) + 4 tries for a gap of g multiples of
// m (every try a multiple of m in range, the last one on the count returned); 0 when none
// plans; where planning is not monotone, a count that plans and below which no try planned.

#include "../support/case_count.hpp"

#include <bcl/detail/tokens/count_search.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

namespace {

using bcl::detail::tokens::least_count;

/// Runs least_count over `plans`, recording every count tried.
template <class Plans>
std::size_t counted_search(std::size_t least, std::size_t most, std::size_t m, Plans plans,
                           std::vector<std::size_t>& tried) {
    tried.clear();
    return least_count(least, most, m, [&](std::size_t count) {
        tried.push_back(count);
        return plans(count);
    });
}

double tries_allowed(std::size_t gap) {
    return 2.0 * std::log2(static_cast<double>(gap < 1 ? 1 : gap)) + 4.0;
}

} // namespace

TEST_CASE("least_count finds the threshold of a monotone plan in logarithmically many tries",
          "[tokens][count_search]") {
    std::mt19937_64 rng(23);
    std::vector<std::size_t> tried;
    for (std::size_t trial = 0; trial < bcl_test::random_cases(2000); ++trial) {
        const std::size_t m = 1 + rng() % 4;
        const std::size_t least = m * (1 + rng() % 50);
        const std::size_t most = least + rng() % 100000;
        const std::size_t threshold = least + rng() % (most - least + 1);
        const std::size_t found = counted_search(
            least, most, m, [&](std::size_t c) { return c >= threshold; }, tried);
        const std::size_t expected = (threshold + m - 1) / m * m;
        CAPTURE(trial, m, least, most, threshold, tried.size());
        if (expected > most / m * m) {
            REQUIRE(found == 0);
        } else {
            REQUIRE(found == expected);
            REQUIRE(tried.back() == found); // the plan kept is the count's
        }
        for (const std::size_t c : tried) {
            REQUIRE(c % m == 0);
            REQUIRE(c >= least);
            REQUIRE(c <= most);
        }
        const std::size_t gap = ((found == 0 ? most : found) - least) / m;
        REQUIRE(static_cast<double>(tried.size()) <= tries_allowed(gap));
    }
}

TEST_CASE("least_count: at the bound in one try, none in range is 0, an empty range untried",
          "[tokens][count_search]") {
    std::vector<std::size_t> tried;
    CHECK(counted_search(
              8, 100, 2, [](std::size_t) { return true; }, tried) == 8);
    CHECK(tried == std::vector<std::size_t>{8});
    // Records above T/2 need twice the bound: 4000 counts above it, found in a few dozen tries
    // (one by one, a count a deal, they were 4000 deals).
    CHECK(counted_search(
              4000, 8000, 1, [](std::size_t c) { return c >= 8000; }, tried) == 8000);
    CHECK(tried.size() <= 30);
    // A refusal: nothing plans up to `most`, reached by climbing.
    CHECK(counted_search(
              10, 1000000, 1, [](std::size_t) { return false; }, tried) == 0);
    CHECK(tried.size() <= 22);
    CHECK(tried.back() == 1000000);
    CHECK(counted_search(
              10, 9, 1, [](std::size_t) { return true; }, tried) == 0);
    CHECK(tried.empty());
    CHECK(counted_search(
              4, 7, 4, [](std::size_t c) { return c >= 5; }, tried) == 0);
}

TEST_CASE("least_count where planning is not monotone: a count that plans, no try below it did",
          "[tokens][count_search]") {
    std::mt19937_64 rng(29);
    std::vector<std::size_t> tried;
    for (std::size_t trial = 0; trial < bcl_test::random_cases(1000); ++trial) {
        std::vector<bool> plans(200);
        for (std::size_t c = 0; c < plans.size(); ++c) plans[c] = rng() % 3 == 0;
        const std::size_t found = counted_search(
            1, 199, 1, [&](std::size_t c) { return plans[c]; }, tried);
        if (found == 0) {
            for (const std::size_t c : tried) REQUIRE_FALSE(plans[c]);
            continue;
        }
        REQUIRE(plans[found]);
        for (const std::size_t c : tried)
            if (c < found) REQUIRE_FALSE(plans[c]);
    }
}

TEST_CASE("longest_prefix finds the longest prefix that packs, within a step of 1/1024 of the "
          "candidates, in at most 2 log2(1024) + 3 tries",
          "[tokens][count_search]") {
    std::mt19937_64 rng(29);
    for (int trial = 0; trial < 2000; ++trial) {
        const std::size_t full = 1 + rng() % 500;
        const std::size_t fit = full + rng() % (trial % 2 == 0 ? 50 : 100000);
        // Prefixes up to `longest` pack (0: none does, not even `full`).
        const std::size_t longest = rng() % 5 == 0 ? 0 : full + rng() % (fit - full + 1);
        std::size_t tries = 0;
        const std::size_t found =
            bcl::detail::tokens::longest_prefix(fit, full, [&](std::size_t count) {
                ++tries;
                REQUIRE(count >= full);
                REQUIRE(count <= fit);
                return longest != 0 && count <= longest;
            });
        CAPTURE(full, fit, longest, found, tries);
        CHECK(tries <= 23);
        if (longest == 0) {
            CHECK(found == 0);
            continue;
        }
        const std::size_t step = std::max<std::size_t>(1, fit / 1024);
        CHECK(found <= longest);
        CHECK(longest - found < step);
    }
}
