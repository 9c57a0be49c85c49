// bcl::detail::tokens::cell_packer, as a specification: LPT with a token capacity. Each record, in
// the order given, goes to the cell of least cost among those with room for its tokens (ties: the
// cell of fewer records, then the lower cell); a closing record takes an empty cell and closes
// it; the deal fails when a record finds no cell or a cell stays empty. Checked against a
// reference written here by linear scans, on any order (the parked cells must not change a
// choice), with zeros, full cells, ties and closing records; the scratch is reused across deals.

#include <bcl/detail/tokens/cell_packer.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <optional>
#include <random>
#include <tuple>
#include <vector>

namespace {

struct reference_deal {
    std::vector<std::uint32_t> cell_of;
    std::vector<std::uint64_t> loads;
};

std::optional<reference_deal> reference_packing(const std::vector<std::uint32_t>& order,
                                                const std::vector<std::uint64_t>& tokens,
                                                const std::vector<std::uint64_t>& cost,
                                                const std::vector<std::uint8_t>& closing,
                                                std::size_t cells, std::uint64_t capacity) {
    reference_deal d{std::vector<std::uint32_t>(tokens.size(), ~std::uint32_t{0}),
                     std::vector<std::uint64_t>(cells, 0)};
    std::vector<std::uint64_t> used(cells, 0);
    std::vector<std::uint32_t> count(cells, 0);
    std::vector<bool> closed(cells, false);
    for (const std::uint32_t r : order) {
        const bool closes = closing[r] != 0;
        std::optional<std::size_t> best;
        for (std::size_t c = 0; c < cells; ++c) {
            if (closed[c] || used[c] + tokens[r] > capacity || (closes && count[c] != 0)) continue;
            if (!best ||
                std::tie(d.loads[c], count[c], c) < std::tie(d.loads[*best], count[*best], *best))
                best = c;
        }
        if (!best) return std::nullopt;
        d.cell_of[r] = static_cast<std::uint32_t>(*best);
        d.loads[*best] += cost[r];
        used[*best] += tokens[r];
        ++count[*best];
        closed[*best] = closes;
    }
    if (std::find(count.begin(), count.end(), 0U) != count.end()) return std::nullopt;
    return d;
}

} // namespace

TEST_CASE("cell packer: each record to the cheapest cell with room, as the reference", "[tokens]") {
    bcl::detail::tokens::cell_packer packer; // one packer: its scratch is reused
    std::size_t packed = 0;
    for (std::uint64_t seed = 0; seed < 3000; ++seed) {
        std::mt19937_64 gen(seed);
        const std::uint64_t capacity = 1 + gen() % 60;
        const std::size_t cells = 1 + gen() % 10;
        const std::size_t n = cells + gen() % 30; // a few fewer records than cells fail anyway
        std::vector<std::uint64_t> tokens(n);
        std::vector<std::uint64_t> cost(n);
        std::vector<std::uint8_t> closing(n, 0);
        for (std::size_t i = 0; i < n; ++i) {
            // Mostly small, some up to a full cell, zeros too.
            tokens[i] = gen() % 4 == 0 ? gen() % (capacity + 1) : gen() % (capacity / 4 + 1);
            // Costs that follow tokens, or not; few values, so that loads tie.
            cost[i] = seed % 3 == 0 ? tokens[i] * 3 : gen() % 5;
            if (gen() % 12 == 0) { // above the budget: counted as T tokens, alone
                tokens[i] = capacity;
                closing[i] = 1;
            }
        }
        std::vector<std::uint32_t> order(n);
        std::iota(order.begin(), order.end(), std::uint32_t{0});
        if (seed % 2 == 0) // the planner's order: the dearest first
            std::stable_sort(order.begin(), order.end(),
                             [&](auto a, auto b) { return cost[a] > cost[b]; });
        else
            std::shuffle(order.begin(), order.end(), gen);
        INFO("seed " << seed);
        const auto expected = reference_packing(order, tokens, cost, closing, cells, capacity);
        const bool ok = packer.deal(order, tokens, cost, cells, capacity, closing);
        REQUIRE(ok == expected.has_value());
        if (!ok) continue;
        ++packed;
        const auto got = packer.cells_of();
        REQUIRE(std::vector<std::uint32_t>(got.begin(), got.end()) == expected->cell_of);
        const auto loads = packer.loads();
        REQUIRE(std::vector<std::uint64_t>(loads.begin(), loads.end()) == expected->loads);
    }
    REQUIRE(packed > 600);
}

TEST_CASE("cell packer: a deal that cannot fill every cell fails", "[tokens]") {
    bcl::detail::tokens::cell_packer packer;
    const std::vector<std::uint64_t> tokens{5, 5};
    const std::vector<std::uint64_t> cost{5, 5};
    const std::vector<std::uint32_t> order{0, 1};
    CHECK(packer.deal(order, tokens, cost, 2, 10));
    CHECK_FALSE(packer.deal(order, tokens, cost, 3, 10)); // a cell left empty
    CHECK_FALSE(packer.deal(order, tokens, cost, 1, 9));  // a record without room
}
