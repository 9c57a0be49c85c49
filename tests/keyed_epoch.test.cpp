// bcl::keyed_epoch_pass and bcl::keyed_epoch_digest, as a specification: a pass planned window by
// window hands out, batch for batch, the plan of the whole epoch over the keyed order (the
// reference in tests/support/epoch_reference.hpp, written apart from the planner, and
// bcl::epoch_planner::share), in any order its batches are asked, and sums the same promises;
// planned() sums the windows planned as the pass moves forward; its digest is known without
// planning, equal on every rank, another for another input, epoch, number of ranks or rest;
// rest_after(p) leaves exactly the order positions no rank took in its first p batches, and a
// pass over that rest at another size hands them out once; bad arguments are errors naming them.

#include "support/distributions.hpp"
#include "support/epoch_reference.hpp"

#include <bcl/epoch_plan.hpp>
#include <bcl/epoch_rest.hpp>
#include <bcl/keyed_epoch.hpp>
#include <bcl/keyed_order.hpp>
#include <bcl/stage_plan.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>
#include <span>
#include <vector>

namespace {

using Catch::Matchers::Contains;
using keyed_batches = std::vector<std::vector<std::uint64_t>>;

struct keyed_case {
    std::size_t n, ranks, batch, lookahead;
};

std::vector<std::uint64_t> keyed_positions(std::size_t n, std::uint64_t seed, std::uint64_t epoch,
                                           bool shuffle) {
    std::vector<std::uint64_t> out(n);
    const bcl::keyed_order order(n, seed, epoch);
    for (std::size_t p = 0; p < n; ++p) out[p] = shuffle ? order.at(p) : p;
    return out;
}

keyed_batches all_batches(bcl::keyed_epoch_pass<>& pass, const std::vector<double>& costs,
                          bool backwards = false) {
    const auto cost_of = [&](std::uint64_t i) { return costs.at(i); };
    keyed_batches out(pass.batches());
    for (std::size_t k = 0; k < pass.batches(); ++k) {
        const std::size_t i = backwards ? pass.batches() - 1 - k : k;
        const std::span<const std::uint64_t> b = pass.batch(i, cost_of);
        out[i].assign(b.begin(), b.end());
    }
    return out;
}

} // namespace

TEST_CASE("keyed epoch: window by window, the batches and promises of the whole epoch's plan "
          "over the keyed order, in any order the batches are asked",
          "[keyed_epoch]") {
    for (const keyed_case c :
         {keyed_case{70, 3, 4, 2}, keyed_case{97, 8, 3, 2}, keyed_case{5, 8, 2, 4},
          keyed_case{1000, 5, 16, 8}, keyed_case{301, 4, 4, 3}, keyed_case{0, 3, 4, 2}})
        for (const bool drop_last : {false, true})
            for (const bool shuffle : {true, false})
                for (const std::uint64_t epoch : {0U, 3U}) {
                    CAPTURE(c.n, c.ranks, c.batch, c.lookahead, drop_last, shuffle, epoch);
                    const std::vector<double> costs = bcl_test::costs_of_seed(c.n, c.n + epoch);
                    const bcl::epoch_shape shape{.ranks = c.ranks,
                                                 .lookahead = c.lookahead,
                                                 .batch = c.batch,
                                                 .drop_last = drop_last};
                    const bcl::plan_options opt{.batching = bcl::batch_cost::padded};
                    const std::vector<std::uint64_t> order =
                        keyed_positions(c.n, 7, epoch, shuffle);
                    bcl_test::index_list as_list(order.begin(), order.end());
                    const bcl_test::reference_epoch ref = bcl_test::reference_plan(
                        as_list, costs, c.ranks, c.lookahead, c.batch, drop_last, opt);
                    for (std::size_t rank = 0; rank < c.ranks; ++rank) {
                        bcl::epoch_share<std::uint64_t> share;
                        bcl::epoch_planner{}.share(std::span<const double>(costs),
                                                   std::span<const std::uint64_t>(order), shape,
                                                   rank, opt, share);
                        bcl::keyed_epoch_pass<> pass;
                        pass.start(7, epoch, shuffle, shape, rank, opt, 11, bcl::epoch_rest(c.n));
                        REQUIRE(pass.batches() == share.batches());
                        const keyed_batches got = all_batches(pass, costs);
                        for (std::size_t i = 0; i < got.size(); ++i) {
                            const auto want = share.batch(i);
                            REQUIRE(got[i] == std::vector<std::uint64_t>(want.begin(), want.end()));
                            REQUIRE(got[i].size() == ref.batches[rank][i].size());
                            REQUIRE(std::equal(got[i].begin(), got[i].end(),
                                               ref.batches[rank][i].begin()));
                        }
                        // Forward through the pass, planned() sums every window once.
                        REQUIRE(pass.planned().digest == share.summary.digest);
                        REQUIRE(pass.planned().windows == share.summary.windows);
                        REQUIRE(all_batches(pass, costs, /*backwards=*/true) == got);
                        const bcl::epoch_plan_summary s =
                            pass.summary([&](std::uint64_t i) { return costs.at(i); });
                        REQUIRE(s.digest == ref.digest);
                        REQUIRE(s.digest == share.summary.digest);
                        REQUIRE(s.windows == share.summary.windows);
                        REQUIRE(s.total == share.summary.total);
                        REQUIRE(s.objective == share.summary.objective);
                        REQUIRE(s.lower_bound == share.summary.lower_bound);
                        REQUIRE(all_batches(pass, costs) == got);
                    }
                }
}

