// bcl::detail::tokens::micro_layout, as a specification: lay_out() cuts a plan's cells into
// micro-steps of R (every rank once in each) and steps of M, and its objective (the sum over
// micro-steps of the dearest cell) is the least any cut of those cells reaches, checked against
// every cut of small instances; lay_out_ranked() keeps each cell to its rank and step and lines
// every rank's cells up by cost, again the least of every order; regroup() renumbers micro-steps.

#include <bcl/detail/tokens/micro_layout.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <random>
#include <set>
#include <tuple>
#include <vector>

namespace {

using bcl::detail::tokens::micro_layout;

/// Cell loads given as one record per cell (record c in cell c, its cost the cell's load).
struct one_record_cells {
    std::vector<std::uint32_t> cell_of;
    std::vector<std::uint64_t> cost;
};

one_record_cells cells_with(const std::vector<std::uint64_t>& loads) {
    one_record_cells c;
    c.cost = loads;
    c.cell_of.resize(loads.size());
    std::iota(c.cell_of.begin(), c.cell_of.end(), std::uint32_t{0});
    return c;
}

/// The least objective of any cut of `loads` into groups of `ranks` consecutive cells, over every
/// order of the cells.
std::uint64_t brute_force_least(std::vector<std::uint64_t> loads, std::size_t ranks) {
    std::sort(loads.begin(), loads.end());
    std::uint64_t best = ~std::uint64_t{0};
    do {
        std::uint64_t sum = 0;
        for (std::size_t k = 0; k < loads.size(); k += ranks)
            sum += *std::max_element(loads.begin() + static_cast<std::ptrdiff_t>(k),
                                     loads.begin() + static_cast<std::ptrdiff_t>(k + ranks));
        best = std::min(best, sum);
    } while (std::next_permutation(loads.begin(), loads.end()));
    return best;
}

std::vector<std::uint64_t> random_loads(std::mt19937_64& rng, std::size_t n) {
    std::uniform_int_distribution<std::uint64_t> value(0, 20);
    std::vector<std::uint64_t> loads(n);
    for (std::uint64_t& l : loads) l = value(rng);
    return loads;
}

} // namespace

TEST_CASE("lay_out seats every cell once, each micro-step with one cell of every rank",
          "[tokens][micro_layout]") {
    std::mt19937_64 rng(7);
    micro_layout layout;
    for (int trial = 0; trial < 200; ++trial) {
        const std::size_t ranks = 1 + rng() % 5;
        const std::size_t micro = 1 + rng() % 3;
        const std::size_t steps = 1 + rng() % 3;
        const std::size_t cells = ranks * micro * steps;
        const one_record_cells c = cells_with(random_loads(rng, cells));
        layout.lay_out(c.cell_of, c.cost, cells, ranks, micro);
        std::set<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> seen;
        for (std::size_t cell = 0; cell < cells; ++cell) {
            const auto& p = layout.place(cell);
            REQUIRE(p.step < steps);
            REQUIRE(p.micro < micro);
            REQUIRE(p.rank < ranks);
            seen.insert({p.step, p.micro, p.rank});
        }
        REQUIRE(seen.size() == cells);
    }
}

TEST_CASE("lay_out's objective is the sum of each micro-step's dearest cell, the least of any cut",
          "[tokens][micro_layout]") {
    std::mt19937_64 rng(11);
    micro_layout layout;
    for (int trial = 0; trial < 150; ++trial) {
        const std::size_t ranks = 1 + rng() % 3;
        const std::size_t cells = ranks * (1 + rng() % (ranks == 1 ? 7 : 8 / ranks));
        const std::vector<std::uint64_t> loads = random_loads(rng, cells);
        const one_record_cells c = cells_with(loads);
        // One step of every micro-step, so that place().micro is the micro-step.
        const std::uint64_t objective =
            layout.lay_out(c.cell_of, c.cost, cells, ranks, cells / ranks);
        // The objective, recomputed from the places.
        std::vector<std::uint64_t> dearest(cells / ranks, 0);
        std::uint64_t heaviest = 0;
        for (std::size_t cell = 0; cell < cells; ++cell) {
            auto& d = dearest[layout.place(cell).micro];
            d = std::max(d, loads[cell]);
            heaviest = std::max(heaviest, loads[cell]);
        }
        CHECK(objective == std::accumulate(dearest.begin(), dearest.end(), std::uint64_t{0}));
        CHECK(layout.objective() == objective);
        CHECK(layout.heaviest() == heaviest);
        CHECK(objective == brute_force_least(loads, ranks));
    }
}

