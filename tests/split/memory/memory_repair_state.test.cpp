// bcl::detail::memory_repair_state, as a specification: a round's items ranked by memory, high
// to low (ties to the lower position), each rank's cost, and a partition in rank space whose
// per-pack memory and cost sums and rank-ordered member lists stay exact under any sequence of
// exchanges; write() gives the partition back by item, save() and restore() keep and bring back
// a partition, and the work count runs from zero after load() to a limit of 64 n + 65536 steps.
// A memory that is negative, infinite or NaN is a bcl::error naming its position.

#include "support/distributions.hpp"

#include <bcl/detail/split/memory/memory_repair_state.hpp>
#include <bcl/error.hpp>
#include <bcl/partition/partitioner.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

using namespace bcl_test;
using bcl::detail::memory_repair_state;
using Catch::Matchers::Contains;

namespace {

/// A random partition of n items into the shape's packs, each at its capacity.
std::vector<std::uint32_t> random_partition(std::size_t n, bcl::pack_shape shape,
                                            std::mt19937_64& gen) {
    std::vector<std::uint32_t> pack_of(n);
    for (std::size_t i = 0; i < n; ++i)
        pack_of[i] = static_cast<std::uint32_t>(i / shape.pack_size);
    std::shuffle(pack_of.begin(), pack_of.end(), gen);
    return pack_of;
}

/// Checks everything the state keeps against `pack_of` (by item), recomputed from scratch.
void require_matches(const memory_repair_state& st, const std::vector<double>& costs,
                     const std::vector<double>& memory, const std::vector<std::uint32_t>& pack_of) {
    const std::size_t n = costs.size();
    std::vector<double> mem(st.packs(), 0.0);
    std::vector<double> cost(st.packs(), 0.0);
    std::vector<std::vector<std::uint32_t>> members(st.packs());
    for (std::size_t r = 0; r < n; ++r) { // ranks ascending: members come out in rank order
        const std::uint32_t i = st.position(r);
        REQUIRE(st.pack(r) == pack_of[i]);
        mem[pack_of[i]] += memory[i];
        cost[pack_of[i]] += costs[i];
        members[pack_of[i]].push_back(static_cast<std::uint32_t>(r));
    }
    for (std::size_t p = 0; p < st.packs(); ++p) {
        REQUIRE(st.pack_memory(p) == Approx(mem[p]).margin(1e-9));
        REQUIRE(st.pack_cost(p) == Approx(cost[p]).margin(1e-9));
        const auto got = st.members(p);
        REQUIRE(std::vector<std::uint32_t>(got.begin(), got.end()) == members[p]);
    }
    std::vector<std::uint32_t> written(n, 99);
    st.write(written);
    REQUIRE(written == pack_of);
}

} // namespace

TEST_CASE("memory_repair_state: items are ranked by memory high to low, ties to the lower "
          "position, each rank carrying its own item's cost",
          "[split][memory][repair-state]") {
    // Positions 0..5; memory 2 appears three times: its ranks go to positions 1, 3, 5 in order.
    const std::vector<double> memory{1.0, 2.0, 7.0, 2.0, 0.0, 2.0};
    const std::vector<double> costs{10.0, 11.0, 12.0, 13.0, 14.0, 15.0};
    memory_repair_state st;
    st.start(costs, memory, {2, 3}, 5.0);
    CHECK(st.items() == 6);
    CHECK(st.packs() == 2);
    CHECK(st.budget() == 5.0);
    const std::vector<std::uint32_t> positions{2, 1, 3, 5, 0, 4};
    for (std::size_t r = 0; r < 6; ++r) {
        INFO("rank " << r);
        CHECK(st.position(r) == positions[r]);
        CHECK(st.memory(r) == memory[positions[r]]);
        CHECK(st.cost(r) == costs[positions[r]]);
    }
    const auto desc = st.memories();
    CHECK(std::vector<double>(desc.begin(), desc.end()) ==
          std::vector<double>{7.0, 2.0, 2.0, 2.0, 1.0, 0.0});
    // Pack 0 holds positions 0, 2, 4 (ranks 4, 0, 5): memory 8, cost 36, members 0, 4, 5.
    st.load(std::vector<std::uint32_t>{0, 1, 0, 1, 0, 1});
    CHECK(st.pack_memory(0) == 8.0);
    CHECK(st.pack_cost(0) == 36.0);
    CHECK(st.pack_memory(1) == 6.0);
    CHECK(st.pack_cost(1) == 39.0);
    const auto m0 = st.members(0);
    CHECK(std::vector<std::uint32_t>(m0.begin(), m0.end()) == std::vector<std::uint32_t>{0, 4, 5});
    // Exchanging rank 0 (position 2) with rank 3 (position 5) moves 5 memory and -3 cost.
    st.exchange(0, 3);
    CHECK(st.pack_memory(0) == 3.0);
    CHECK(st.pack_memory(1) == 11.0);
    CHECK(st.pack_cost(0) == 39.0);
    CHECK(st.pack_cost(1) == 36.0);
    const auto m1 = st.members(1);
    CHECK(std::vector<std::uint32_t>(m1.begin(), m1.end()) == std::vector<std::uint32_t>{0, 1, 2});
}