TEST_CASE("keyed epoch: the digest is known without planning, equal on every rank, another for "
          "another input, epoch, number of ranks or rest",
          "[keyed_epoch]") {
    const bcl::epoch_rest whole(70);
    const std::uint8_t taken[] = {0x06};
    const bcl::epoch_rest part = bcl::epoch_rest::from_parts(70, 10, 3, taken, "test");
    const std::set<std::uint64_t> digests{
        bcl::keyed_epoch_digest(5, 0, 4, whole), bcl::keyed_epoch_digest(6, 0, 4, whole),
        bcl::keyed_epoch_digest(5, 1, 4, whole), bcl::keyed_epoch_digest(5, 0, 3, whole),
        bcl::keyed_epoch_digest(5, 0, 4, part)};
    REQUIRE(digests.size() == 5);
    const bcl::epoch_shape shape{.ranks = 3, .lookahead = 2, .batch = 4};
    for (std::size_t rank = 0; rank < 3; ++rank) {
        bcl::keyed_epoch_pass<> pass;
        pass.start(9, 2, true, shape, rank, {}, 5, part);
        REQUIRE(pass.digest() == bcl::keyed_epoch_digest(5, 2, 3, part));
        REQUIRE(pass.planned().windows == 0); // nothing planned to know it
    }
}

TEST_CASE("keyed epoch: rest_after(p) leaves the order positions no rank took in its first p "
          "batches, and a pass over that rest at another size hands out exactly those records",
          "[keyed_epoch]") {
    // N a multiple of R: no padding, so the positions taken are exactly those of the batches.
    for (const keyed_case c :
         {keyed_case{72, 3, 4, 2}, keyed_case{96, 4, 3, 3}, keyed_case{40, 2, 5, 8}}) {
        CAPTURE(c.n, c.ranks, c.batch, c.lookahead);
        const std::vector<double> costs = bcl_test::costs_of_seed(c.n, 2);
        const auto cost_of = [&](std::uint64_t i) { return costs.at(i); };
        const bcl::epoch_shape shape{.ranks = c.ranks, .lookahead = c.lookahead, .batch = c.batch};
        const std::vector<std::uint64_t> order = keyed_positions(c.n, 3, 1, true);
        std::vector<std::size_t> position_of(c.n);
        for (std::size_t p = 0; p < c.n; ++p) position_of[order[p]] = p;
        std::vector<keyed_batches> every;
        for (std::size_t r = 0; r < c.ranks; ++r) {
            bcl::keyed_epoch_pass<> pass;
            pass.start(3, 1, true, shape, r, {}, 0, bcl::epoch_rest(c.n));
            every.push_back(all_batches(pass, costs));
        }
        bcl::keyed_epoch_pass<> pass;
        pass.start(3, 1, true, shape, 0, {}, 0, bcl::epoch_rest(c.n));
        for (std::size_t p = 0; p <= pass.batches(); ++p) {
            CAPTURE(p);
            std::vector<bool> gone(c.n, false);
            for (const keyed_batches& rank : every)
                for (std::size_t i = 0; i < p; ++i)
                    for (const std::uint64_t index : rank[i]) gone[position_of[index]] = true;
            const bcl::epoch_rest rest = pass.rest_after(p, cost_of);
            std::vector<std::uint64_t> expected, got;
            for (std::size_t q = 0; q < c.n; ++q)
                if (!gone[q]) expected.push_back(q);
            for (std::uint64_t q = 0; q < rest.size(); ++q) got.push_back(rest.position(q));
            REQUIRE(got == expected);
            const bcl::epoch_shape other{.ranks = 2, .lookahead = 2, .batch = 3};
            std::vector<std::uint64_t> after;
            for (std::size_t r = 0; r < 2; ++r) {
                bcl::keyed_epoch_pass<> next;
                next.start(3, 1, true, other, r, {}, 0, rest);
                for (const auto& b : all_batches(next, costs))
                    after.insert(after.end(), b.begin(), b.end());
            }
            std::vector<std::uint64_t> want;
            for (const std::uint64_t q : expected) want.push_back(order[q]);
            std::sort(want.begin(), want.end());
            std::sort(after.begin(), after.end());
            after.erase(std::unique(after.begin(), after.end()), after.end()); // padding repeats
            REQUIRE(after == want);
        }
        REQUIRE_THROWS_WITH(pass.rest_after(pass.batches() + 1, cost_of, "me"),
                            Contains("me: position"));
    }
}

