// bcl::detail::tokens::cell_rebalancer, as a specification: moves and swaps between the dearest
// cell and the cheapest ones lower the dearest cell's cost (never raise it), keep every cell
// within the token capacity and non-empty, leave records alone above T where they are, and give
// the same result for the same input.

#include "../support/case_count.hpp"

#include <bcl/detail/tokens/cell_rebalancer.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace {

using bcl::detail::tokens::cell_rebalancer;

struct rebalanced_totals {
    std::vector<std::uint64_t> load, used;
    std::vector<int> count;
};

rebalanced_totals rebalanced_totals_of(const std::vector<std::uint32_t>& cell_of,
                                       const std::vector<std::uint64_t>& tokens,
                                       const std::vector<std::uint64_t>& cost, std::size_t cells) {
    rebalanced_totals t{std::vector<std::uint64_t>(cells, 0), std::vector<std::uint64_t>(cells, 0),
                        std::vector<int>(cells, 0)};
    for (std::size_t r = 0; r < cell_of.size(); ++r) {
        t.load[cell_of[r]] += cost[r];
        t.used[cell_of[r]] += tokens[r];
        ++t.count[cell_of[r]];
    }
    return t;
}

} // namespace

TEST_CASE("cell_rebalancer lowers the dearest cell within the capacity, no cell emptied",
          "[tokens][cell_rebalancer]") {
    std::mt19937_64 rng(17);
    cell_rebalancer rebalancer;
    std::size_t lowered = 0;
    for (std::size_t trial = 0; trial < bcl_test::random_cases(400); ++trial) {
        const std::size_t cells = 1 + rng() % 12;
        const std::uint64_t capacity = 100;
        // A packing of small records, the first cells filled first (first fit's shape).
        std::vector<std::uint64_t> tokens;
        std::vector<std::uint64_t> cost;
        std::vector<std::uint32_t> cell_of;
        for (std::size_t c = 0; c < cells; ++c) {
            std::uint64_t used = 0;
            const std::size_t records = 1 + rng() % 6;
            for (std::size_t k = 0; k < records; ++k) {
                const std::uint64_t t = 1 + rng() % 30;
                if (k > 0 && used + t > capacity) break;
                used += t;
                tokens.push_back(t);
                cost.push_back(rng() % 2 == 0 ? t : 1 + rng() % 50);
                cell_of.push_back(static_cast<std::uint32_t>(c));
            }
        }
        const rebalanced_totals before = rebalanced_totals_of(cell_of, tokens, cost, cells);
        std::vector<std::uint32_t> moved = cell_of;
        rebalancer.rebalance(moved, tokens, cost, cells, capacity, {}, 2 * cells);
        const rebalanced_totals after = rebalanced_totals_of(moved, tokens, cost, cells);
        CAPTURE(trial, cells);
        for (std::size_t c = 0; c < cells; ++c) {
            REQUIRE(after.count[c] > 0);
            REQUIRE(after.used[c] <= capacity);
        }
        const auto top_before = *std::max_element(before.load.begin(), before.load.end());
        const auto top_after = *std::max_element(after.load.begin(), after.load.end());
        REQUIRE(top_after <= top_before);
        lowered += top_after < top_before;
        // The same input, the same result.
        std::vector<std::uint32_t> again = cell_of;
        rebalancer.rebalance(again, tokens, cost, cells, capacity, {}, 2 * cells);
        REQUIRE(again == moved);
    }
    CHECK(lowered >= bcl_test::random_cases(400) / 4);
}

TEST_CASE("cell_rebalancer by hand: a move, a swap, and a record alone above T left alone",
          "[tokens][cell_rebalancer]") {
    cell_rebalancer rebalancer;
    // Cell 0 costs 9 (5 + 4), cell 1 costs 1: moving the 4 or swapping the 5 and the 1 gives
    // 5 and 5 (the swap, found first).
    std::vector<std::uint32_t> cell_of{0, 0, 1};
    rebalancer.rebalance(cell_of, std::vector<std::uint64_t>{5, 4, 1},
                         std::vector<std::uint64_t>{5, 4, 1}, 2, 10, {}, 4);
    CHECK(rebalanced_totals_of(cell_of, {5, 4, 1}, {5, 4, 1}, 2).load ==
          std::vector<std::uint64_t>{5, 5});
    // Only a move fits the tokens: cell 0 holds 6 + 2 + 2 tokens (cost 5 + 4 + 0), cell 1 holds
    // 8 (cost 1); a swap for the 8 overfills cell 0; moving the 2 of cost 4 gives 5 and 5.
    std::vector<std::uint32_t> move{0, 0, 1, 0};
    rebalancer.rebalance(move, std::vector<std::uint64_t>{6, 2, 8, 2},
                         std::vector<std::uint64_t>{5, 4, 1, 0}, 2, 10, {}, 4);
    CHECK(move == std::vector<std::uint32_t>{0, 1, 1, 0});
    // No room to move: cell 0 holds 6 + 4 tokens (cost 6 + 4), cell 1 holds 8 + 2 (cost 1 + 1);
    // swapping the 4 (cost 4) and the 2 (cost 1) is outside capacity (6 + 2 fits, 8 + 4 does
    // not); swapping the 6 and the 8 is not cheaper. Nothing changes.
    std::vector<std::uint32_t> full{0, 0, 1, 1};
    rebalancer.rebalance(full, std::vector<std::uint64_t>{6, 4, 8, 2},
                         std::vector<std::uint64_t>{6, 4, 1, 1}, 2, 10, {}, 4);
    CHECK(full == std::vector<std::uint32_t>{0, 0, 1, 1});
    // A swap: cell 0 holds tokens 5 + 5 (cost 8 + 8), cell 1 tokens 5 + 5 (cost 1 + 1): swapping
    // an 8 for a 1 gives 9 and 9.
    std::vector<std::uint32_t> swap{0, 0, 1, 1};
    rebalancer.rebalance(swap, std::vector<std::uint64_t>{5, 5, 5, 5},
                         std::vector<std::uint64_t>{8, 8, 1, 1}, 2, 10, {}, 4);
    const rebalanced_totals t = rebalanced_totals_of(swap, {5, 5, 5, 5}, {8, 8, 1, 1}, 2);
    CHECK(t.load == std::vector<std::uint64_t>{9, 9});
    // The dearest cell holds a record alone above T: it stays.
    std::vector<std::uint32_t> alone{0, 1, 1};
    rebalancer.rebalance(alone, std::vector<std::uint64_t>{10, 1, 1},
                         std::vector<std::uint64_t>{50, 1, 1}, 2, 10,
                         std::vector<std::uint8_t>{1, 0, 0}, 4);
    CHECK(alone == std::vector<std::uint32_t>{0, 1, 1});
}
