// bcl::detail::tokens::cell_leveller, as a specification: a record dearer than the mean cell leads
// a micro-step of the R dearest records, each of its cells filled up to that record's cost and
// within T; the records left are dealt by LPT (cell_packer) into the cells left; where no record
// is above the mean cell, the plan is LPT's deal itself. Whatever it returns true for keeps the
// contract: every record in one cell, no cell empty, at most T tokens but a closing record alone.

#include <bcl/detail/tokens/cell_leveller.hpp>
#include <bcl/detail/tokens/cell_packer.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace {

struct instance {
    std::vector<std::uint64_t> tokens, cost;
    std::vector<std::uint8_t> closing;
    std::vector<std::uint32_t> order; // dearest first, ties to the lower index
    std::size_t ranks = 1, cells = 1;
    std::uint64_t capacity = 1;
};

instance draw(std::uint64_t seed) {
    std::mt19937_64 gen(seed);
    instance x;
    x.ranks = 1 + gen() % 4;
    x.cells = x.ranks * (1 + gen() % 4);
    x.capacity = 8 + gen() % 100;
    const std::size_t n = x.cells + gen() % 40;
    x.tokens.resize(n);
    x.cost.resize(n);
    x.closing.assign(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
        x.tokens[i] = gen() % 5 == 0 ? gen() % (x.capacity + 1) : gen() % (x.capacity / 4 + 1);
        // A heavy tail: a few records outweigh many (the case levelling is for).
        x.cost[i] = gen() % 6 == 0 ? 50 + gen() % 500 : gen() % 20;
        if (gen() % 20 == 0) {
            x.tokens[i] = x.capacity;
            x.closing[i] = 1;
        }
    }
    x.order.resize(n);
    std::iota(x.order.begin(), x.order.end(), std::uint32_t{0});
    std::stable_sort(x.order.begin(), x.order.end(),
                     [&](auto a, auto b) { return x.cost[a] > x.cost[b]; });
    return x;
}

} // namespace

TEST_CASE("cell leveller: every record in one cell, none empty, within T but a closing record "
          "alone; the levelled micro-step led by the R dearest, filled up to the dearest",
          "[tokens]") {
    bcl::detail::tokens::cell_leveller leveller;
    std::size_t planned = 0;
    std::size_t levelled = 0;
    for (std::uint64_t seed = 0; seed < 2000; ++seed) {
        const instance x = draw(seed);
        INFO("seed " << seed);
        if (!leveller.plan(x.order, x.tokens, x.cost, x.cells, x.ranks, x.capacity, x.closing))
            continue;
        ++planned;
        const auto cell_of = leveller.cells_of();
        std::vector<std::uint64_t> used(x.cells, 0), load(x.cells, 0);
        std::vector<std::size_t> count(x.cells, 0);
        for (std::size_t i = 0; i < x.tokens.size(); ++i) {
            REQUIRE(cell_of[i] < x.cells);
            used[cell_of[i]] += x.tokens[i];
            load[cell_of[i]] += x.cost[i];
            ++count[cell_of[i]];
        }
        for (std::size_t i = 0; i < x.tokens.size(); ++i)
            if (x.closing[i] != 0) REQUIRE(count[cell_of[i]] == 1);
        for (std::size_t c = 0; c < x.cells; ++c) {
            REQUIRE(count[c] > 0);
            REQUIRE(used[c] <= x.capacity);
        }
        // The dearest record above the mean cell leads the first micro-step (cells 0 to R-1),
        // with the R dearest one to a cell, and no cell of it dearer than the dearest record.
        const std::uint64_t total = std::accumulate(x.cost.begin(), x.cost.end(), std::uint64_t{0});
        const std::uint64_t head = x.cost[x.order[0]];
        if (head > total / x.cells) {
            ++levelled;
            std::vector<std::size_t> leads;
            for (std::size_t p = 0; p < x.ranks; ++p) leads.push_back(cell_of[x.order[p]]);
            std::sort(leads.begin(), leads.end());
            std::vector<std::size_t> first(x.ranks);
            std::iota(first.begin(), first.end(), std::size_t{0});
            REQUIRE(leads == first);
            for (std::size_t c = 0; c < x.ranks; ++c) REQUIRE(load[c] <= head);
        }
    }
    REQUIRE(planned > 600);
    REQUIRE(levelled > 300);
}

TEST_CASE("cell leveller: with no record above the mean cell, the plan is LPT's deal", "[tokens]") {
    bcl::detail::tokens::cell_leveller leveller;
    bcl::detail::tokens::cell_packer packer;
    std::size_t compared = 0;
    for (std::uint64_t seed = 0; seed < 500; ++seed) {
        instance x = draw(seed);
        for (auto& c : x.cost) c = 10 + c % 3; // costs close together: none above the mean cell
        std::stable_sort(x.order.begin(), x.order.end(),
                         [&](auto a, auto b) { return x.cost[a] > x.cost[b]; });
        const std::uint64_t total = std::accumulate(x.cost.begin(), x.cost.end(), std::uint64_t{0});
        if (x.cost[x.order[0]] > total / x.cells) continue;
        INFO("seed " << seed);
        const bool levelled_ok =
            leveller.plan(x.order, x.tokens, x.cost, x.cells, x.ranks, x.capacity, x.closing);
        const bool dealt_ok =
            packer.deal(x.order, x.tokens, x.cost, x.cells, x.capacity, x.closing);
        REQUIRE(levelled_ok == dealt_ok);
        if (!dealt_ok) continue;
        ++compared;
        const auto a = leveller.cells_of();
        const auto b = packer.cells_of();
        REQUIRE(std::equal(a.begin(), a.end(), b.begin(), b.end()));
    }
    REQUIRE(compared > 100);
}
