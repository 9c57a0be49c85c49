// bcl::balancer, as a specification of its public calls. push() takes records until the buffer
// holds buffer_capacity(opt) of them; pop() then runs a round and hands out its batches, exactly
// B records each, one per call, and nothing before (push() into a full buffer with nothing
// waiting runs the round itself). finish() flushes: pop() then drains every held record, the one
// short batch last, or drops the newest N mod B held records with drop_last. buffered() is
// always the records pushed and not yet handed out or dropped; can_push() says whether push()
// would take one; last_batch_cost() is the estimated cost of the batch just popped; settings()
// are the options it was built with. Every record comes out exactly once whatever the order of
// calls, under both policies. A call that throws bcl::error changes nothing.

#include "support/contract_checks.hpp"
#include "support/distributions.hpp"

#include <bcl/balancer.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>
#include <bcl/validate.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <span>
#include <vector>

namespace {

using bcl_test::cost_of;
using bcl_test::rec;
using core_balancer = bcl::balancer<rec, cost_of>;
using Catch::Matchers::Contains;

bcl::options tumbling_core_options(std::size_t b, std::size_t k, bool drop_last = false) {
    return {.batch_size = b,
            .lookahead = k,
            .drop_last = drop_last,
            .policy = bcl::lookahead_policy::tumbling};
}

bcl::options sliding_core_options(std::size_t b, std::size_t k, bool drop_last = false) {
    return {.batch_size = b,
            .lookahead = k,
            .drop_last = drop_last,
            .policy = bcl::lookahead_policy::sliding,
            .buffer_windows = 2,
            .max_age = 2};
}

std::vector<std::uint64_t> rec_ids(std::span<rec> batch) {
    return bcl_test::ids_of(batch);
}

/// Pops every ready batch into `out`.
void drain(core_balancer& b, bcl_test::batch_ids& out) {
    while (auto batch = b.pop()) out.push_back(rec_ids(*batch));
}

} // namespace

TEST_CASE("balancer: pop() has nothing until the buffer is full, then hands out K batches of "
          "exactly B, one per call",
          "[balancer]") {
    // Tumbling, B = 3, K = 2: a window of 6.
    core_balancer b{cost_of{}, tumbling_core_options(3, 2)};
    CHECK_FALSE(b.pop());
    for (std::uint64_t i = 0; i < 5; ++i) {
        b.push(rec{i, 1.0 + static_cast<double>(i)});
        CHECK_FALSE(b.pop());
        CHECK(b.buffered() == i + 1);
        CHECK(b.can_push());
    }
    b.push(rec{5, 6.0});
    CHECK(b.buffered() == 6);
    std::set<std::uint64_t> seen;
    for (std::size_t j = 0; j < 2; ++j) {
        auto batch = b.pop();
        REQUIRE(batch);
        CHECK(batch->size() == 3);
        for (const rec& r : *batch) seen.insert(r.id);
        CHECK(b.buffered() == 6 - 3 * (j + 1));
        CHECK(b.stats().batches == j + 1);
    }
    CHECK(seen == std::set<std::uint64_t>{0, 1, 2, 3, 4, 5});
    CHECK_FALSE(b.pop()); // more input is needed
    CHECK_FALSE(b.finished());
}

TEST_CASE("balancer: push() into a full buffer with nothing waiting runs the round, and refuses "
          "while its batches wait",
          "[balancer]") {
    core_balancer b{cost_of{}, tumbling_core_options(3, 2)};
    for (std::uint64_t i = 0; i < 7; ++i) b.push(rec{i, 1.0}); // the 7th runs the first round
    CHECK(b.buffered() == 7);
    for (std::uint64_t i = 7; i < 12; ++i) b.push(rec{i, 1.0}); // the buffer fills again
    CHECK_FALSE(b.can_push());                                  // 6 held, 2 batches waiting
    CHECK_THROWS_AS(b.push(rec{12, 1.0}), bcl::error);
    CHECK(b.buffered() == 12);
    bcl_test::batch_ids out;
    out.push_back(rec_ids(*b.pop()));
    CHECK_FALSE(b.can_push()); // still full, and one batch of the round still waits
    out.push_back(rec_ids(*b.pop()));
    CHECK(b.can_push()); // nothing waits: the next push would run the next round
    CHECK(b.buffered() == 6);
    // The first two batches are the first window: ids 0..5, each once.
    std::vector<std::uint64_t> first;
    for (const auto& batch : out) first.insert(first.end(), batch.begin(), batch.end());
    std::sort(first.begin(), first.end());
    CHECK(first == std::vector<std::uint64_t>{0, 1, 2, 3, 4, 5});
    // A pop() now runs the full second window itself.
    auto second = b.pop();
    REQUIRE(second);
    CHECK(second->size() == 3);
    for (const rec& r : *second) CHECK(r.id >= 6);
}

