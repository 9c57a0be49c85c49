// bcl::epoch_window_planner, as a specification: window by window, over an order and a cost table
// given as functions, it plans exactly what bcl::epoch_planner plans of the same epoch (slots,
// digest, summary), for orders drawn whole and for bcl::keyed_order read position by position;
// each rank's records of a window are its share of the epoch; tables in any layout read in place
// plan as their values converted to double; a window past the epoch, an invalid cost, an index
// without a cost, a rank past the ranks and a short output are errors naming them.

#include "support/distributions.hpp"

#include <bcl/epoch_plan.hpp>
#include <bcl/epoch_window.hpp>
#include <bcl/keyed_order.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using Catch::Matchers::Contains;

struct epoch_window_case {
    std::size_t n, ranks, batch, lookahead;
    bool drop_last;
};

const std::vector<epoch_window_case>& epoch_window_cases() {
    static const std::vector<epoch_window_case> cases = {
        {0, 2, 3, 2, false},     {1, 1, 1, 1, false},   {7, 3, 2, 2, false},
        {7, 3, 2, 2, true},      {100, 4, 3, 2, false}, {100, 4, 3, 2, true},
        {257, 8, 4, 3, false},   {1000, 5, 7, 4, true}, {1000, 7, 1, 9, false},
        {2049, 16, 8, 8, false}, {64, 2, 4, 8, false},  {33, 32, 1, 1, true},
    };
    return cases;
}

} // namespace

TEST_CASE("epoch window: window by window, the plans of bcl::epoch_planner, digest and summary",
          "[epoch_window]") {
    for (const epoch_window_case& c : epoch_window_cases())
        for (std::uint64_t seed = 1; seed <= 12; ++seed) {
            CAPTURE(c.n, c.ranks, c.batch, c.lookahead, c.drop_last, seed);
            const std::vector<double> costs = bcl_test::costs_of_seed(c.n + 3, seed);
            const bcl::keyed_order keyed(c.n, seed, 7);
            std::vector<std::uint64_t> order(c.n);
            keyed.fill(0, std::span<std::uint64_t>(order));
            const bcl::epoch_shape shape{.ranks = c.ranks,
                                         .lookahead = c.lookahead,
                                         .batch = c.batch,
                                         .drop_last = c.drop_last};
            const bcl::plan_options opt{.level_steps = seed % 2 == 0};

            // The whole epoch's plans, as the planner hands them out.
            std::vector<std::vector<bcl::plan_slot>> whole;
            bcl::epoch_planner planner;
            const bcl::epoch_plan_summary summary = planner.plan(
                std::span<const double>(costs), std::span<const std::uint64_t>(order), shape, opt,
                [&](std::size_t, std::span<const bcl::plan_slot> slots, const bcl::plan_summary&) {
                    whole.emplace_back(slots.begin(), slots.end());
                });

            // The same windows one at a time, from the keyed order itself (nothing stored).
            const bcl::epoch_windows windows = bcl::epoch_windows::of(c.n, shape);
            REQUIRE(windows.count() == whole.size());
            bcl::epoch_window_planner one;
            std::uint64_t digest = 0;
            double objective = 0.0;
            for (std::size_t w = windows.count(); w-- > 0;) { // any order of windows
                const bcl::plan_summary s = one.plan(
                    windows, w, c.n, [&](std::size_t p) { return keyed.at(p); },
                    [&](std::uint64_t index) { return costs.at(index); }, opt);
                objective += s.cost_of(s.objective);
                REQUIRE(one.first() == windows.first(w));
                const std::vector<bcl::plan_slot> slots(one.slots().begin(), one.slots().end());
                REQUIRE(slots == whole[w]);
                for (std::size_t i = 0; i < one.indices().size(); ++i)
                    REQUIRE(one.indices()[i] == order[(windows.first(w) + i) % c.n]);
            }
            for (const auto& slots : whole) digest = bcl::plan_digest(slots, digest);
            REQUIRE(digest == summary.digest);
            REQUIRE(objective == Approx(summary.objective));
        }
}

TEST_CASE("epoch window: each rank's records of a window are its share of the epoch, B a step",
          "[epoch_window]") {
    for (const epoch_window_case& c : epoch_window_cases())
        for (std::uint64_t seed = 1; seed <= 6; ++seed) {
            CAPTURE(c.n, c.ranks, c.batch, c.lookahead, c.drop_last, seed);
            const std::vector<double> costs = bcl_test::costs_of_seed(c.n, seed);
            const bcl::keyed_order keyed(c.n, seed, 1);
            std::vector<std::int64_t> order(c.n);
            for (std::size_t p = 0; p < c.n; ++p) order[p] = static_cast<std::int64_t>(keyed.at(p));
            const bcl::epoch_shape shape{.ranks = c.ranks,
                                         .lookahead = c.lookahead,
                                         .batch = c.batch,
                                         .drop_last = c.drop_last};
            const bcl::epoch_windows windows = bcl::epoch_windows::of(c.n, shape);
            bcl::epoch_window_planner one;
            for (std::size_t rank = 0; rank < c.ranks; ++rank) {
                bcl::epoch_share<std::int64_t> share;
                bcl::epoch_planner{}.share(std::span<const double>(costs),
                                           std::span<const std::int64_t>(order), shape, rank, {},
                                           share);
                std::vector<std::int64_t> mine;
                for (std::size_t w = 0; w < windows.count(); ++w) {
                    (void)one.plan(
                        windows, w, c.n, [&](std::size_t p) { return order[p]; },
                        [&](std::int64_t index) {
                            return costs.at(static_cast<std::size_t>(index));
                        },
                        {});
                    std::vector<std::int64_t> part(windows.records(w) / c.ranks);
                    one.rank_records(rank, std::span<std::int64_t>(part));
                    mine.insert(mine.end(), part.begin(), part.end());
                }
                REQUIRE(mine == share.records);
            }
        }
}