TEST_CASE("memory_repair_state: the sums, member lists and partition stay exact under any "
          "sequence of exchanges, on every distribution and shape",
          "[split][memory][repair-state]") {
    std::mt19937_64 gen(41);
    memory_repair_state st; // one object throughout: a new round must forget the last
    const bcl::pack_shape shapes[] = {{1, 6}, {2, 1}, {3, 4}, {8, 5}, {5, 16}};
    for (const distribution& d : all_distributions())
        for (const bcl::pack_shape shape : shapes) {
            // Full rounds and a short last pack (the drain's round).
            for (const std::size_t n : {shape.packs * shape.pack_size,
                                        shape.packs * shape.pack_size - shape.pack_size / 2}) {
                INFO(d.name << " K " << shape.packs << " B " << shape.pack_size << " n " << n);
                const std::vector<double> memory = d.generate(n, gen());
                const std::vector<double> costs = lognormal_costs(n, gen());
                std::vector<std::uint32_t> pack_of(n);
                for (std::size_t i = 0; i < n; ++i)
                    pack_of[i] = static_cast<std::uint32_t>(i / shape.pack_size);
                std::shuffle(pack_of.begin(), pack_of.end(), gen);
                st.start(costs, memory, shape, 1.0);
                st.load(pack_of);
                require_matches(st, costs, memory, pack_of);
                if (shape.packs < 2) continue;
                for (int step = 0; step < 60; ++step) {
                    const std::size_t x = gen() % n;
                    const std::size_t y = gen() % n;
                    if (st.pack(x) == st.pack(y)) continue;
                    std::swap(pack_of[st.position(x)], pack_of[st.position(y)]);
                    st.exchange(x, y);
                }
                require_matches(st, costs, memory, pack_of);
            }
        }
}

TEST_CASE("memory_repair_state: restore brings back the partition save kept, for write",
          "[split][memory][repair-state]") {
    std::mt19937_64 gen(5);
    const std::vector<double> memory = uniform_costs(24, 1);
    const std::vector<double> costs = uniform_costs(24, 2);
    const std::vector<std::uint32_t> kept = random_partition(24, {4, 6}, gen);
    memory_repair_state st;
    st.start(costs, memory, {4, 6}, 1.0);
    st.load(kept);
    st.save();
    for (int step = 0; step < 30; ++step) {
        const std::size_t x = gen() % 24;
        const std::size_t y = gen() % 24;
        if (st.pack(x) != st.pack(y)) st.exchange(x, y);
    }
    std::vector<std::uint32_t> out(24);
    st.write(out);
    REQUIRE(out != kept);
    st.restore();
    st.write(out);
    CHECK(out == kept);
}

TEST_CASE("memory_repair_state: the work count starts at zero on load and is out past 64 n + "
          "65536 steps, not at it",
          "[split][memory][repair-state]") {
    const std::vector<double> values(10, 1.0);
    memory_repair_state st;
    st.start(values, values, {2, 5}, 5.0);
    CHECK(st.work_limit() == 64 * 10 + 65536);
    st.load(std::vector<std::uint32_t>{0, 0, 0, 0, 0, 1, 1, 1, 1, 1});
    CHECK_FALSE(st.out_of_work());
    st.add_work(st.work_limit());
    CHECK_FALSE(st.out_of_work());
    st.add_work(1);
    CHECK(st.out_of_work());
    st.reset_work();
    CHECK_FALSE(st.out_of_work());
    st.add_work(st.work_limit() + 1);
    st.load(std::vector<std::uint32_t>{1, 1, 1, 1, 1, 0, 0, 0, 0, 0});
    CHECK_FALSE(st.out_of_work());
    // An exchange counts its work: the two packs' sizes, 5 each.
    st.add_work(st.work_limit() - 9);
    st.exchange(0, 9);
    CHECK(st.out_of_work());
}

TEST_CASE("memory_repair_state: a negative, infinite or NaN memory is an error naming its "
          "position",
          "[split][memory][repair-state][errors]") {
    memory_repair_state st;
    const std::vector<double> costs(4, 1.0);
    for (const double bad : {-1.0, HUGE_VAL, std::nan("")}) {
        INFO(bad);
        const std::vector<double> memory{1.0, 2.0, bad, 0.0};
        CHECK_THROWS_WITH(st.start(costs, memory, {2, 2}, 3.0),
                          Contains("bcl::detail::memory_repair") && Contains("cost 2 is"));
    }
}
