// bcl::detail::plan::layout_totals, as a specification of what a global-plan layout reports, in
// quantized units: `total`, the sum of the costs (padded: of the packs' padded costs, size times
// the dearest record); `objective`, the sum over steps of the step's heaviest pack; `heaviest`,
// the heaviest pack; and `lower_bound`, which no plan of the window undercuts. Checked for both
// layouts against the plan they wrote and against every plan of tiny windows, by brute force.
// A default layout_totals (an empty window's) is all zeros.

#include <bcl/detail/plan/geometry.hpp>
#include <bcl/detail/plan/layout_totals.hpp>
#include <bcl/detail/plan/packed_layout.hpp>
#include <bcl/detail/plan/padded_layout.hpp>
#include <bcl/global_plan.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <random>
#include <span>
#include <vector>

namespace {

namespace plan = bcl::detail::plan;

struct window_shape {
    std::size_t ranks, steps, batch, n;
};

/// Each cell's (step, rank) cost under `padded` or packed pricing, from a plan's slots.
std::vector<std::vector<std::uint64_t>> cell_costs(const std::vector<std::uint64_t>& cost,
                                                   const std::vector<bcl::plan_slot>& slot,
                                                   std::size_t steps, std::size_t ranks,
                                                   bool padded) {
    std::vector<std::vector<std::uint64_t>> sum(steps, std::vector<std::uint64_t>(ranks, 0));
    std::vector<std::vector<std::uint64_t>> top = sum, size = sum;
    for (std::size_t i = 0; i < cost.size(); ++i) {
        sum[slot[i].step][slot[i].rank] += cost[i];
        top[slot[i].step][slot[i].rank] = std::max(top[slot[i].step][slot[i].rank], cost[i]);
        ++size[slot[i].step][slot[i].rank];
    }
    if (padded)
        for (std::size_t s = 0; s < steps; ++s)
            for (std::size_t r = 0; r < ranks; ++r) sum[s][r] = size[s][r] * top[s][r];
    return sum;
}

std::uint64_t objective_of(const std::vector<std::vector<std::uint64_t>>& cells) {
    std::uint64_t sum = 0;
    for (const auto& step : cells) sum += *std::max_element(step.begin(), step.end());
    return sum;
}

/// The least objective over every plan of the window: each record into a (step, rank) cell,
/// every rank's step s holding B records but the last step's `last` each.
std::uint64_t brute_force_optimum(const std::vector<std::uint64_t>& cost, const plan::geometry& g,
                                  bool padded) {
    std::vector<std::size_t> room;
    for (std::size_t s = 0; s < g.steps; ++s)
        for (std::size_t r = 0; r < g.ranks; ++r)
            room.push_back(s + 1 < g.steps ? g.batch : g.last_size);
    std::vector<bcl::plan_slot> slot(cost.size());
    std::uint64_t best = ~std::uint64_t{0};
    const auto place = [&](auto& self, std::size_t i) -> void {
        if (i == cost.size()) {
            best = std::min(best, objective_of(cell_costs(cost, slot, g.steps, g.ranks, padded)));
            return;
        }
        for (std::size_t c = 0; c < room.size(); ++c) {
            if (room[c] == 0) continue;
            --room[c];
            slot[i] = {static_cast<std::uint32_t>(c / g.ranks),
                       static_cast<std::uint32_t>(c % g.ranks)};
            self(self, i + 1);
            ++room[c];
        }
    };
    place(place, 0);
    return best;
}

} // namespace

TEST_CASE("layout_totals: an empty window's totals are all zero", "[plan][layout_totals]") {
    constexpr plan::layout_totals none{};
    STATIC_REQUIRE(none.total == 0);
    STATIC_REQUIRE(none.objective == 0);
    STATIC_REQUIRE(none.heaviest == 0);
    STATIC_REQUIRE(none.lower_bound == 0);
    const plan::geometry g = plan::geometry_of(0, 2, 2, 2, 1 << 20, "test");
    std::vector<bcl::plan_slot> out;
    const plan::layout_totals padded = plan::padded_layout<bcl::plan_slot>(
        g, std::span<const std::uint64_t>(), std::span<const std::uint32_t>(),
        std::span<bcl::plan_slot>(out));
    CHECK(padded.total == 0);
    CHECK(padded.objective == 0);
    CHECK(padded.heaviest == 0);
    CHECK(padded.lower_bound == 0);
}

TEST_CASE("layout_totals: each layout reports its own plan's totals, and a lower bound no plan of "
          "a tiny window undercuts",
          "[plan][layout_totals]") {
    const window_shape shapes[] = {{2, 2, 2, 8}, {2, 2, 2, 6}, {2, 3, 1, 6},
                                   {3, 2, 1, 6}, {1, 3, 2, 5}, {2, 2, 3, 10}};
    std::mt19937_64 gen(41);
    plan::packed_layout packed;
    for (const window_shape& w : shapes)
        for (int kind = 0; kind < 5; ++kind) {
            std::vector<std::uint64_t> cost(w.n);
            for (std::uint64_t& c : cost) {
                switch (kind) {
                case 0:
                    c = 7;
                    break; // all equal
                case 1:
                    c = 1;
                    break; // then one giant
                case 2:
                    c = gen() % 2;
                    break; // zeros and ones
                default:
                    c = 1 + gen() % 1000;
                    break; // spread
                }
            }
            if (kind == 1) cost[gen() % w.n] = 1'000'000;
            // The layouts take the costs in descending order, with each one's input index.
            std::vector<std::uint32_t> index(w.n);
            std::iota(index.begin(), index.end(), 0U);
            std::stable_sort(index.begin(), index.end(),
                             [&](std::uint32_t a, std::uint32_t b) { return cost[a] > cost[b]; });
            std::vector<std::uint64_t> by_place(w.n);
            for (std::size_t p = 0; p < w.n; ++p) by_place[p] = cost[index[p]];
            const plan::geometry g =
                plan::geometry_of(w.n, w.ranks, w.steps, w.batch, 1 << 20, "test");
            for (const bool padded : {false, true}) {
                INFO("R " << w.ranks << ", K " << w.steps << ", B " << w.batch << ", n " << w.n
                          << ", costs kind " << kind << (padded ? ", padded" : ", packed"));
                std::vector<bcl::plan_slot> out(w.n);
                const plan::layout_totals t =
                    padded ? plan::padded_layout<bcl::plan_slot>(g, by_place, index,
                                                                 std::span<bcl::plan_slot>(out))
                           : packed.run(g, by_place, index, std::span<bcl::plan_slot>(out), true);
                const auto cells = cell_costs(cost, out, g.steps, g.ranks, padded);
                std::uint64_t total = 0, heaviest = 0;
                for (const auto& step : cells)
                    for (const std::uint64_t c : step) {
                        total += c;
                        heaviest = std::max(heaviest, c);
                    }
                CHECK(t.total == total);
                if (!padded)
                    CHECK(t.total == std::accumulate(cost.begin(), cost.end(), std::uint64_t{0}));
                CHECK(t.objective == objective_of(cells));
                CHECK(t.heaviest == heaviest);
                const std::uint64_t optimum = brute_force_optimum(cost, g, padded);
                CHECK(t.lower_bound <= optimum);
                CHECK(t.objective >= optimum);
                // The padded layout is optimal for its shape: its bound is its objective.
                if (padded) CHECK(t.objective == optimum);
            }
        }
}
