// bcl::detail::tokens::search_packer, as a specification: a bounded depth-first search that
// packs records into cells of at most T tokens, none empty; on small plans it finds a packing
// whenever one exists (checked against every assignment), it respects records that close their
// cell, and it stops at its budget.

#include "../support/case_count.hpp"

#include <bcl/detail/tokens/search_packer.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace {

using bcl::detail::tokens::search_packer;

std::vector<std::uint32_t> search_largest_first(const std::vector<std::uint64_t>& tokens) {
    std::vector<std::uint32_t> order(tokens.size());
    std::iota(order.begin(), order.end(), 0U);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return tokens[a] > tokens[b]; });
    return order;
}

/// Every assignment of the records to the cells: whether one has no cell empty or above T.
bool search_any_assignment_packs(const std::vector<std::uint64_t>& tokens, std::size_t cells,
                                 std::uint64_t capacity) {
    std::vector<std::size_t> assigned(tokens.size(), 0);
    for (;;) {
        std::vector<std::uint64_t> used(cells, 0);
        std::vector<int> count(cells, 0);
        for (std::size_t i = 0; i < tokens.size(); ++i) {
            used[assigned[i]] += tokens[i];
            ++count[assigned[i]];
        }
        if (std::all_of(count.begin(), count.end(), [](int c) { return c > 0; }) &&
            std::all_of(used.begin(), used.end(), [&](std::uint64_t u) { return u <= capacity; }))
            return true;
        std::size_t i = 0;
        while (i < tokens.size() && ++assigned[i] == cells) assigned[i++] = 0;
        if (i == tokens.size()) return false;
    }
}

void search_check_packing(const search_packer& packer, const std::vector<std::uint64_t>& tokens,
                          std::size_t cells, std::uint64_t capacity) {
    std::vector<std::uint64_t> used(cells, 0);
    std::vector<int> count(cells, 0);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        REQUIRE(packer.cell_of()[i] < cells);
        used[packer.cell_of()[i]] += tokens[i];
        ++count[packer.cell_of()[i]];
    }
    for (std::size_t c = 0; c < cells; ++c) {
        REQUIRE(count[c] > 0);
        REQUIRE(used[c] <= capacity);
    }
}

} // namespace

TEST_CASE("search_packer finds a packing whenever one exists, against every assignment",
          "[tokens][search_packer]") {
    std::mt19937_64 rng(13);
    search_packer packer;
    std::size_t packed = 0;
    for (std::size_t trial = 0; trial < bcl_test::random_cases(500); ++trial) {
        const std::size_t cells = 1 + rng() % 4;
        std::vector<std::uint64_t> tokens(cells + rng() % 5);
        for (auto& t : tokens) t = rng() % 11;
        const std::uint64_t capacity = 10;
        const bool exists = search_any_assignment_packs(tokens, cells, capacity);
        const bool found =
            packer.pack(search_largest_first(tokens), tokens, cells, capacity, {}, 1000000);
        CAPTURE(trial, tokens, cells);
        REQUIRE(found == exists);
        if (found) {
            search_check_packing(packer, tokens, cells, capacity);
            ++packed;
        }
    }
    CHECK(packed > 0);
}

TEST_CASE("search_packer packs the batch first fit misses", "[tokens][search_packer]") {
    // Four cells of 1000: {491, 489}, {448, 432}, {420, 336, 218}, {423, 333, 215}; first fit
    // decreasing leaves 215 without room.
    const std::vector<std::uint64_t> tokens{420, 491, 423, 432, 489, 333, 218, 215, 448, 336};
    search_packer packer;
    REQUIRE(packer.pack(search_largest_first(tokens), tokens, 4, 1000, {}, 100000));
    search_check_packing(packer, tokens, 4, 1000);
    // A budget too small to reach it gives up.
    CHECK_FALSE(packer.pack(search_largest_first(tokens), tokens, 4, 1000, {}, 5));
}

TEST_CASE("search_packer gives a record that closes its cell a cell alone, and refuses what "
          "cannot pack",
          "[tokens][search_packer]") {
    // Record 0 closes its cell (counted as T): the other three share the second cell.
    const std::vector<std::uint64_t> tokens{10, 3, 3, 4};
    const std::vector<std::uint8_t> closing{1, 0, 0, 0};
    search_packer packer;
    REQUIRE(packer.pack(search_largest_first(tokens), tokens, 2, 10, closing, 1000));
    const auto cell_of = packer.cell_of();
    CHECK(cell_of[1] == cell_of[2]);
    CHECK(cell_of[2] == cell_of[3]);
    CHECK(cell_of[0] != cell_of[1]);
    // Beside a record that closes its cell, 6 + 6 do not share the other; five cells need five
    // records; tokens above the room never pack.
    const std::vector<std::uint64_t> pair{10, 6, 6};
    CHECK_FALSE(packer.pack(search_largest_first(pair), pair, 2, 10,
                            std::vector<std::uint8_t>{1, 0, 0}, 1000));
    CHECK_FALSE(packer.pack(search_largest_first(tokens), tokens, 5, 10, closing, 1000));
    const std::vector<std::uint64_t> big{6, 6, 6};
    CHECK_FALSE(packer.pack(search_largest_first(big), big, 1, 10, {}, 1000));
    CHECK_FALSE(packer.pack(search_largest_first(big), big, 0, 10, {}, 1000));
}
