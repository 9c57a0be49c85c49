// bcl::detail::tokens::first_fit_packer, as a specification: each record, in the order given, to
// the lowest cell with room (a record above the budget to an empty cell, which it closes); then
// every empty cell takes the last-placed record of a cell of two or more. Checked against a
// reference written here by linear scans, and through bcl::token_planner: a held batch reaches
// the token bound where first fit packs and LPT does not.

#include <bcl/detail/tokens/first_fit.hpp>
#include <bcl/token_plan.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

namespace {

// First fit by linear scans: nullopt where a record fits no cell or a cell stays empty.
std::optional<std::vector<std::uint32_t>> reference_first_fit(
    const std::vector<std::uint32_t>& order, const std::vector<std::uint64_t>& tokens,
    const std::vector<std::uint8_t>& closing, std::size_t cells, std::uint64_t capacity) {
    if (order.size() < cells) return std::nullopt;
    std::vector<std::uint64_t> used(cells, 0);
    std::vector<bool> closed(cells, false);
    std::vector<std::size_t> count(cells, 0);
    std::vector<std::uint32_t> cell_of(tokens.size(), 0);
    for (const std::uint32_t r : order) {
        const bool closes = closing[r] != 0;
        std::size_t c = 0;
        while (c < cells && (closed[c] || (closes ? used[c] != 0 || count[c] != 0
                                                  : used[c] + tokens[r] > capacity)))
            ++c;
        if (c == cells) return std::nullopt;
        cell_of[r] = static_cast<std::uint32_t>(c);
        ++count[c];
        used[c] += closes ? capacity : tokens[r];
        closed[c] = closes;
    }
    for (std::size_t k = order.size(); k-- > 0;) {
        const auto empty = std::find(count.begin(), count.end(), std::size_t{0});
        if (empty == count.end()) break;
        const std::uint32_t r = order[k];
        if (count[cell_of[r]] < 2) continue;
        --count[cell_of[r]];
        cell_of[r] = static_cast<std::uint32_t>(empty - count.begin());
        ++*empty;
    }
    if (std::find(count.begin(), count.end(), std::size_t{0}) != count.end()) return std::nullopt;
    return cell_of;
}

} // namespace

TEST_CASE("first fit: each record to the lowest cell with room, empty cells then filled, as the "
          "reference",
          "[tokens]") {
    bcl::detail::tokens::first_fit_packer packer;
    std::size_t packed = 0;
    for (std::uint64_t seed = 0; seed < 2000; ++seed) {
        std::mt19937_64 gen(seed);
        const std::uint64_t capacity = 1 + gen() % 50;
        const std::size_t n = gen() % 30;
        const std::size_t cells = 1 + gen() % 12;
        std::vector<std::uint64_t> tokens(n);
        std::vector<std::uint8_t> closing(n, 0);
        for (std::size_t i = 0; i < n; ++i) {
            tokens[i] = gen() % (capacity + 1); // zeros and full cells too
            if (gen() % 10 == 0) {              // above the budget, alone
                tokens[i] = capacity + 1 + gen() % 10;
                closing[i] = 1;
            }
        }
        std::vector<std::uint32_t> order(n);
        std::iota(order.begin(), order.end(), std::uint32_t{0});
        // Largest first as the planner deals (above-budget records first), or any order.
        if (seed % 2 == 0)
            std::stable_sort(order.begin(), order.end(),
                             [&](auto a, auto b) { return tokens[a] > tokens[b]; });
        else
            std::shuffle(order.begin(), order.end(), gen);
        INFO("seed " << seed);
        const auto expected = reference_first_fit(order, tokens, closing, cells, capacity);
        const bool ok = packer.deal(order, tokens, cells, capacity, closing);
        REQUIRE(ok == expected.has_value());
        if (!ok) continue;
        ++packed;
        const auto got = packer.cell_of();
        REQUIRE(std::vector<std::uint32_t>(got.begin(), got.end()) == *expected);
        // The contract, read off the cells: none empty, within T, a closing record alone.
        std::vector<std::uint64_t> used(cells, 0);
        std::vector<std::size_t> count(cells, 0);
        for (const std::uint32_t r : order) {
            used[got[r]] += tokens[r];
            ++count[got[r]];
        }
        for (const std::uint32_t r : order)
            if (closing[r] != 0) REQUIRE(count[got[r]] == 1);
        for (std::size_t c = 0; c < cells; ++c) {
            REQUIRE(count[c] > 0);
            REQUIRE((used[c] <= capacity || count[c] == 1));
        }
    }
    REQUIRE(packed > 300);
}

TEST_CASE("first fit: a held batch reaches the token bound where LPT leaves no room", "[tokens]") {
    // T = 10, two ranks, 20 tokens: one micro-step holds them only as {6, 4} and {5, 3, 2}.
    // LPT by cost (the default cost follows tokens) deals 6 | 5, 4 -> 5's cell, 3 -> 6's, and 2
    // finds 1 token of room in each; first fit packs 6, 4 and 5, 3, 2.
    const std::vector<std::uint64_t> tokens{6, 5, 4, 3, 2};
    bcl::token_planner planner;
    std::vector<bcl::micro_slot> plan(tokens.size());
    const bcl::token_plan_summary s =
        planner.plan_held(tokens, {}, {}, {.ranks = 2, .max_tokens = 10}, 1, {}, plan);
    CHECK(s.micro_steps == 1);
    CHECK(s.micro_steps_bound == 1);
    CHECK(plan[0].rank == plan[2].rank);
    CHECK(plan[1].rank == plan[3].rank);
    CHECK(plan[1].rank == plan[4].rank);
}
