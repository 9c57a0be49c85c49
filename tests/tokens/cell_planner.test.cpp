// bcl::detail::tokens::cell_planner, as a specification: at one micro-batch count, a plan's units
// dealt into R*K*M cells of T tokens (none above T but a unit alone, none empty unless allowed),
// the cells laid out one place each; the stream's prefix test keeps its deal for the plan that
// follows it, which is then the plan a fresh deal of that prefix makes; groups kept to a rank
// stay on it and leave the steps bound.

#include <bcl/detail/tokens/cell_planner.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <random>
#include <set>
#include <tuple>
#include <vector>

namespace {

using bcl::detail::tokens::cell_planner;
using bcl::detail::tokens::read_records;
using bcl::detail::tokens::token_records;
using bcl::detail::tokens::token_units;

struct planned_cells {
    std::vector<std::uint64_t> tokens; // by cell
    std::vector<std::size_t> units;    // by cell
    std::set<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> places;
};

planned_cells cells_of(cell_planner& planner, const token_units& u, std::size_t cells) {
    planned_cells p{std::vector<std::uint64_t>(cells, 0), std::vector<std::size_t>(cells, 0), {}};
    for (std::size_t unit = 0; unit < u.tokens.size(); ++unit) {
        p.tokens[planner.cell_of()[unit]] += u.tokens[unit];
        ++p.units[planner.cell_of()[unit]];
    }
    for (std::size_t c = 0; c < cells; ++c) {
        const auto& at = planner.layout().place(c);
        p.places.insert({at.step, at.micro, at.rank});
    }
    return p;
}

} // namespace

TEST_CASE("cell_planner: a count that packs fills every cell within T, each cell its own place",
          "[tokens][cell_planner]") {
    std::mt19937_64 rng(17);
    std::size_t packed = 0;
    for (int trial = 0; trial < 400; ++trial) {
        const std::size_t r = 1 + rng() % 6;
        const std::size_t steps = 1 + rng() % 3;
        const std::size_t micro = 1 + rng() % 4;
        const std::uint64_t t = 50 + rng() % 500;
        const std::size_t cells = r * steps * micro;
        std::vector<std::uint64_t> tokens(cells + rng() % (4 * cells));
        for (auto& x : tokens) x = 1 + rng() % (trial % 2 == 0 ? t : t / 3);
        token_records records;
        read_records(tokens, {}, t, false, "t", records);
        token_units u;
        u.make(records, {}, false, t, "t");
        cell_planner planner;
        const bool allow_empty = trial % 7 == 0;
        if (!planner.plan(u, r, steps, micro, t, false, allow_empty)) continue;
        ++packed;
        const planned_cells p = cells_of(planner, u, cells);
        CAPTURE(trial, r, steps, micro, t, tokens.size());
        CHECK(p.places.size() == cells);
        for (std::size_t c = 0; c < cells; ++c) {
            CHECK(p.tokens[c] <= t);
            if (!allow_empty) CHECK(p.units[c] >= 1);
        }
        CHECK(planner.steps_free());
    }
    CHECK(packed > 200);
}

TEST_CASE("cell_planner: the plan after a stream's prefix test keeps its deal, the plan a fresh "
          "deal of that prefix makes",
          "[tokens][cell_planner]") {
    std::mt19937_64 rng(3);
    for (int trial = 0; trial < 200; ++trial) {
        const std::size_t r = 1 + rng() % 4;
        const std::size_t micro = 1 + rng() % 3;
        const std::uint64_t t = 100 + rng() % 400;
        const std::size_t cells = r * micro;
        std::vector<std::uint64_t> tokens(cells * (1 + rng() % 5));
        for (auto& x : tokens) x = 1 + rng() % (t / 2);
        token_records records;
        read_records(tokens, {}, t, false, "t", records);
        const std::size_t count = cells + rng() % (tokens.size() - cells + 1);
        cell_planner stream;
        stream.order_candidates(records.cost);
        if (!stream.packs(records, count, cells, t)) continue;
        REQUIRE(stream.last_packed() == count);
        token_units u;
        u.make(records, {}, false, t, "t");
        u.keep_prefix(count);
        REQUIRE(stream.plan(u, r, 1, micro, t, false, false, true));
        cell_planner fresh;
        REQUIRE(fresh.plan(u, r, 1, micro, t, false, false));
        CAPTURE(trial, count);
        CHECK(std::vector<std::uint32_t>(stream.cell_of().begin(), stream.cell_of().end()) ==
              std::vector<std::uint32_t>(fresh.cell_of().begin(), fresh.cell_of().end()));
    }
}

TEST_CASE("cell_planner: groups kept to a rank stay on it, and bind the steps",
          "[tokens][cell_planner]") {
    std::vector<std::uint64_t> tokens(48);
    std::vector<std::uint64_t> groups(tokens.size());
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        tokens[i] = 10 + (i * 37) % 60;
        groups[i] = i / 4;
    }
    token_records records;
    read_records(tokens, {}, 1000, false, "t", records);
    token_units u;
    u.make(records, groups, false, 1000, "t");
    cell_planner planner;
    REQUIRE(planner.plan(u, 2, 2, 2, 1000, true, false));
    CHECK_FALSE(planner.steps_free());
    std::vector<std::set<std::pair<std::uint32_t, std::uint32_t>>> where(12);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        const auto& at = planner.layout().place(planner.cell_of()[i]);
        where[groups[i]].insert({at.step, at.rank});
    }
    for (const auto& places : where) CHECK(places.size() == 1);
}
