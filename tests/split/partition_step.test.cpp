// bcl::detail::partition_step: a round's partition. It checks what the partitioner returned (a
// pack id out of range or a pack of the wrong size is a bcl::error), hands back each item's pack
// and each pack's cost and memory (the sums of its items, whether or not the partitioner reported
// its pack loads), and under a memory budget repairs a split that is over it so that every pack
// fits, or throws the "could not be split" error, which says when no split can fit at all.

#include "../support/brute_force.hpp"

#include <bcl/detail/split/partition_step.hpp>
#include <bcl/error.hpp>
#include <bcl/partition/lpt_swap.hpp>
#include <bcl/partition/partitioner.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace {

using Catch::Matchers::Contains;

/// The default partitioner, reporting its pack loads or (`report_loads` false) not.
struct default_partitioner {
    bool report_loads = true;
    bcl::lpt_swap_partitioner inner{};

    bcl::partition_summary operator()(std::span<const double> costs, bcl::pack_shape shape,
                                      std::span<std::uint32_t> pack_of) {
        bcl::partition_summary s = inner(costs, shape, pack_of);
        if (!report_loads) s.pack_loads = {};
        return s;
    }
};

/// Packs of consecutive items, except that on its first call and every other one after, item
/// `item` goes to pack `pack` (so a step can be seen to recover from a bad round).
struct misplacing {
    std::size_t item = 0;
    std::uint32_t pack = 0;
    int calls = 0;

    bcl::partition_summary operator()(std::span<const double> costs, bcl::pack_shape shape,
                                      std::span<std::uint32_t> pack_of) {
        for (std::size_t i = 0; i < costs.size(); ++i)
            pack_of[i] = static_cast<std::uint32_t>(i / shape.pack_size);
        if (calls++ % 2 == 0) pack_of[item] = pack;
        return {};
    }
};

/// Items dealt out to the packs in turn: every pack gets its share, not its capacity.
struct dealing_in_turn {
    bcl::partition_summary operator()(std::span<const double> costs, bcl::pack_shape shape,
                                      std::span<std::uint32_t> pack_of) {
        for (std::size_t i = 0; i < costs.size(); ++i)
            pack_of[i] = static_cast<std::uint32_t>(i % shape.packs);
        return {};
    }
};

std::vector<double> to_vector(std::span<const double> s) {
    return {s.begin(), s.end()};
}

/// Whole numbers, so sums do not depend on the order they are added in.
std::vector<double> whole_numbers(std::size_t n, std::uint64_t seed, int high) {
    std::mt19937_64 gen(seed);
    std::uniform_int_distribution<int> draw(1, high);
    std::vector<double> v(n);
    for (double& x : v) x = draw(gen);
    return v;
}

/// The smallest largest-pack memory over every split of `memory` into `shape`, by enumeration.
double best_fit(const std::vector<double>& memory, bcl::pack_shape shape) {
    const std::size_t n = memory.size();
    std::vector<std::uint32_t> pack_of(n, 0);
    double best = HUGE_VAL;
    for (;;) {
        std::vector<std::size_t> count(shape.packs, 0);
        for (const std::uint32_t p : pack_of) ++count[p];
        bool sized = true;
        for (std::size_t p = 0; p < shape.packs; ++p)
            sized = sized && count[p] == shape.capacity(p, n);
        if (sized) {
            const std::vector<double> m = bcl_test::pack_sums(memory, pack_of, shape.packs);
            best = std::min(best, *std::max_element(m.begin(), m.end()));
        }
        std::size_t i = 0; // next assignment, as a number in base `packs`
        while (i < n && pack_of[i] + 1 == shape.packs) pack_of[i++] = 0;
        if (i == n) return best;
        ++pack_of[i];
    }
}

} // namespace

TEST_CASE("A partitioner that puts an item in a pack that does not exist is a bcl::error",
          "[partition-step]") {
    // 12 items, packs of 4: packs 0, 1 and 2.
    const std::vector<double> costs = whole_numbers(12, 1, 9);
    bcl::detail::partition_step<misplacing, false> step(misplacing{5, 3});
    CHECK_THROWS_WITH(step.run(costs, {}, {3, 4}, 0.0, 0),
                      Contains("item 5 in pack 3 of a window of 3 packs"));
}

TEST_CASE("A partitioner that fills a pack above or below its capacity is a bcl::error",
          "[partition-step]") {
    const std::vector<double> costs = whole_numbers(12, 2, 9);
    // Item 0 moved from pack 0 to pack 2: pack 0 holds 3.
    bcl::detail::partition_step<misplacing, false> moved(misplacing{0, 2});
    CHECK_THROWS_WITH(moved.run(costs, {}, {3, 4}, 0.0, 0),
                      Contains("put 3 items in pack 0, which must hold exactly 4"));
    // 10 items in packs of 4, 4 and 2, dealt out as 4, 3 and 3.
    const std::vector<double> ten = whole_numbers(10, 3, 9);
    bcl::detail::partition_step<dealing_in_turn, false> dealt(dealing_in_turn{});
    CHECK_THROWS_WITH(dealt.run(ten, {}, {3, 4}, 0.0, 0),
                      Contains("put 3 items in pack 1, which must hold exactly 4"));
}