TEST_CASE("balancer: finish() flushes every held record, the short batch last; twice is harmless",
          "[balancer]") {
    for (const bcl::options& opt : {tumbling_core_options(3, 2), sliding_core_options(3, 2)}) {
        // N = 11, B = 3: batches of 3, 3, 3 and a short one of 2.
        core_balancer b{cost_of{}, opt};
        bcl_test::batch_ids out;
        for (std::uint64_t i = 0; i < 11; ++i) {
            b.push(rec{i, static_cast<double>((i * 7) % 5)});
            drain(b, out);
        }
        b.finish();
        CHECK(b.finished());
        CHECK_FALSE(b.can_push());
        b.finish();
        CHECK(b.buffered() == 11 - 3 * out.size());
        drain(b, out);
        CHECK(b.buffered() == 0);
        CHECK_FALSE(b.pop());
        CHECK(bcl_test::check_cardinality(out, 11, 3, false).empty());
        CHECK(bcl_test::check_exactly_once(out, 11, 3, false).empty());
        CHECK(b.stats().records_in == 11);
        CHECK(b.stats().records_out == 11);
    }
}

TEST_CASE("balancer: with drop_last, finish() drops the N mod B newest records still held",
          "[balancer]") {
    for (const bool slide : {false, true})
        for (const std::size_t n : {10U, 12U, 23U, 29U}) {
            const bcl::options opt =
                slide ? sliding_core_options(3, 2, true) : tumbling_core_options(3, 2, true);
            INFO((slide ? "sliding" : "tumbling") << ", N " << n);
            core_balancer b{cost_of{}, opt};
            const bcl_test::cost_list costs = bcl_test::lognormal_costs(n, n);
            bcl_test::batch_ids out;
            for (std::uint64_t i = 0; i < n; ++i) {
                b.push(rec{i, costs[i]});
                drain(b, out);
            }
            // Held at finish(): every id not out yet. The N mod B largest of them go.
            std::set<std::uint64_t> held;
            for (std::uint64_t i = 0; i < n; ++i) held.insert(i);
            for (const auto& batch : out)
                for (const std::uint64_t id : batch) held.erase(id);
            std::set<std::uint64_t> dropped;
            for (auto it = held.rbegin(); dropped.size() < n % 3; ++it) dropped.insert(*it);
            b.finish();
            CHECK(b.stats().records_dropped == n % 3);
            CHECK(b.buffered() == held.size() - n % 3);
            drain(b, out);
            for (const auto& batch : out) {
                CHECK(batch.size() == 3); // no short batch
                for (const std::uint64_t id : batch) CHECK(dropped.count(id) == 0);
            }
            CHECK(out.size() == n / 3);
            if (!slide) // tumbling: exactly the last N mod B records pushed
                CHECK(bcl_test::check_exactly_once(out, n, 3, true).empty());
        }
}

TEST_CASE("balancer: last_batch_cost is the estimated cost of the batch just popped, and the "
          "statistics count the full ones",
          "[balancer]") {
    core_balancer b{cost_of{}, tumbling_core_options(2, 2)};
    CHECK(b.last_batch_cost() == 0.0); // before the first
    // Costs 1, 2, 4, 8, 16: one window of 4 and a short batch of the 16 alone.
    std::vector<double> batch_costs;
    for (std::uint64_t i = 0; i < 5; ++i) b.push(rec{i, std::ldexp(1.0, static_cast<int>(i))});
    b.finish();
    while (auto batch = b.pop()) {
        double sum = 0.0;
        for (const rec& r : *batch) sum += r.cost;
        CHECK(b.last_batch_cost() == sum);
        batch_costs.push_back(sum);
    }
    REQUIRE(batch_costs.size() == 3);
    // The best split of {1, 2, 4, 8} in two pairs is {8, 1} and {4, 2}: 9 and 6; the short last.
    CHECK(std::max(batch_costs[0], batch_costs[1]) == 9.0);
    CHECK(std::min(batch_costs[0], batch_costs[1]) == 6.0);
    CHECK(batch_costs[2] == 16.0);
    CHECK(b.stats().batch_cost.count() == 2); // the short batch is left out
    CHECK(b.stats().batch_cost.mean() == 7.5);
}

