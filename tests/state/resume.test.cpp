// Exact resume: a balancer saved at any point and restored, fed the rest of the input, emits
// exactly the batches the uninterrupted balancer would have emitted.

#include "support/contract_checks.hpp"
#include "support/distributions.hpp"

#include <bcl/balancer.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>
#include <bcl/record_model.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

using namespace bcl_test;

namespace {

using resumed_balancer = bcl::balancer<rec, cost_of>;

struct interruption {
    std::size_t save_after = 0;     // records pushed before saving (may be == n: during the drain)
    std::size_t drained_before = 0; // during the drain: batches popped after finish() before saving
    bool through_bytes = true;
    bool move_state = false;
};

batch_ids uninterrupted(const cost_list& costs, const bcl::options& opt) {
    return run(driver::eager, costs, opt).batches;
}

// Pushes and pops like driver::eager, but saves after `save_after` pushes, destroys the balancer
// and continues in a new one restored from the state (optionally through its byte string).
batch_ids interrupted(const cost_list& costs, const bcl::options& opt, const interruption& at) {
    batch_ids out;
    auto first = std::make_unique<resumed_balancer>(cost_of{}, opt);
    std::size_t i = 0;
    for (; i < at.save_after; ++i) {
        first->push(rec{i, costs[i]});
        while (auto batch = first->pop()) out.push_back(ids_of(*batch));
    }
    if (i == costs.size()) {
        first->finish();
        for (std::size_t k = 0; k < at.drained_before; ++k)
            if (auto batch = first->pop()) out.push_back(ids_of(*batch));
    }
    resumed_balancer::state st = at.move_state ? std::move(*first).take_state() : first->save();
    first.reset();
    if (at.through_bytes) {
        const std::string bytes = st.to_bytes();
        st = resumed_balancer::state::from_bytes(bytes, std::move(st.pending));
    }
    resumed_balancer second{cost_of{}, opt, std::move(st)};
    for (; i < costs.size(); ++i) {
        second.push(rec{i, costs[i]});
        while (auto batch = second.pop()) out.push_back(ids_of(*batch));
    }
    second.finish();
    while (auto batch = second.pop()) out.push_back(ids_of(*batch));
    return out;
}

bcl::options with_policy(bcl::options opt, bool sliding) {
    if (sliding) opt.policy = bcl::lookahead_policy::sliding;
    return opt;
}

} // namespace

TEST_CASE(
    "A restored balancer emits exactly the batches of the uninterrupted one, at any save point",
    "[resume]") {
    std::mt19937_64 gen(7);
    for (const bool sliding : {false, true})
        for (const bool drop_last : {false, true})
            for (const scenario& s : contract_scenarios(drop_last)) {
                const bcl::options opt = with_policy(s.options(), sliding);
                const cost_list costs = s.costs();
                const batch_ids expected = uninterrupted(costs, opt);
                for (int trial = 0; trial < 3; ++trial) {
                    interruption at;
                    at.save_after = static_cast<std::size_t>(gen() % (costs.size() + 1));
                    at.drained_before = static_cast<std::size_t>(gen() % (opt.lookahead + 2));
                    at.through_bytes = trial != 1;
                    at.move_state = trial == 2;
                    INFO(s.describe()
                         << (sliding ? " sliding" : " tumbling") << " saved after " << at.save_after
                         << " pushes, " << at.drained_before << " drained, bytes "
                         << at.through_bytes << ", moved " << at.move_state);
                    REQUIRE(interrupted(costs, opt, at) == expected);
                }
            }
}

TEST_CASE("save() does not disturb the balancer it is called on", "[resume]") {
    const cost_list costs = lognormal_costs(2000, 11);
    for (const bool sliding : {false, true}) {
        const bcl::options opt = with_policy({.batch_size = 8, .lookahead = 4, .seed = 3}, sliding);
        const batch_ids expected = uninterrupted(costs, opt);
        resumed_balancer b{cost_of{}, opt};
        batch_ids out;
        for (std::size_t i = 0; i < costs.size(); ++i) {
            b.push(rec{i, costs[i]});
            if (i % 37 == 0) (void)b.save();
            while (auto batch = b.pop()) out.push_back(ids_of(*batch));
        }
        b.finish();
        (void)b.save();
        while (auto batch = b.pop()) out.push_back(ids_of(*batch));
        REQUIRE(out == expected);
    }
}

