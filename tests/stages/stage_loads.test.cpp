// bcl::detail::stages::stage_loads, as a specification: the objective is the sum over stages of
// the largest load; objective_after() of a move or a swap between two ranks equals the objective
// recomputed after making it; slowest() names the ranks holding a stage's largest load.

#include <bcl/detail/stages/stage_loads.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace {

using bcl::detail::stages::stage_loads;

std::uint64_t objective_of(const std::vector<std::vector<std::uint64_t>>& load) {
    std::uint64_t sum = 0;
    for (std::size_t s = 0; s < load.front().size(); ++s) {
        std::uint64_t top = 0;
        for (const auto& rank : load) top = std::max(top, rank[s]);
        sum += top;
    }
    return sum;
}

} // namespace

TEST_CASE("stage loads: the objective and the objective after a change, against recomputing",
          "[stages][stage_loads]") {
    std::mt19937_64 gen(3);
    for (int trial = 0; trial < 500; ++trial) {
        const std::size_t ranks = 2 + gen() % 7;
        const std::size_t d = 1 + gen() % 4;
        std::vector<std::vector<std::uint64_t>> load(ranks, std::vector<std::uint64_t>(d));
        stage_loads loads;
        loads.reset(ranks, d);
        for (std::size_t r = 0; r < ranks; ++r) {
            for (auto& x : load[r]) x = gen() % (trial % 3 == 0 ? 4 : 1000); // ties too
            loads.add(r, load[r]);
        }
        loads.index();
        REQUIRE(loads.objective() == objective_of(load));
        for (std::size_t r = 0; r < ranks; ++r) {
            bool holds = false;
            for (std::size_t s = 0; s < d; ++s) {
                std::size_t first = 0;
                for (std::size_t k = 1; k < ranks; ++k)
                    if (load[k][s] > load[first][s]) first = k;
                holds = holds || first == r;
            }
            REQUIRE(loads.slowest(r) == holds);
        }
        const std::size_t p = gen() % ranks;
        const std::size_t q = (p + 1 + gen() % (ranks - 1)) % ranks;
        std::vector<std::uint64_t> moved(d);
        for (std::size_t s = 0; s < d; ++s) moved[s] = load[p][s] == 0 ? 0 : gen() % load[p][s];
        const std::uint64_t after = loads.objective_after(
            p, q, [&](std::size_t s) { return load[p][s] - moved[s]; },
            [&](std::size_t s) { return load[q][s] + moved[s]; });
        for (std::size_t s = 0; s < d; ++s) {
            load[p][s] -= moved[s];
            load[q][s] += moved[s];
        }
        REQUIRE(after == objective_of(load));
        loads.take(p, moved);
        loads.add(q, moved);
        loads.index();
        REQUIRE(loads.objective() == after);
    }
}