TEST_CASE("epoch window: a table read in place (float, 32-bit integers) plans as its values do",
          "[epoch_window]") {
    const std::size_t n = 3000;
    std::vector<std::uint32_t> lengths(n);
    std::vector<float> single(n);
    std::vector<double> as_double(n);
    const std::vector<double> drawn = bcl_test::costs_of_seed(n, 5);
    for (std::size_t i = 0; i < n; ++i) {
        lengths[i] = static_cast<std::uint32_t>(std::fmod(drawn[i], 100.0) * 1000.0);
        single[i] = static_cast<float>(lengths[i]) * 0.5f;
        as_double[i] = static_cast<double>(single[i]);
    }
    const bcl::epoch_shape shape{.ranks = 8, .lookahead = 4, .batch = 16};
    const bcl::epoch_windows windows = bcl::epoch_windows::of(n, shape);
    const bcl::keyed_order keyed(n, 3, 0);
    const auto at = [&](std::size_t p) { return keyed.at(p); };
    bcl::epoch_window_planner in_place, converted;
    for (std::size_t w = 0; w < windows.count(); ++w) {
        (void)in_place.plan(windows, w, n, at,
                            [&](std::uint64_t i) { return static_cast<double>(single.at(i)); }, {});
        (void)converted.plan(windows, w, n, at, [&](std::uint64_t i) { return as_double.at(i); },
                             {});
        const std::vector<bcl::plan_slot> a(in_place.slots().begin(), in_place.slots().end());
        const std::vector<bcl::plan_slot> b(converted.slots().begin(), converted.slots().end());
        REQUIRE(a == b);
    }
}

TEST_CASE("epoch window: a window past the epoch, an invalid cost, an index without a cost, a "
          "rank past the ranks and a short output are errors naming them",
          "[epoch_window]") {
    const std::size_t n = 100;
    std::vector<double> costs(n, 1.0);
    const bcl::epoch_shape shape{.ranks = 4, .lookahead = 2, .batch = 3};
    const bcl::epoch_windows windows = bcl::epoch_windows::of(n, shape);
    const auto identity = [](std::size_t p) { return p; };
    const auto cost_of = [&](std::size_t i) { return costs.at(i); };
    bcl::epoch_window_planner one;
    REQUIRE_THROWS_WITH(one.plan(windows, windows.count(), n, identity, cost_of, {}, "me"),
                        Contains("me: window " + std::to_string(windows.count())));

    REQUIRE_NOTHROW(one.plan(windows, 1, n, identity, cost_of, {}));
    std::vector<std::size_t> before(windows.records(1) / 4);
    one.rank_records(2, std::span<std::size_t>(before));

    std::vector<std::size_t> out(windows.records(1) / 4, 12345);
    REQUIRE_THROWS_WITH(one.rank_records(4, std::span<std::size_t>(out), "me"),
                        Contains("me: rank 4 of 4"));
    std::vector<std::size_t> short_out(out.size() - 1, 12345);
    REQUIRE_THROWS(one.rank_records(0, std::span<std::size_t>(short_out)));
    REQUIRE(short_out == std::vector<std::size_t>(out.size() - 1, 12345)); // nothing written

    for (const double bad : {-1.0, std::numeric_limits<double>::quiet_NaN(),
                             std::numeric_limits<double>::infinity()}) {
        costs[30] = bad;
        REQUIRE_THROWS_WITH(one.plan(windows, 1, n, identity, cost_of, {}, "me"),
                            Contains("me: the cost of dataset index 30 is"));
        // No window is planned after a throw: the last one's records are not handed out.
        REQUIRE_THROWS_WITH(one.rank_records(2, std::span<std::size_t>(out)),
                            Contains("no window planned"));
    }
    costs[30] = 1.0;
    const auto without = [&](std::size_t i) -> double {
        if (i == 40) throw bcl::error("dataset index 40 has no cost");
        return costs.at(i);
    };
    REQUIRE_THROWS_WITH(one.plan(windows, 1, n, identity, without, {}),
                        Contains("dataset index 40 has no cost"));
    // The next plan that returns plans as if nothing had been thrown.
    REQUIRE_NOTHROW(one.plan(windows, 1, n, identity, cost_of, {}));
    one.rank_records(2, std::span<std::size_t>(out));
    REQUIRE(out == before);
}