TEST_CASE("Restoring with different options is an error naming the option", "[resume][errors]") {
    const bcl::options opt{
        .batch_size = 4, .lookahead = 2, .seed = 1, .policy = bcl::lookahead_policy::tumbling};
    resumed_balancer b{cost_of{}, opt};
    for (std::uint64_t i = 0; i < 5; ++i) b.push(rec{i, 1.0});
    const auto restore_with = [&](bcl::options other) {
        resumed_balancer{cost_of{}, other, b.save()};
    };
    REQUIRE_NOTHROW(restore_with(opt));
    bcl::options other = opt;
    other.batch_size = 8;
    REQUIRE_THROWS_WITH(restore_with(other), Catch::Contains("batch_size"));
    other = opt;
    other.lookahead = 3;
    REQUIRE_THROWS_WITH(restore_with(other), Catch::Contains("lookahead"));
    other = opt;
    other.policy = bcl::lookahead_policy::sliding;
    REQUIRE_THROWS_WITH(restore_with(other), Catch::Contains("policy"));
    other.buffer_windows = 3; // sliding-only settings: not compared for a tumbling state
    other.max_age = 2;
    other.policy = opt.policy;
    REQUIRE_NOTHROW(restore_with(other));
    other = opt;
    other.seed = 2;
    REQUIRE_THROWS_WITH(restore_with(other), Catch::Contains("seed"));
}

TEST_CASE("A state with the wrong number of pending records is an error", "[resume][errors]") {
    resumed_balancer b{cost_of{}, {.batch_size = 4, .lookahead = 2}};
    for (std::uint64_t i = 0; i < 5; ++i) b.push(rec{i, 1.0});
    resumed_balancer::state st = b.save();
    REQUIRE(st.pending.size() == 5);
    const std::string bytes = st.to_bytes();
    st.pending.pop_back();
    REQUIRE_THROWS_AS(resumed_balancer::state::from_bytes(bytes, st.pending), bcl::error);
    REQUIRE_THROWS_WITH(
        (resumed_balancer{cost_of{}, {.batch_size = 4, .lookahead = 2}, std::move(st)}),
        Catch::Contains("pending"));
}

TEST_CASE("Truncated or corrupted state bytes are a bcl::error, never undefined behaviour",
          "[resume][errors][fuzz]") {
    std::mt19937_64 gen(99);
    for (const bool sliding : {false, true}) {
        const bcl::options opt = with_policy({.batch_size = 3, .lookahead = 2}, sliding);
        resumed_balancer b{cost_of{}, opt};
        const cost_list costs = pareto_costs(17, 5);
        for (std::size_t i = 0; i < costs.size(); ++i) {
            b.push(rec{i, costs[i]});
            if (i == 12) break;
            while (b.pop()) {
            }
        }
        const resumed_balancer::state st = b.save();
        const std::string good = st.to_bytes();
        REQUIRE_NOTHROW(resumed_balancer::state::from_bytes(good, st.pending));
        for (std::size_t cut = 0; cut < good.size(); ++cut)
            REQUIRE_THROWS_AS(resumed_balancer::state::from_bytes(good.substr(0, cut), st.pending),
                              bcl::error);
        for (int trial = 0; trial < 3000; ++trial) {
            std::string bad = good;
            const int flips = 1 + static_cast<int>(gen() % 4);
            for (int f = 0; f < flips; ++f)
                bad[gen() % bad.size()] = static_cast<char>(gen() & 0xff);
            if (bad == good) continue;
            REQUIRE_THROWS_AS(resumed_balancer::state::from_bytes(bad, st.pending), bcl::error);
        }
        // Random garbage, including garbage with a valid checksum, must never crash either.
        for (int trial = 0; trial < 2000; ++trial) {
            std::string bytes(static_cast<std::size_t>(gen() % 400), '\0');
            for (char& c : bytes) c = static_cast<char>(gen() & 0xff);
            if (trial % 2 == 1 && bytes.size() >= 16) {
                // Keep the real header so the parser goes deeper, then re-seal with a good
                // checksum.
                bytes.replace(0, 16, good.substr(0, 16));
                bytes.resize(bytes.size() - 8);
                const std::uint64_t sum = bcl::detail::fnv1a(bytes);
                for (int k = 0; k < 8; ++k)
                    bytes.push_back(static_cast<char>((sum >> (8 * k)) & 0xff));
            }
            try {
                (void)resumed_balancer::state::from_bytes(bytes, st.pending);
            } catch (const bcl::error&) {
            }
        }
    }
}