TEST_CASE("keyed epoch: a bad shape, options or rank, a batch past the pass and an invalid cost "
          "are errors naming them",
          "[keyed_epoch]") {
    std::vector<double> costs(50, 1.0);
    const auto cost_of = [&](std::uint64_t i) { return costs.at(i); };
    bcl::keyed_epoch_pass<> pass;
    const bcl::epoch_shape shape{.ranks = 2, .lookahead = 2, .batch = 3};
    REQUIRE_THROWS_WITH(pass.start(1, 0, true, {.ranks = 0, .lookahead = 1, .batch = 1}, 0, {}, 0,
                                   bcl::epoch_rest(50), "me"),
                        Contains("me: the ranks (0)"));
    REQUIRE_THROWS_WITH(pass.start(1, 0, true, shape, 2, {}, 0, bcl::epoch_rest(50), "me"),
                        Contains("me: rank 2 of 2 ranks"));
    REQUIRE_THROWS_WITH(
        pass.start(1, 0, true, shape, 0, {.cap = -1.0}, 0, bcl::epoch_rest(50), "me"),
        Contains("me"));
    pass.start(1, 0, true, shape, 1, {}, 0, bcl::epoch_rest(50));
    REQUIRE_THROWS_WITH(pass.batch(pass.batches(), cost_of, "me"), Contains("me: batch"));
    const std::uint64_t victim = bcl::keyed_order(50, 1, 0).at(0);
    costs[victim] = -1.0;
    REQUIRE_THROWS_WITH(pass.batch(0, cost_of, "me"),
                        Contains("me: the cost of dataset index " + std::to_string(victim)));
    costs[victim] = 1.0; // the next call plans the window again
    REQUIRE(pass.batch(0, cost_of).size() == 3);
}

TEST_CASE("keyed epoch of stage costs: read as bcl::stage_rows, window by window, the batches and "
          "promises of the whole epoch's plan of the same stage table",
          "[keyed_epoch][stages]") {
    for (const keyed_case c :
         {keyed_case{97, 8, 3, 2}, keyed_case{1000, 5, 16, 8}, keyed_case{301, 4, 4, 3}}) {
        CAPTURE(c.n, c.ranks, c.batch, c.lookahead);
        std::vector<double> rows(3 * c.n);
        for (std::size_t s = 0; s < 3; ++s) {
            const std::vector<double> column = bcl_test::costs_of_seed(c.n, c.n * 3 + s);
            for (std::size_t i = 0; i < c.n; ++i) rows[i * 3 + s] = column[i];
        }
        const bcl::stage_rows stage_rows{3, [&](std::uint64_t i, std::span<double> row) {
                                             for (std::size_t s = 0; s < 3; ++s)
                                                 row[s] = rows.at(i * 3 + s);
                                         }};
        const bcl::epoch_shape shape{.ranks = c.ranks, .lookahead = c.lookahead, .batch = c.batch};
        const std::vector<std::uint64_t> order = keyed_positions(c.n, 5, 1, true);
        for (std::size_t rank = 0; rank < c.ranks; ++rank) {
            bcl::epoch_share<std::uint64_t> share;
            bcl::epoch_planner{}.share(bcl::stage_table_view{rows, 3},
                                       std::span<const std::uint64_t>(order), shape, rank, {},
                                       share);
            bcl::keyed_epoch_pass<> pass;
            pass.start(5, 1, true, shape, rank, {}, 11, bcl::epoch_rest(c.n));
            REQUIRE(pass.batches() == share.batches());
            for (std::size_t i = 0; i < pass.batches(); ++i) {
                const auto got = pass.batch(i, stage_rows);
                const auto want = share.batch(i);
                REQUIRE(std::vector<std::uint64_t>(got.begin(), got.end()) ==
                        std::vector<std::uint64_t>(want.begin(), want.end()));
            }
            const bcl::epoch_plan_summary s = pass.summary(stage_rows);
            REQUIRE(s.digest == share.summary.digest);
            REQUIRE(s.objective == share.summary.objective);
            REQUIRE(s.total == share.summary.total);
        }
    }
}
