// bcl::detail::tokens::rank_group_dealer, as a specification: groups kept to one rank are dealt
// to (step, rank) bins whole, each bin's units into its cells of at most T tokens, none empty
// (but with allow_empty); where LPT on cost leaves a bin fewer units than its cells, the deal by
// count fills it; cell_load() adds up each cell's costs.

#include "../support/case_count.hpp"

#include <bcl/detail/tokens/rank_groups.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace {

using bcl::detail::tokens::rank_group_dealer;

struct grouped_units {
    std::vector<std::uint64_t> tokens, cost;
    std::vector<std::uint32_t> group_of;
    std::vector<std::uint64_t> group_tokens, group_cost;
    std::vector<std::uint32_t> by_cost;
};

grouped_units grouped(std::vector<std::uint64_t> tokens, std::vector<std::uint64_t> cost,
                      std::vector<std::uint32_t> group_of) {
    grouped_units g{std::move(tokens), std::move(cost), std::move(group_of), {}, {}, {}};
    const std::uint32_t groups = *std::max_element(g.group_of.begin(), g.group_of.end()) + 1;
    g.group_tokens.assign(groups, 0);
    g.group_cost.assign(groups, 0);
    for (std::size_t u = 0; u < g.tokens.size(); ++u) {
        g.group_tokens[g.group_of[u]] += g.tokens[u];
        g.group_cost[g.group_of[u]] += g.cost[u];
    }
    g.by_cost.resize(g.tokens.size());
    std::iota(g.by_cost.begin(), g.by_cost.end(), 0U);
    std::stable_sort(g.by_cost.begin(), g.by_cost.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return g.cost[a] > g.cost[b]; });
    return g;
}

bool deal_grouped(rank_group_dealer& dealer, const grouped_units& g, std::size_t bins,
                  std::size_t micro, std::uint64_t capacity, bool allow_empty = false) {
    return dealer.deal(g.by_cost, g.tokens, g.cost, {}, g.group_of, g.group_tokens, g.group_cost,
                       bins, micro, capacity, allow_empty);
}

/// Every group in one bin, every cell within capacity and (unless allowed) holding a unit, the
/// loads the cells' costs.
void check_grouped_deal(const rank_group_dealer& dealer, const grouped_units& g, std::size_t bins,
                        std::size_t micro, std::uint64_t capacity, bool allow_empty) {
    const std::size_t cells = bins * micro;
    std::vector<std::uint64_t> used(cells, 0);
    std::vector<std::uint64_t> load(cells, 0);
    std::vector<int> count(cells, 0);
    std::vector<std::size_t> bin_of_group(g.group_tokens.size(), cells);
    for (std::size_t u = 0; u < g.tokens.size(); ++u) {
        const std::uint32_t c = dealer.cell_of()[u];
        REQUIRE(c < cells);
        used[c] += g.tokens[u];
        load[c] += g.cost[u];
        ++count[c];
        const std::size_t bin = c / micro;
        if (bin_of_group[g.group_of[u]] == cells) bin_of_group[g.group_of[u]] = bin;
        REQUIRE(bin_of_group[g.group_of[u]] == bin); // a group stays in its bin
    }
    for (std::size_t c = 0; c < cells; ++c) {
        REQUIRE(used[c] <= capacity);
        if (!allow_empty) REQUIRE(count[c] > 0);
        REQUIRE(dealer.cell_load()[c] == load[c]);
    }
}

} // namespace

TEST_CASE("rank_group_dealer keeps each group in one bin, every cell within T and filled",
          "[tokens][rank_groups]") {
    std::mt19937_64 rng(41);
    rank_group_dealer dealer;
    std::size_t dealt = 0;
    for (std::size_t trial = 0; trial < bcl_test::random_cases(500); ++trial) {
        const std::size_t bins = 1 + rng() % 6;
        const std::size_t micro = 1 + rng() % 3;
        const std::uint64_t capacity = 20 + rng() % 200;
        const std::size_t n = bins * micro + rng() % 40;
        std::vector<std::uint64_t> tokens(n);
        std::vector<std::uint64_t> cost(n);
        std::vector<std::uint32_t> group_of(n);
        for (std::size_t u = 0; u < n; ++u) {
            tokens[u] = 1 + rng() % (capacity / 4);
            cost[u] = rng() % 100;
            group_of[u] = static_cast<std::uint32_t>(u / (1 + rng() % 3));
        }
        const grouped_units g = grouped(tokens, cost, group_of);
        const bool allow_empty = rng() % 4 == 0;
        if (!deal_grouped(dealer, g, bins, micro, capacity, allow_empty)) continue;
        CAPTURE(trial, bins, micro, capacity, n);
        check_grouped_deal(dealer, g, bins, micro, capacity, allow_empty);
        ++dealt;
    }
    CHECK(dealt >= bcl_test::random_cases(500) / 2);
}

TEST_CASE("rank_group_dealer deals by count where LPT on cost leaves a bin short",
          "[tokens][rank_groups]") {
    // 8 groups of one unit, 4 bins of 2 cells, T = 64: LPT on cost puts the dearest (55) alone in
    // a bin, which then has one unit for two cells; by count every bin gets two.
    const grouped_units g = grouped({55, 41, 33, 18, 20, 3, 5, 2}, {55, 41, 33, 18, 20, 3, 5, 2},
                                    {0, 1, 2, 3, 4, 5, 6, 7});
    rank_group_dealer dealer;
    REQUIRE(deal_grouped(dealer, g, 4, 2, 64));
    check_grouped_deal(dealer, g, 4, 2, 64, false);
    // One group cannot fill two bins, unless empty cells are allowed.
    const grouped_units one = grouped({10, 10, 10}, {1, 1, 1}, {0, 0, 0});
    CHECK_FALSE(deal_grouped(dealer, one, 2, 1, 100));
    REQUIRE(deal_grouped(dealer, one, 2, 1, 100, true));
    check_grouped_deal(dealer, one, 2, 1, 100, true);
}
