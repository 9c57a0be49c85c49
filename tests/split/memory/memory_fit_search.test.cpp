// bcl::detail::memory_fit_search, as a specification: a depth-first search, ignoring cost, for a
// split of a round into its pack shape that keeps every pack's memory within budget. On rounds of
// at most exact_items (12) items it is exhaustive: it finds a split exactly when one exists. On
// larger rounds it gives up once the state's work count passes its limit. A split found is
// written by item, every pack at its capacity; when none is found the output is left as it was.

#include "support/brute_force.hpp"
#include "support/distributions.hpp"

#include <bcl/detail/split/memory/memory_fit_search.hpp>
#include <bcl/detail/split/memory/memory_repair_state.hpp>
#include <bcl/partition/partitioner.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

using namespace bcl_test;
using bcl::detail::memory_fit_search;
using bcl::detail::memory_repair_state;

namespace {

constexpr std::uint32_t untouched_pack = 77;

struct search_outcome {
    bool found = false;
    std::vector<std::uint32_t> pack_of;
};

search_outcome search(memory_fit_search& s, memory_repair_state& st,
                      const std::vector<double>& memory, bcl::pack_shape shape, double budget) {
    const std::vector<double> costs(memory.size(), 1.0); // cost plays no part
    st.start(costs, memory, shape, budget);
    search_outcome out;
    out.pack_of.assign(memory.size(), untouched_pack);
    out.found = s.run(st, out.pack_of);
    return out;
}

/// The largest pack memory of a split, summed in item order.
double heaviest_pack_memory(const std::vector<double>& memory,
                            const std::vector<std::uint32_t>& pack_of, std::size_t packs) {
    std::vector<double> sums(packs, 0.0);
    for (std::size_t i = 0; i < memory.size(); ++i) sums[pack_of[i]] += memory[i];
    return *std::max_element(sums.begin(), sums.end());
}

/// Whole-number memories 1..20 (sums exact), so a budget at the optimum is met with no rounding.
std::vector<double> whole_memories(std::size_t n, std::mt19937_64& gen) {
    std::vector<double> out(n);
    for (double& m : out) m = static_cast<double>(1 + gen() % 20);
    return out;
}

} // namespace

TEST_CASE("memory_fit_search: on up to 12 items it finds a split exactly when brute force says "
          "one exists: at the best largest pack memory, and none just below",
          "[split][memory][fit-search]") {
    std::mt19937_64 gen(2024);
    memory_fit_search s;
    memory_repair_state st;
    const bcl::pack_shape shapes[] = {{2, 6}, {3, 4}, {4, 3}, {6, 2}, {5, 3}, {3, 5}, {1, 4}};
    std::size_t rounds = 0;
    for (const bcl::pack_shape shape : shapes)
        for (int trial = 0; trial < 25; ++trial) {
            const std::size_t n =
                std::min<std::size_t>(12, shape.packs * shape.pack_size - gen() % shape.pack_size);
            if (n <= (shape.packs - 1) * shape.pack_size) continue;
            const std::vector<double> memory = whole_memories(n, gen);
            const std::vector<std::size_t> caps =
                window_capacities(n, shape.packs, shape.pack_size);
            const double best = brute_force_min_heaviest(memory, caps);
            INFO("K " << shape.packs << " B " << shape.pack_size << " n " << n << " best " << best);
            const search_outcome at = search(s, st, memory, shape, best);
            REQUIRE(at.found);
            REQUIRE(check_fill(at.pack_of, caps) == "");
            REQUIRE(heaviest_pack_memory(memory, at.pack_of, shape.packs) <= best);
            const search_outcome below = search(s, st, memory, shape, best - 0.5);
            REQUIRE_FALSE(below.found);
            REQUIRE(below.pack_of == std::vector<std::uint32_t>(n, untouched_pack));
            ++rounds;
        }
    CHECK(rounds > 100);
}

TEST_CASE("memory_fit_search: a fit with no room to spare is found though its sums round",
          "[split][memory][fit-search]") {
    // Nine items of 0.1 in packs of three: each pack sums to 0.30000000000000004, the budget.
    const std::vector<double> memory(9, 0.1);
    const double budget = 0.1 + 0.1 + 0.1;
    memory_fit_search s;
    memory_repair_state st;
    const search_outcome o = search(s, st, memory, {3, 3}, budget);
    REQUIRE(o.found);
    CHECK(check_fill(o.pack_of, window_capacities(9, 3, 3)) == "");
    // Zeros and an item at the budget itself.
    const search_outcome z = search(s, st, {0.0, 5.0, 0.0, 0.0}, {2, 2}, 5.0);
    REQUIRE(z.found);
    CHECK(heaviest_pack_memory({0.0, 5.0, 0.0, 0.0}, z.pack_of, 2) == 5.0);
}

TEST_CASE("memory_fit_search: on larger rounds it finds easy fits and gives up on impossible "
          "ones within its work limit, leaving the output alone",
          "[split][memory][fit-search]") {
    std::mt19937_64 gen(9);
    memory_fit_search s;
    memory_repair_state st;
    for (const std::size_t n : {13U, 40U, 256U}) {
        INFO("n " << n);
        const bcl::pack_shape shape{n / 4 + (n % 4 != 0 ? 1 : 0), 4};
        const std::vector<double> memory = whole_memories(n, gen);
        double total = 0.0;
        for (const double m : memory) total += m;
        // Room for the four largest in every pack: any split fits, the first one tried too.
        const search_outcome easy = search(s, st, memory, shape, 80.0);
        REQUIRE(easy.found);
        CHECK(check_fill(easy.pack_of, window_capacities(n, shape.packs, 4)) == "");
        CHECK(heaviest_pack_memory(memory, easy.pack_of, shape.packs) <= 80.0);
        // Below the average pack memory nothing fits; the search still ends.
        const double below_average = std::floor(total / static_cast<double>(shape.packs)) - 1.0;
        const search_outcome none = search(s, st, memory, shape, below_average);
        CHECK_FALSE(none.found);
        CHECK(none.pack_of == std::vector<std::uint32_t>(n, untouched_pack));
    }
}
