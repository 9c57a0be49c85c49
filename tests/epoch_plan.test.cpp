// bcl::epoch_planner and its parts, as a specification: the epoch's order is the documented
// integer shuffle; over all ranks every
// record of the laid-out order comes out exactly once, in exact batches, as many on every rank;
// a rank's share and the digest are those of bcl::plan_window over the order's windows, written
// again in tests/support/epoch_reference.hpp; bad shapes, indices and costs are errors naming
// them, and leave the share as it was.

#include "support/distributions.hpp"
#include "support/epoch_reference.hpp"

#include <bcl/epoch_plan.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

using bcl_test::index_list;
using Catch::Matchers::Contains;

struct shape_case {
    std::size_t n, ranks, batch, lookahead;
};

} // namespace

TEST_CASE("epoch plan: the order is the documented integer shuffle of (seed, epoch), and "
          "0..N-1 without shuffle",
          "[epoch_plan]") {
    std::vector<std::size_t> order;
    for (const std::uint64_t epoch : {0U, 1U, 17U}) {
        bcl::epoch_order(1000, true, 5, epoch, order);
        REQUIRE(order == bcl_test::reference_order(1000, 5, epoch, true));
        index_list sorted = order;
        std::sort(sorted.begin(), sorted.end());
        REQUIRE(sorted == bcl_test::reference_order(1000, 5, epoch, false));
    }
    std::vector<std::size_t> other;
    bcl::epoch_order(1000, true, 6, 0, other);
    bcl::epoch_order(1000, true, 5, 0, order);
    REQUIRE(other != order);
    bcl::epoch_order(1000, false, 5, 3, order);
    REQUIRE(std::is_sorted(order.begin(), order.end()));
}

TEST_CASE("epoch plan: every rank's share is the global plan's, and over all ranks every "
          "record of the laid-out order comes out exactly once, in exact batches",
          "[epoch_plan]") {
    // Full and short windows, N not a multiple of R (padding), N below R, one rank, batches of
    // one, an empty epoch.
    const shape_case sh =
        GENERATE(shape_case{70, 3, 4, 2}, shape_case{240, 4, 5, 3}, shape_case{97, 8, 3, 2},
                 shape_case{5, 8, 2, 4}, shape_case{50, 1, 7, 3}, shape_case{33, 2, 1, 5},
                 shape_case{0, 3, 4, 2}, shape_case{1000, 5, 16, 8});
    const bool drop_last = GENERATE(false, true);
    const bool padded = GENERATE(false, true);
    CAPTURE(sh.n, sh.ranks, sh.batch, sh.lookahead, drop_last, padded);
    const std::vector<double> table = bcl_test::costs_of_seed(sh.n, sh.n + sh.ranks);
    const index_list order = bcl_test::reference_order(sh.n, 11, 2, true);
    bcl::plan_options opt;
    opt.batching = padded ? bcl::batch_cost::padded : bcl::batch_cost::packed;
    const bcl::epoch_shape shape{sh.ranks, sh.lookahead, sh.batch, drop_last};
    const bcl_test::reference_epoch ref =
        bcl_test::reference_plan(order, table, sh.ranks, sh.lookahead, sh.batch, drop_last, opt);

    bcl::epoch_planner planner;
    index_list all;
    for (std::size_t rank = 0; rank < sh.ranks; ++rank) {
        bcl::epoch_share<std::size_t> share;
        planner.share(std::span<const double>(table), std::span<const std::size_t>(order), shape,
                      rank, opt, share);
        REQUIRE(share.summary.digest == ref.digest);
        REQUIRE(share.records.size() == ref.per_rank);
        REQUIRE(share.batches() == ref.batches[rank].size());
        for (std::size_t i = 0; i < share.batches(); ++i) {
            const std::span<const std::size_t> got = share.batch(i);
            REQUIRE(index_list(got.begin(), got.end()) == ref.batches[rank][i]);
            if (i + 1 < share.batches()) REQUIRE(got.size() == sh.batch);
        }
        all.insert(all.end(), share.records.begin(), share.records.end());
    }
    index_list kept = ref.kept;
    std::sort(kept.begin(), kept.end());
    std::sort(all.begin(), all.end());
    REQUIRE(all == kept);
}

