// bcl::detail::heavy_slots: the levels every rank builds its costliest batches to. Before a
// quarter of its remembered rounds it asks for nothing; then slot s's target is the largest s-th
// costliest record of the last `rounds_remembered` rounds, capped at the cap, and only when it is
// above `engage` mean batches; saved remembered rounds restored into another continues exactly.

#include <bcl/detail/split/heavy_slots.hpp>
#include <bcl/options.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <random>
#include <vector>

namespace {

using bcl::detail::heavy_slots;

/// A round whose two costliest records are `first` and `second`, among small ones.
std::vector<double> round_with(double first, double second, std::mt19937_64& gen) {
    std::vector<double> costs(32);
    for (double& c : costs) c = 1.0 + static_cast<double>(gen() % 100) / 100.0;
    costs[gen() % 32] = first;
    std::size_t at = gen() % 32;
    while (costs[at] == first) at = (at + 1) % 32;
    costs[at] = second;
    return costs;
}

} // namespace

TEST_CASE("The heavy slots ask for nothing before a quarter of their remembered rounds",
          "[heavy-slots]") {
    heavy_slots h;
    std::mt19937_64 gen(1);
    for (std::size_t r = 0; r < heavy_slots::rounds_remembered / 4; ++r) {
        const auto t = h.targets(10.0, HUGE_VAL);
        REQUIRE(t[0] == 0.0);
        REQUIRE(t[1] == 0.0);
        h.observe(round_with(500.0, 400.0, gen));
    }
    const auto t = h.targets(10.0, HUGE_VAL);
    CHECK(t[0] == 500.0);
    CHECK(t[1] == 400.0);
}

TEST_CASE("Each target is the largest s-th costliest record of the remembered rounds, "
          "capped at the cap, and only above engage mean batches, when their 70th "
          "percentile is too",
          "[heavy-slots]") {
    heavy_slots h;
    std::mt19937_64 gen(2);
    std::deque<std::pair<double, double>> recent; // the brute-force window
    for (std::size_t r = 0; r < 5 * heavy_slots::rounds_remembered; ++r) {
        const double first = 100.0 + static_cast<double>(gen() % 1000);
        const double second = first * static_cast<double>(gen() % 100) / 100.0 + 2.0;
        h.observe(round_with(first, second, gen));
        recent.emplace_back(first, second);
        if (recent.size() > heavy_slots::rounds_remembered) recent.pop_front();
        if (r + 1 < heavy_slots::rounds_remembered / 4) continue;
        double top0 = 0.0;
        double top1 = 0.0;
        std::vector<double> firsts;
        std::vector<double> seconds;
        for (const auto& [a, b] : recent) {
            top0 = std::max(top0, a);
            top1 = std::max(top1, b);
            firsts.push_back(a);
            seconds.push_back(b);
        }
        // The 70th percentile: the value with 70% of the others (rounded down) below it.
        const auto percentile70 = [](std::vector<double> v) {
            std::sort(v.begin(), v.end());
            return v[(v.size() - 1) * 7 / 10];
        };
        const double typical0 = percentile70(firsts);
        const double typical1 = percentile70(seconds);
        const double batch = static_cast<double>(gen() % 1200);
        const double cap = r % 3 == 0 ? 700.0 : HUGE_VAL;
        const auto t = h.targets(batch, cap);
        INFO("round " << r << " batch " << batch << " cap " << cap);
        const auto expected = [&](double top, double typical) {
            const double level = std::min(top, cap);
            const double floor = heavy_slots::engage * batch;
            return level > floor && typical > floor ? level : 0.0;
        };
        REQUIRE(t[0] == expected(top0, typical0));
        REQUIRE(t[1] == expected(top1, typical1));
    }
}

TEST_CASE("Heavy slots restored from saved remembered rounds continue exactly", "[heavy-slots]") {
    heavy_slots original;
    std::mt19937_64 gen(3);
    for (std::size_t r = 0; r < 200; ++r)
        original.observe(round_with(50.0 + static_cast<double>(gen() % 500), 20.0, gen));
    heavy_slots restored;
    for (std::size_t s = 0; s < heavy_slots::slots; ++s)
        restored.restore(original.seen(), s, original.recent(s));
    for (std::size_t r = 0; r < 300; ++r) {
        REQUIRE(restored.targets(5.0, HUGE_VAL) == original.targets(5.0, HUGE_VAL));
        const auto costs = round_with(10.0 + static_cast<double>(gen() % 900), 9.0, gen);
        original.observe(costs);
        restored.observe(costs);
    }
}

TEST_CASE("Rescaled heavy slots never remember a record above the limit", "[heavy-slots]") {
    heavy_slots h;
    std::mt19937_64 gen(4);
    for (std::size_t r = 0; r < heavy_slots::rounds_remembered; ++r)
        h.observe(round_with(500.0, 400.0, gen));
    h.rescale(1e300, 1e120);
    for (std::size_t s = 0; s < heavy_slots::slots; ++s)
        for (const double x : h.recent(s)) CHECK(x <= 1e120);
    const auto t = h.targets(1.0, HUGE_VAL);
    CHECK(t[0] == 1e120);
    h.rescale(0.5, 1e120);
    CHECK(h.targets(1.0, HUGE_VAL)[0] == 5e119);
}

TEST_CASE("A balancer's heavy slots shape and learn only under costliest-first emission of "
          "packed batches, from full rounds, once the cap has settled",
          "[heavy-slots]") {
    const std::vector<double> heavy_round(64, 100.0);
    auto trained = [&](const bcl::options& opt, bool full, bool cap_settled) {
        bcl::detail::heavy_slots h(opt);
        for (std::size_t r = 0; r < bcl::detail::heavy_slots::rounds_remembered; ++r)
            h.learn(heavy_round, full, cap_settled);
        return h;
    };
    const bcl::options costliest{.batch_size = 8, .lookahead = 8};
    const double mean_batch = 8.0; // far below the rounds' records: every slot engages
    const auto shaped = trained(costliest, true, true).round_targets(true, mean_batch, HUGE_VAL);
    CHECK(shaped[0] == 100.0);
    CHECK(shaped[1] == 100.0);
    // Not full, not settled: nothing learned, so nothing to shape.
    CHECK(trained(costliest, false, true).seen() == 0);
    CHECK(trained(costliest, true, false).seen() == 0);
    // A round that is not full is never shaped.
    CHECK(trained(costliest, true, true).round_targets(false, mean_batch, HUGE_VAL)[0] == 0.0);
    // Shuffled emission or padded batches: the slots stay out of the way.
    bcl::options shuffled = costliest;
    shuffled.emission = bcl::emission_order::shuffled;
    bcl::options padded = costliest;
    padded.batching = bcl::batch_cost::padded;
    for (const bcl::options& opt : {shuffled, padded}) {
        CHECK(trained(opt, true, true).seen() == 0);
        CHECK(trained(opt, true, true).round_targets(true, mean_batch, HUGE_VAL)[0] == 0.0);
    }
}