TEST_CASE("Resume is exact with a quantile cap, truncation, a memory budget and largest_first",
          "[resume][cap][budget]") {
    const auto estimator =
        bcl::with_truncation(bcl::with_memory(cost_of{}, [](const rec& r) { return r.cost; }),
                             [](rec& r, double cap) { r.cost = std::min(r.cost, cap); });
    using capped_balancer = bcl::balancer<rec, std::remove_const_t<decltype(estimator)>>;
    const auto drive = [&](const cost_list& costs, const bcl::options& opt,
                           std::size_t save_after) {
        batch_ids out;
        auto b = std::make_unique<capped_balancer>(estimator, opt);
        for (std::size_t i = 0; i < costs.size(); ++i) {
            if (i == save_after) {
                const std::string bytes = b->save().to_bytes();
                auto pending = b->save().pending;
                b = std::make_unique<capped_balancer>(
                    estimator, opt, capped_balancer::state::from_bytes(bytes, std::move(pending)));
            }
            b->push(rec{i, costs[i]});
            while (auto batch = b->pop()) out.push_back(ids_of(*batch));
        }
        b->finish();
        while (auto batch = b->pop()) out.push_back(ids_of(*batch));
        return out;
    };
    std::mt19937_64 gen(3);
    for (const bool sliding : {false, true})
        for (std::uint64_t seed = 0; seed < 6; ++seed) {
            const cost_list costs = pareto_costs(3000, case_seed(seed));
            bcl::options opt{.batch_size = 8, .lookahead = 4, .seed = seed, .largest_first = true};
            if (sliding) opt.policy = bcl::lookahead_policy::sliding;
            opt.cap = {.kind = bcl::cap_kind::quantile,
                       .quantile = 0.98,
                       .action = bcl::cap_action::truncate};
            opt.memory_budget = 1e9;
            const batch_ids expected = drive(costs, opt, costs.size() + 1);
            for (int trial = 0; trial < 4; ++trial) {
                const std::size_t save_after = static_cast<std::size_t>(gen() % costs.size());
                INFO("seed " << seed << (sliding ? " sliding" : " tumbling") << " saved after "
                             << save_after);
                REQUIRE(drive(costs, opt, save_after) == expected);
            }
        }
}

namespace {

/// A snapshot a sliding balancer with drop_last really produced mid-stream: batches handed out,
/// batches waiting, records buffered.
bcl::detail::balancer_snapshot real_snapshot(const bcl::options& opt, std::size_t pushed) {
    resumed_balancer b{cost_of{}, opt};
    const cost_list costs = lognormal_costs(pushed, 21);
    for (std::size_t i = 0; i < pushed; ++i) {
        while (!b.can_push()) (void)b.pop();
        b.push(rec{i, costs[i]});
    }
    (void)b.pop();
    return b.save().snapshot;
}

/// The bytes of `s`, with a valid checksum: only the consistency checks can catch what is wrong.
std::string sealed_snapshot(const bcl::detail::balancer_snapshot& s) {
    return bcl::detail::to_bytes(s);
}

} // namespace