TEST_CASE("epoch plan: plan() hands every window's slots to its caller, the digest chained",
          "[epoch_plan]") {
    const std::vector<double> table = bcl_test::costs_of_seed(500, 3);
    const index_list order = bcl_test::reference_order(500, 1, 0, true);
    const bcl::epoch_shape shape{.ranks = 4, .lookahead = 3, .batch = 8};
    bcl::epoch_planner planner;
    std::uint64_t chained = 0;
    std::size_t seen = 0;
    const bcl::epoch_plan_summary s = planner.plan(
        std::span<const double>(table), std::span<const std::size_t>(order), shape, {},
        [&](std::size_t first, std::span<const bcl::plan_slot> slots, const bcl::plan_summary&) {
            REQUIRE(first == seen);
            chained = bcl::plan_digest(slots, chained);
            seen += slots.size();
        });
    REQUIRE(seen == 500);
    REQUIRE(s.windows == 6); // 500 = 5 windows of 96, and one of 20
    REQUIRE(s.digest == chained);
    REQUIRE(s.batches == 16);
    REQUIRE(s.efficiency() > 0.0);
    REQUIRE(s.efficiency() <= 1.0);
}

TEST_CASE("epoch plan: a bad shape, a rank past the ranks, an index without a cost and a bad "
          "cost are errors naming them, and leave the share as it was",
          "[epoch_plan][errors]") {
    std::vector<double> table = bcl_test::costs_of_seed(100, 1);
    const index_list order = bcl_test::reference_order(100, 1, 0, true);
    bcl::epoch_planner planner;
    bcl::epoch_share<std::size_t> share;
    const bcl::epoch_shape ok{.ranks = 2, .lookahead = 2, .batch = 4};
    planner.share(std::span<const double>(table), std::span<const std::size_t>(order), ok, 1, {},
                  share);
    const bcl::epoch_share<std::size_t> before = share;
    const auto refused = [&](const bcl::epoch_shape& shape, std::size_t rank,
                             const std::vector<double>& costs, const index_list& o,
                             const std::string& words) {
        CAPTURE(words);
        REQUIRE_THROWS_WITH(planner.share(std::span<const double>(costs),
                                          std::span<const std::size_t>(o), shape, rank, {}, share,
                                          "who"),
                            Contains("who: ") && Contains(words));
        REQUIRE(share.records == before.records);
        REQUIRE(share.summary.digest == before.summary.digest);
    };
    refused({.ranks = 0, .lookahead = 2, .batch = 4}, 0, table, order, "must all be at least 1");
    refused({.ranks = 2, .lookahead = 0, .batch = 4}, 0, table, order, "must all be at least 1");
    refused({.ranks = 2, .lookahead = 2, .batch = 0}, 0, table, order, "must all be at least 1");
    refused({.ranks = std::size_t{1} << 20, .lookahead = 1 << 10, .batch = 2}, 0, table, order,
            "1048576 * 1024 * 2 records in one plan window, above the 1073741824");
    refused({.ranks = std::numeric_limits<std::size_t>::max(), .lookahead = 2, .batch = 2}, 0,
            table, order, "records in one plan window");
    refused(ok, 2, table, order, "rank 2 of 2 ranks");
    index_list beyond = order;
    beyond[17] = 100;
    refused(ok, 0, table, beyond, "dataset index 100 has no cost (the cost table has 100");
    for (const double bad : {std::numeric_limits<double>::quiet_NaN(), -1.0,
                             std::numeric_limits<double>::infinity(), 1e121}) {
        std::vector<double> costs = table;
        costs[42] = bad;
        refused(ok, 0, costs, order, "the cost of dataset index 42 is");
        REQUIRE_THROWS_WITH(bcl::check_cost_table(costs, "who"),
                            Contains("who: the cost of dataset index 42 is") &&
                                Contains("it must be >= 0 and at most bcl::max_estimate"));
    }
    REQUIRE_NOTHROW(
        bcl::check_cost_table(std::vector<double>{0.0, -0.0, bcl::max_estimate}, "who"));
}

TEST_CASE("epoch plan: the cost table's digest reads costs as the planner does", "[epoch_plan]") {
    const std::vector<double> a{1.0, 0.0, 3.5};
    const std::vector<double> b{1.0, -0.0, 3.5};
    std::vector<double> c = a;
    c[2] = std::nextafter(3.5, 4.0);
    REQUIRE(bcl::cost_table_digest(a) == bcl::cost_table_digest(b));
    REQUIRE(bcl::cost_table_digest(a) != bcl::cost_table_digest(c));
    REQUIRE(bcl::cost_table_digest(a) != bcl::cost_table_digest(std::vector<double>{1.0, 0.0}));
    // Fed one cost at a time (a table read where it lies), the same digest.
    for (const auto& table : {a, b, c, bcl_test::costs_of_seed(1000, 4)}) {
        bcl::cost_table_digester d(table.size());
        for (const double x : table) d.add(x);
        REQUIRE(d.digest() == bcl::cost_table_digest(table));
    }
    REQUIRE(bcl::cost_table_digester(3).digest() != bcl::cost_table_digest(a));
}