TEST_CASE("The step writes only its own scratch: a failed round leaves the inputs as they were and "
          "the next round is partitioned afresh",
          "[partition-step]") {
    const std::vector<double> costs = whole_numbers(12, 4, 9);
    const std::vector<double> memory = whole_numbers(12, 5, 9);
    const std::vector<double> costs_before = costs;
    const std::vector<double> memory_before = memory;
    bcl::detail::partition_step<misplacing, true> step(misplacing{7, 9});
    CHECK_THROWS_AS(step.run(costs, memory, {3, 4}, 0.0, 0), bcl::error); // the first call is bad
    CHECK(costs == costs_before);
    CHECK(memory == memory_before);
    step.run(costs, memory, {3, 4}, 0.0, 1); // the second is good
    const std::vector<std::uint32_t> consecutive{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2};
    CHECK(std::vector<std::uint32_t>(step.pack_of().begin(), step.pack_of().end()) == consecutive);
    CHECK(to_vector(step.pack_cost()) == bcl_test::pack_sums(costs, consecutive, 3));
    CHECK(to_vector(step.pack_memory()) == bcl_test::pack_sums(memory, consecutive, 3));
    CHECK(costs == costs_before);
    CHECK(memory == memory_before);
}

TEST_CASE("Each pack's cost and memory are the sums of its items, whether or not the partitioner "
          "reports its pack loads",
          "[partition-step]") {
    // The default partitioner does report them; the step must then not need to sum.
    for (const bool report : {true, false}) {
        bcl::detail::partition_step<default_partitioner, true> step(default_partitioner{report});
        for (std::uint64_t trial = 0; trial < 60; ++trial) {
            const std::size_t b = 1 + trial % 7;
            const std::size_t k = 1 + trial % 5;
            // Full rounds and short final ones.
            const std::size_t n = trial % 3 == 0 ? b * k : b * (k - 1) + 1 + trial % b;
            const bcl::pack_shape shape{(n + b - 1) / b, b};
            INFO("report " << report << ", n " << n << ", B " << b);
            const std::vector<double> costs = whole_numbers(n, 10 + trial, 1000);
            const std::vector<double> memory = whole_numbers(n, 500 + trial, 1000);
            const bcl::partition_summary summary = step.run(costs, memory, shape, 0.0, trial);

            std::vector<std::size_t> count(shape.packs, 0);
            for (const std::uint32_t p : step.pack_of()) {
                REQUIRE(p < shape.packs);
                ++count[p];
            }
            for (std::size_t p = 0; p < shape.packs; ++p) REQUIRE(count[p] == shape.capacity(p, n));
            REQUIRE(to_vector(step.pack_cost()) ==
                    bcl_test::pack_sums(costs, step.pack_of(), shape.packs));
            REQUIRE(to_vector(step.pack_memory()) ==
                    bcl_test::pack_sums(memory, step.pack_of(), shape.packs));
            const std::vector<double> loads =
                bcl_test::pack_sums(costs, step.pack_of(), shape.packs);
            CHECK(summary.heaviest == *std::max_element(loads.begin(), loads.end()));
        }
    }
}

TEST_CASE("Over a memory budget the step repairs the split so that every pack fits, whenever a "
          "split that fits exists",
          "[partition-step]") {
    // Small rounds, so that the best split is known by enumeration; the budget is exactly the
    // best split's largest pack, and cost and memory are correlated, so a cost-balanced split
    // is often over it.
    std::size_t repaired = 0;
    bcl::detail::partition_step<bcl::lpt_swap_partitioner, true> step(bcl::lpt_swap_partitioner{});
    for (std::uint64_t trial = 0; trial < 150; ++trial) {
        const bcl::pack_shape shape =
            trial % 2 == 0 ? bcl::pack_shape{3, 3} : bcl::pack_shape{2, 4};
        const std::size_t n = shape.packs * shape.pack_size - trial % 3;
        const std::vector<double> memory = whole_numbers(n, 900 + trial, 20);
        std::vector<double> costs(n);
        for (std::size_t i = 0; i < n; ++i)
            costs[i] = memory[i] * memory[i] + static_cast<double>(i % 3);
        const double budget = best_fit(memory, shape);
        INFO("trial " << trial << ", budget " << budget);

        // What the partitioner alone gives.
        std::vector<std::uint32_t> plain(n);
        bcl::lpt_swap_partitioner{}(costs, shape, plain);
        const std::vector<double> plain_memory = bcl_test::pack_sums(memory, plain, shape.packs);
        if (*std::max_element(plain_memory.begin(), plain_memory.end()) > budget) ++repaired;

        const bcl::partition_summary summary = step.run(costs, memory, shape, budget, trial);
        std::vector<std::size_t> count(shape.packs, 0);
        for (const std::uint32_t p : step.pack_of()) ++count[p];
        for (std::size_t p = 0; p < shape.packs; ++p) REQUIRE(count[p] == shape.capacity(p, n));
        const std::vector<double> packed = bcl_test::pack_sums(memory, step.pack_of(), shape.packs);
        for (const double m : packed) REQUIRE(m <= budget);
        REQUIRE(to_vector(step.pack_memory()) == packed);
        const std::vector<double> loads = bcl_test::pack_sums(costs, step.pack_of(), shape.packs);
        REQUIRE(to_vector(step.pack_cost()) == loads);
        REQUIRE(summary.heaviest == *std::max_element(loads.begin(), loads.end()));
    }
    CHECK(repaired >= 20); // the repair really ran, in many rounds
}