TEST_CASE("A checksum-valid state that no balancer could have produced is a bcl::error, never a "
          "crash, a huge allocation or a hang",
          "[resume][errors]") {
    bcl::options opt{.batch_size = 4, .lookahead = 3, .drop_last = true};
    opt.policy = bcl::lookahead_policy::sliding;
    const bcl::detail::balancer_snapshot good = real_snapshot(opt, 103);
    REQUIRE(good.stats.windows > 0);
    REQUIRE(!good.buffer_costs.empty());
    REQUIRE(good.waiting_batch_costs.size() > 0);
    REQUIRE_NOTHROW(bcl::detail::snapshot_from_bytes(sealed_snapshot(good)));

    struct corruption {
        const char* what;
        void (*apply)(bcl::detail::balancer_snapshot&);
    };
    const corruption corruptions[] = {
        {"batches handed out far beyond the records handed out",
         [](bcl::detail::balancer_snapshot& s) { s.stats.batches = std::uint64_t{1} << 40; }},
        {"a round counter near 2^63",
         [](bcl::detail::balancer_snapshot& s) { s.stats.windows = std::uint64_t{1} << 63; }},
        {"one round more than the records formed into batches",
         [](bcl::detail::balancer_snapshot& s) { ++s.stats.windows; }},
        {"records dropped before the input ended",
         [](bcl::detail::balancer_snapshot& s) {
             s.stats.records_dropped = 2;
             s.stats.records_in += 2;
         }},
        {"a huge arrival position, records_in raised to match",
         [](bcl::detail::balancer_snapshot& s) {
             s.buffer_arrivals.back() = std::uint64_t{1} << 61;
             s.stats.records_in = (std::uint64_t{1} << 61) + 1;
         }},
        {"more records than any balancer can push",
         [](bcl::detail::balancer_snapshot& s) {
             s.stats.records_in = ~std::uint64_t{0};
             s.stats.records_out = s.stats.records_in - s.pending_records();
         }},
        {"a buffered record past its deadline",
         [](bcl::detail::balancer_snapshot& s) {
             // Pretend many more rounds ran: the oldest buffered record would have been forced out.
             const std::uint64_t more = 5;
             s.stats.windows += more;
             s.stats.records_out += more * 12;
             s.stats.records_in += more * 12;
             s.stats.batches += more * 3;
         }},
        {"a delay histogram that does not count the records",
         [](bcl::detail::balancer_snapshot& s) { s.stats.delay_histogram.front() += 1; }},
        {"a delay above the bound",
         [](bcl::detail::balancer_snapshot& s) { s.stats.max_delay_batches = 1000; }},
        {"records handed out that were never formed into batches",
         [](bcl::detail::balancer_snapshot& s) {
             s.stats.records_out += 1;
             s.stats.records_in += 1;
         }},
        {"a cost above bcl::max_estimate",
         [](bcl::detail::balancer_snapshot& s) { s.buffer_costs.front() = 1e300; }},
        {"an infinite total arrival cost",
         [](bcl::detail::balancer_snapshot& s) { s.arrival_cost_total = HUGE_VAL; }},
        {"a NaN in the statistics",
         [](bcl::detail::balancer_snapshot& s) {
             s.stats.batch_cost =
                 bcl::detail::stats_access::make({s.stats.batch_cost.count(), NAN, 0, 0, 0});
         }},
    };
    for (const corruption& c : corruptions) {
        INFO(c.what);
        bcl::detail::balancer_snapshot bad = good;
        c.apply(bad);
        const std::string bytes = sealed_snapshot(bad);
        REQUIRE_THROWS_AS(bcl::detail::snapshot_from_bytes(bytes), bcl::error);
    }

    // The same corruptions of an unfinished state under drop_last: finish() would have dropped
    // from a buffer that does not hold what the counters say.
    bcl::detail::balancer_snapshot dropped = good;
    dropped.finished = false;
    dropped.stats.records_dropped = 1;
    dropped.stats.records_in += 1;
    REQUIRE_THROWS_WITH(bcl::detail::snapshot_from_bytes(sealed_snapshot(dropped)),
                        Catch::Contains("dropped"));
}

TEST_CASE("A state's size follows what the balancer holds, not its options: a one-record state "
          "of a balancer with a huge delay bound is small",
          "[resume]") {
    bcl::options opt{.batch_size = 1, .lookahead = 16};
    opt.policy = bcl::lookahead_policy::sliding;
    opt.max_age = bcl::max_delay_limit / 16 - 1; // the largest delay bound accepted
    REQUIRE(bcl::max_delay_bound(opt) == bcl::max_delay_limit - 1);
    resumed_balancer b{cost_of{}, opt};
    b.push(rec{0, 1.0});
    CHECK(b.save().to_bytes().size() < 1024);
    opt.max_age += 1;
    CHECK_THROWS_WITH((resumed_balancer{cost_of{}, opt}), Catch::Contains("max_age is too large"));
}