TEST_CASE("lay_out adds up the costs of a cell's records, and turns the dearest cell round the "
          "ranks",
          "[tokens][micro_layout]") {
    // Records 0..5 in cells 0..2: cell loads 5 (0+5), 9 (4+5), 2 (2).
    const std::vector<std::uint32_t> cell_of{0, 1, 1, 2, 0, 1};
    const std::vector<std::uint64_t> cost{0, 4, 3, 2, 5, 2};
    micro_layout layout;
    layout.lay_out(cell_of, cost, 3, 1, 3);
    CHECK(layout.place(1).micro == 0); // the dearest first
    CHECK(layout.place(0).micro == 1);
    CHECK(layout.place(2).micro == 2);
    CHECK(layout.objective() == 16);

    // Four equal cells on two ranks: ties keep cell order, and micro-step k's dearest cell goes to
    // rank k mod R, so no rank always runs the dearest.
    const std::vector<std::uint32_t> four{0, 1, 2, 3};
    const std::vector<std::uint64_t> same{1, 1, 1, 1};
    layout.lay_out(four, same, 4, 2, 2);
    CHECK(layout.place(0).rank == 0);
    CHECK(layout.place(1).rank == 1);
    CHECK(layout.place(2).rank == 1);
    CHECK(layout.place(3).rank == 0);
    CHECK(layout.place(2).micro == 1);
}

TEST_CASE("lay_out_ranked keeps each cell to its rank and step and lines ranks up by cost, the "
          "least of every order",
          "[tokens][micro_layout]") {
    std::mt19937_64 rng(13);
    micro_layout layout;
    for (int trial = 0; trial < 200; ++trial) {
        const std::size_t ranks = 1 + rng() % 3;
        const std::size_t steps = 1 + rng() % 2;
        const std::size_t micro = 1 + rng() % 3;
        const std::size_t cells = ranks * steps * micro;
        const std::vector<std::uint64_t> load = random_loads(rng, cells);
        const std::uint64_t objective = layout.lay_out_ranked(load, ranks, steps, micro);
        for (std::size_t cell = 0; cell < cells; ++cell) {
            const std::size_t bin = cell / micro; // step * R + rank
            REQUIRE(layout.place(cell).step == bin / ranks);
            REQUIRE(layout.place(cell).rank == bin % ranks);
            REQUIRE(layout.place(cell).micro < micro);
        }
        // Every order of every rank's cells within its step, the least objective of them.
        std::uint64_t least = ~std::uint64_t{0};
        std::vector<std::vector<std::size_t>> order(ranks * steps);
        for (std::size_t bin = 0; bin < ranks * steps; ++bin) {
            order[bin].resize(micro);
            std::iota(order[bin].begin(), order[bin].end(), bin * micro);
        }
        // Odometer over the permutations of each bin (micro <= 3, bins <= 6: at most 6^6).
        for (;;) {
            std::uint64_t sum = 0;
            for (std::size_t s = 0; s < steps; ++s)
                for (std::size_t j = 0; j < micro; ++j) {
                    std::uint64_t top = 0;
                    for (std::size_t r = 0; r < ranks; ++r)
                        top = std::max(top, load[order[s * ranks + r][j]]);
                    sum += top;
                }
            least = std::min(least, sum);
            std::size_t bin = 0;
            while (bin < order.size() &&
                   !std::next_permutation(order[bin].begin(), order[bin].end()))
                ++bin;
            if (bin == order.size()) break;
        }
        CHECK(objective == least);
    }
}

TEST_CASE("regroup numbers one step's micro-steps as steps of M", "[tokens][micro_layout]") {
    const std::vector<std::uint32_t> cell_of{0, 1, 2, 3, 4, 5};
    const std::vector<std::uint64_t> cost{6, 5, 4, 3, 2, 1};
    micro_layout layout;
    layout.lay_out(cell_of, cost, 6, 1, 6); // one step of six micro-steps
    layout.regroup(4);
    for (std::uint32_t cell = 0; cell < 6; ++cell) {
        CHECK(layout.place(cell).step == cell / 4);
        CHECK(layout.place(cell).micro == cell % 4);
    }
}