TEST_CASE("A larger round over budget is repaired when a memory-balanced split fits",
          "[partition-step]") {
    // 64 items in 8 packs; the budget is what the default partitioner reaches on the memories
    // themselves, so a split within it exists, and costs (memory cubed) balanced alone leave
    // packs over it.
    const std::vector<double> memory = whole_numbers(64, 17, 100);
    std::vector<double> costs(memory.size());
    for (std::size_t i = 0; i < memory.size(); ++i) costs[i] = memory[i] * memory[i] * memory[i];
    const bcl::pack_shape shape{8, 8};
    std::vector<std::uint32_t> by_memory(memory.size());
    bcl::lpt_swap_partitioner{}(memory, shape, by_memory);
    const std::vector<double> fit = bcl_test::pack_sums(memory, by_memory, shape.packs);
    const double budget = *std::max_element(fit.begin(), fit.end());
    std::vector<std::uint32_t> by_cost(memory.size());
    bcl::lpt_swap_partitioner{}(costs, shape, by_cost);
    const std::vector<double> over = bcl_test::pack_sums(memory, by_cost, shape.packs);
    REQUIRE(*std::max_element(over.begin(), over.end()) > budget);

    bcl::detail::partition_step<bcl::lpt_swap_partitioner, true> step(bcl::lpt_swap_partitioner{});
    step.run(costs, memory, shape, budget, 0);
    for (const double m : bcl_test::pack_sums(memory, step.pack_of(), shape.packs))
        CHECK(m <= budget);
    CHECK(to_vector(step.pack_cost()) == bcl_test::pack_sums(costs, step.pack_of(), shape.packs));
}

TEST_CASE("A round no split fits is the 'could not be split' error, which says when not even the "
          "average fits",
          "[partition-step]") {
    bcl::detail::partition_step<bcl::lpt_swap_partitioner, true> step(bcl::lpt_swap_partitioner{});
    const std::vector<double> costs{1, 2, 3, 4};
    // Memories 6, 6, 6, 6 in 2 packs of 2 under 10: 12 per batch on average, over the budget.
    const std::vector<double> even{6, 6, 6, 6};
    CHECK_THROWS_WITH(step.run(costs, even, {2, 2}, 10.0, 5),
                      Contains("the 4 records of round 5 could not be split into 2 batches within "
                               "memory_budget 10") &&
                          Contains("a batch of 12") && Contains("no split can fit") &&
                          Contains("together they need 12 per batch on average"));
    // Memories 7, 7, 7, 1 under 11: 11 per batch on average, but two of the 7s always share a
    // batch (14). The message must not claim that no split can fit on average.
    const std::vector<double> lumpy{7, 7, 7, 1};
    CHECK_THROWS_WITH(step.run(costs, lumpy, {2, 2}, 11.0, 6),
                      Contains("could not be split into 2 batches within memory_budget 11") &&
                          Contains("a batch of 14") && !Contains("no split can fit") &&
                          Contains("they need 11 per batch on average"));
}

TEST_CASE("A round no split fits is an error exactly when enumeration finds no split within the "
          "budget",
          "[partition-step]") {
    bcl::detail::partition_step<bcl::lpt_swap_partitioner, true> step(bcl::lpt_swap_partitioner{});
    for (std::uint64_t trial = 0; trial < 80; ++trial) {
        const bcl::pack_shape shape{3, 3};
        const std::vector<double> memory = whole_numbers(9, 300 + trial, 12);
        const std::vector<double> costs = whole_numbers(9, 700 + trial, 50);
        const double best = best_fit(memory, shape);
        double total = 0.0;
        for (const double m : memory) total += m;
        INFO("trial " << trial << ", best split " << best);
        CHECK_NOTHROW(step.run(costs, memory, shape, best, trial));
        const double budget = best - 0.5;
        if (total / 3.0 > budget)
            CHECK_THROWS_WITH(step.run(costs, memory, shape, budget, trial),
                              Contains("could not be split") && Contains("no split can fit"));
        else
            CHECK_THROWS_WITH(step.run(costs, memory, shape, budget, trial),
                              Contains("could not be split") && !Contains("no split can fit"));
    }
}