TEST_CASE("epoch plan of stage costs: over all ranks every record of the laid-out order comes out "
          "once, in exact batches, each window's steps the summed plan's; one stage plans as "
          "one cost a record, bit for bit",
          "[epoch_plan][stages]") {
    const shape_case sh = GENERATE(shape_case{70, 3, 4, 2}, shape_case{97, 8, 3, 2},
                                   shape_case{50, 1, 7, 3}, shape_case{1000, 5, 16, 8});
    const bool drop_last = GENERATE(false, true);
    CAPTURE(sh.n, sh.ranks, sh.batch, sh.lookahead, drop_last);
    const index_list order = bcl_test::reference_order(sh.n, 5, 1, true);
    const bcl::epoch_shape shape{sh.ranks, sh.lookahead, sh.batch, drop_last};
    const std::vector<double> first = bcl_test::costs_of_seed(sh.n, sh.n + 1);
    const std::vector<double> second = bcl_test::costs_of_seed(sh.n, sh.n + 2);
    std::vector<double> rows(2 * sh.n), summed(sh.n);
    for (std::size_t i = 0; i < sh.n; ++i) {
        rows[2 * i] = first[i];
        rows[2 * i + 1] = second[i];
        summed[i] = first[i] + second[i];
    }
    bcl::epoch_planner planner;
    index_list all;
    for (std::size_t rank = 0; rank < sh.ranks; ++rank) {
        bcl::epoch_share<std::size_t> one, flat, staged;
        planner.share(bcl::stage_table_view{first, 1}, std::span<const std::size_t>(order), shape,
                      rank, {}, one);
        planner.share(std::span<const double>(first), std::span<const std::size_t>(order), shape,
                      rank, {}, flat);
        REQUIRE(one.records == flat.records);
        REQUIRE(one.summary.digest == flat.summary.digest);
        REQUIRE(one.summary.objective == flat.summary.objective);
        planner.share(bcl::stage_table_view{rows, 2}, std::span<const std::size_t>(order), shape,
                      rank, {}, staged);
        bcl::epoch_share<std::size_t> again;
        planner.share(bcl::stage_table_view{rows, 2}, std::span<const std::size_t>(order), shape,
                      rank, {}, again);
        REQUIRE(again.records == staged.records);
        REQUIRE(staged.summary.digest == again.summary.digest);
        // Each batch holds the records the summed plan gives that step, shared by stage: the
        // same step's records over all ranks, checked below through the whole epoch's count.
        bcl::epoch_share<std::size_t> by_sum;
        planner.share(std::span<const double>(summed), std::span<const std::size_t>(order), shape,
                      rank, {}, by_sum);
        REQUIRE(staged.batches() == by_sum.batches());
        for (std::size_t i = 0; i + 1 < staged.batches(); ++i)
            REQUIRE(staged.batch(i).size() == sh.batch);
        all.insert(all.end(), staged.records.begin(), staged.records.end());
    }
    const bcl_test::reference_epoch ref =
        bcl_test::reference_plan(order, first, sh.ranks, sh.lookahead, sh.batch, drop_last, {});
    index_list kept = ref.kept;
    std::sort(kept.begin(), kept.end());
    std::sort(all.begin(), all.end());
    REQUIRE(all == kept);
}

TEST_CASE("epoch plan of stage costs: a table of no stages or too many, costs not whole rows, an "
          "index past the rows and a bad cost are errors naming them",
          "[epoch_plan][stages][errors]") {
    std::vector<double> rows = bcl_test::costs_of_seed(40, 3);
    const index_list order = bcl_test::reference_order(20, 1, 0, true);
    bcl::epoch_planner planner;
    bcl::epoch_share<std::size_t> share;
    const bcl::epoch_shape ok{.ranks = 2, .lookahead = 2, .batch = 2};
    const auto refused = [&](const bcl::stage_table_view& table, const index_list& o,
                             const std::string& words) {
        CAPTURE(words);
        REQUIRE_THROWS_WITH(
            planner.share(table, std::span<const std::size_t>(o), ok, 0, {}, share, "who"),
            Contains("who: ") && Contains(words));
        REQUIRE(share.records.empty());
    };
    refused({rows, 0}, order, "0 stages; a record has 1 to 16");
    refused({rows, 17}, order, "17 stages");
    refused({std::span<const double>(rows).first(39), 2}, order, "39 costs are not rows of 2");
    index_list beyond = order;
    beyond[3] = 20;
    refused({rows, 2}, beyond, "dataset index 20 has no cost");
    rows[2 * 11 + 1] = std::numeric_limits<double>::quiet_NaN();
    refused({rows, 2}, order, "the cost of stage 1 of dataset index 11 is nan");
}