TEST_CASE("balancer: every record comes out once in batches of exactly B, and buffered() is "
          "what is held, whatever the order of calls and under both policies",
          "[balancer][property]") {
    std::uint64_t counter = 0;
    for (const bool slide : {false, true})
        for (const auto& [bs, k] : {std::pair<std::size_t, std::size_t>{1, 1}, {2, 3}, {5, 2}})
            for (const bcl_test::distribution& dist : bcl_test::all_distributions())
                for (const bool drop_last : {false, true}) {
                    const std::uint64_t seed = bcl_test::case_seed(++counter);
                    std::mt19937_64 gen(seed);
                    const std::size_t n = static_cast<std::size_t>(gen() % 200);
                    const bcl::options opt = slide ? sliding_core_options(bs, k, drop_last)
                                                   : tumbling_core_options(bs, k, drop_last);
                    INFO(dist.name << (slide ? " sliding" : " tumbling") << " B " << bs << " K "
                                   << k << " N " << n << " drop_last " << drop_last);
                    const bcl_test::cost_list costs = dist.generate(n, seed);
                    core_balancer b{cost_of{}, opt};
                    bcl_test::batch_ids out;
                    std::size_t handed_out = 0;
                    const auto pop_some = [&](std::uint64_t most) {
                        for (std::uint64_t p = 0; p < most; ++p) {
                            auto batch = b.pop();
                            if (!batch) break;
                            handed_out += batch->size();
                            out.push_back(rec_ids(*batch));
                        }
                    };
                    for (std::uint64_t i = 0; i < n; ++i) {
                        while (!b.can_push()) pop_some(1);
                        b.push(rec{i, costs[i]});
                        pop_some(gen() % 3); // 0, 1 or 2 batches
                        REQUIRE(b.buffered() == i + 1 - handed_out);
                    }
                    b.finish();
                    pop_some(std::numeric_limits<std::uint64_t>::max());
                    CHECK(b.buffered() == 0);
                    CHECK(bcl_test::check_cardinality(out, n, bs, drop_last).empty());
                    if (!slide || !drop_last)
                        CHECK(bcl_test::check_exactly_once(out, n, bs, drop_last).empty());
                    else // sliding drops the newest held, not always the newest pushed
                        CHECK(handed_out + b.stats().records_dropped == n);
                    CHECK(b.stats().records_out == handed_out);
                }
}

TEST_CASE("balancer: settings() are the options it was built with, and options it refuses "
          "build nothing",
          "[balancer]") {
    bcl::options opt = sliding_core_options(4, 3);
    opt.seed = 99;
    opt.mean_cost = 2.5;
    const core_balancer b{cost_of{}, opt};
    CHECK(b.settings().batch_size == 4);
    CHECK(b.settings().lookahead == 3);
    CHECK(b.settings().seed == 99);
    CHECK(b.settings().mean_cost == 2.5);
    CHECK(b.settings().policy == bcl::lookahead_policy::sliding);
    CHECK(b.buffered() == 0);
    CHECK_FALSE(b.finished());
    opt.lookahead = 0;
    CHECK_THROWS_WITH((core_balancer{cost_of{}, opt}), Contains("lookahead"));
}

TEST_CASE("balancer: next_epoch() with a mean cost it refuses changes nothing", "[balancer]") {
    const bcl::options opt = tumbling_core_options(2, 2);
    core_balancer b{cost_of{}, opt};
    core_balancer twin{cost_of{}, opt};
    for (const double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity(),
                             std::nextafter(bcl::max_estimate, 1e300)}) {
        CHECK_THROWS_WITH(b.next_epoch(bad), Contains("mean_cost"));
        CHECK(b.settings().mean_cost == 0.0);
        CHECK_FALSE(b.finished());
    }
    // It goes on exactly as the twin that never saw the bad calls.
    bcl_test::batch_ids mine;
    bcl_test::batch_ids theirs;
    const bcl_test::cost_list costs = bcl_test::pareto_costs(9, 5);
    for (std::uint64_t i = 0; i < 9; ++i) {
        b.push(rec{i, costs[i]});
        twin.push(rec{i, costs[i]});
        drain(b, mine);
        drain(twin, theirs);
    }
    b.finish();
    twin.finish();
    drain(b, mine);
    drain(twin, theirs);
    CHECK(mine == theirs);
    CHECK_THROWS_AS(b.next_epoch(-1.0), bcl::error); // drained: the value alone is refused
    CHECK(b.finished());
    CHECK(b.settings().mean_cost == 0.0);
    b.next_epoch(3.0);
    CHECK(b.settings().mean_cost == 3.0);
    CHECK_FALSE(b.finished());
}

TEST_CASE("balancer: take_state() moves out every held record and leaves it finished and empty",
          "[balancer]") {
    core_balancer b{cost_of{}, tumbling_core_options(2, 2)};
    for (std::uint64_t i = 0; i < 7; ++i) b.push(rec{i, 1.0}); // a round ran: 7 held
    CHECK(b.buffered() == 7);
    const core_balancer::state s = std::move(b).take_state();
    CHECK(s.pending.size() == 7);
    CHECK(b.buffered() == 0); // NOLINT(bugprone-use-after-move): its promised state
    CHECK(b.finished());
    CHECK_FALSE(b.can_push());
    CHECK_FALSE(b.pop());
}
