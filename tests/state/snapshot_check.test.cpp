// bcl::detail::check_consistent and its companions, as a specification: a snapshot passes exactly
// when it describes a balancer that could exist. Every snapshot a real balancer saves passes;
// each relation the balancer keeps between its counters, rounds, batches, arrival positions,
// statistics and estimates is checked on its own, so a snapshot that breaks exactly one of them is
// refused with a bcl::error that names that one. require_same_options names the first option
// that differs, require_same_estimates the estimate the balancer lacks or adds, and
// check_calibration_counts each calibration count that does not fit its balancer's.

#include "support/contract_checks.hpp"
#include "support/distributions.hpp"

#include <bcl/balancer.hpp>
#include <bcl/cost_estimator.hpp>
#include <bcl/detail/state/snapshot_check.hpp>
#include <bcl/detail/stats_access.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

using namespace bcl_test;
using bcl::detail::balancer_snapshot;
using bcl::detail::stats_access;
using Catch::Matchers::Contains;

namespace {

const auto estimator_with_memory = bcl::with_memory(cost_of{}, &rec::cost);
using balancer_with_memory =
    bcl::balancer<rec, std::remove_const_t<decltype(estimator_with_memory)>>;

/// A tumbling balancer of B = 2, K = 2 with memory estimates, fed records of costs 1..n, popped
/// `pops` times, then saved.
balancer_snapshot saved_after(const bcl::options& opt, std::size_t n, std::size_t pops,
                              bool finish = false) {
    balancer_with_memory b{estimator_with_memory, opt};
    for (std::size_t i = 0; i < n; ++i) {
        while (!b.can_push()) (void)b.pop();
        b.push(rec{i, static_cast<double>(i + 1)});
    }
    if (finish) b.finish();
    for (std::size_t k = 0; k < pops; ++k) (void)b.pop();
    return b.save().snapshot;
}

/// B = 2, K = 2, tumbling (the default policy is sliding).
bcl::options small() {
    bcl::options opt{.batch_size = 2, .lookahead = 2};
    opt.policy = bcl::lookahead_policy::tumbling;
    return opt;
}

/// Six records pushed into B = 2, K = 2, one batch popped. By hand: the first window of 4 records
/// made one round of two batches; one batch (2 records) is out, one (2 records, arrivals among
/// 0..3) waits, and records 4 and 5 are buffered for the next round.
balancer_snapshot base() {
    bcl::options opt = small();
    opt.memory_budget = 100.0;
    balancer_snapshot s = saved_after(opt, 6, 1);
    REQUIRE(s.stats.records_in == 6);
    REQUIRE(s.stats.records_out == 2);
    REQUIRE(s.stats.batches == 1);
    REQUIRE(s.stats.windows == 1);
    REQUIRE(s.waiting_batch_costs.size() == 1);
    REQUIRE(s.waiting_arrivals.size() == 2);
    REQUIRE(s.buffer_arrivals == std::vector<std::uint64_t>{4, 5});
    REQUIRE(s.buffer_memory == std::vector<double>{5.0, 6.0});
    return s;
}

std::string refusal(const balancer_snapshot& s) {
    try {
        bcl::detail::check_consistent(s);
    } catch (const bcl::error& e) {
        return e.what();
    }
    return "<accepted>";
}

/// Running statistics of `count` values, all with the same mean and spread.
bcl::running_stats stats_of(std::uint64_t count, double mean = 1.0) {
    return stats_access::make({count, mean, 0.0, mean, mean});
}

struct breach {
    const char* what;
    std::function<void(balancer_snapshot&)> apply;
    std::string message; // what the refusal must name
};

} // namespace

TEST_CASE("snapshot_check: every snapshot a balancer saves is consistent, at any point, under "
          "both policies, with drop_last, a cap, memory estimates and in the drain",
          "[state][snapshot-check]") {
    const cost_list costs = lognormal_costs(120, 5);
    std::size_t checked = 0;
    for (const bool sliding : {false, true})
        for (const bool drop_last : {false, true})
            for (const bool capped : {false, true}) {
                bcl::options opt{.batch_size = 3, .lookahead = 4, .drop_last = drop_last};
                opt.policy =
                    sliding ? bcl::lookahead_policy::sliding : bcl::lookahead_policy::tumbling;
                if (capped) opt.cap = {.kind = bcl::cap_kind::quantile, .warmup = 10};
                opt.memory_budget = 1e9;
                balancer_with_memory b{estimator_with_memory, opt};
                const auto check = [&] {
                    INFO((sliding ? "sliding" : "tumbling")
                         << " drop_last " << drop_last << " capped " << capped << " after "
                         << b.stats().records_in << " pushes");
                    REQUIRE(refusal(b.save().snapshot) == "<accepted>");
                    ++checked;
                };
                check(); // the empty balancer
                for (std::size_t i = 0; i < 103; ++i) {
                    while (!b.can_push()) {
                        (void)b.pop();
                        check();
                    }
                    b.push(rec{i, costs[i]});
                    check();
                }
                b.finish();
                check();
                while (b.pop()) check();
            }
    CHECK(checked > 1000);
}

TEST_CASE("snapshot_check: each relation the balancer keeps is checked alone, and a snapshot "
          "breaking exactly that one is refused naming it",
          "[state][snapshot-check][errors]") {
    REQUIRE(refusal(base()) == "<accepted>");
    const std::uint64_t too_many = (std::uint64_t{1} << 62) + 1;
    const std::vector<breach> breaches{
        {"invalid options", [](balancer_snapshot& s) { s.opt.batch_size = 0; }, "batch_size"},
        {"more records than a balancer can push",
         [&](balancer_snapshot& s) { s.stats.records_in = too_many; },
         "4611686018427387905 records pushed is more than any balancer can reach"},
        {"earlier epochs past the limit",
         [&](balancer_snapshot& s) { s.learned.rounds = too_many; },
         "earlier epochs that counted more than any balancer can reach"},
        {"more waiting batches than the lookahead",
         [](balancer_snapshot& s) {
             s.waiting_batch_costs.assign(3, 1.0);
             s.waiting_batch_memory.assign(3, 1.0);
         },
         "3 waiting batches, more than lookahead = 2"},
        {"more waiting records than their batches hold",
         [](balancer_snapshot& s) { s.waiting_arrivals.push_back(4); },
         "3 waiting records for 1 batches of 2"},
        {"more buffered records than the buffer holds (K * B = 4 under tumbling)",
         [](balancer_snapshot& s) {
             s.buffer_costs.assign(5, 1.0);
             s.buffer_memory.assign(5, 1.0);
             s.buffer_arrivals = {4, 5, 6, 7, 8};
         },
         "5 buffered records, more than the buffer's 4"},
        {"a record not accounted for", [](balancer_snapshot& s) { s.stats.records_in = 7; },
         "it does not account for every record: 7 in, 2 out, 0 dropped, 4 pending"},
        {"a round more than the records formed", [](balancer_snapshot& s) { s.stats.windows = 2; },
         "4 records formed into batches in 2 rounds of 4 before the input ended"},
        {"after finish(), a round more than ceil(formed / window)",
         [](balancer_snapshot& s) {
             s.finished = true;
             s.stats.windows = 2;
         },
         "4 records formed into batches in 2 rounds of at most 4"},
        {"after finish(), a short round that left records buffered",
         [](balancer_snapshot& s) {
             // Record 4 joins a second waiting batch: 5 formed in 2 rounds, yet 5 is buffered.
             s.finished = true;
             s.stats.windows = 2;
             s.waiting_batch_costs.push_back(5.0);
             s.waiting_batch_memory.push_back(5.0);
             s.waiting_arrivals.push_back(4);
             s.buffer_costs = {6.0};
             s.buffer_memory = {6.0};
             s.buffer_arrivals = {5};
         },
         "a round short of 4 records left records in the buffer"},
        {"a record dropped before finish()",
         [](balancer_snapshot& s) {
             s.stats.records_dropped = 1;
             s.stats.records_in = 7;
         },
         "1 records dropped; drop_last drops the last records_in mod B at finish()"},
        {"a batch count that is not ceil(out / B)",
         [](balancer_snapshot& s) { s.stats.batches = 2; }, "2 batches handed out for 2 records"},
        {"a short batch handed out while records wait",
         [](balancer_snapshot& s) {
             s.stats.records_out = 3; // the waiting batch's first record went out with the first
             s.stats.batches = 2;
             s.waiting_arrivals.pop_back();
             s.stats.batch_cost = stats_of(1);
         },
         "the short batch was handed out before the last"},
        {"a buffered record not at its tumbling place (round * window + slot)",
         [](balancer_snapshot& s) {
             s.buffer_arrivals = {3, 5};
         },
         "an invalid arrival position for buffered record 0"},
        {"a waiting record that arrived after the last push",
         [](balancer_snapshot& s) { s.waiting_arrivals[0] = 6; },
         "a record held that arrived after the last record pushed"},
        {"two held records with one arrival position",
         [](balancer_snapshot& s) { s.waiting_arrivals[0] = 5; },
         "two records held with the same arrival position"},
        {"a memory estimate missing", [](balancer_snapshot& s) { s.buffer_memory.pop_back(); },
         "memory estimates for the wrong number of records"},
        {"a negative memory estimate", [](balancer_snapshot& s) { s.buffer_memory[1] = -1.0; },
         "an invalid memory estimate"},
        {"a memory estimate above the budget",
         [](balancer_snapshot& s) { s.buffer_memory[1] = 100.5; }, "an invalid memory estimate"},
        {"a NaN last batch cost", [](balancer_snapshot& s) { s.last_batch_cost = NAN; },
         "an invalid last batch cost"},
        {"more records capped than pushed",
         [](balancer_snapshot& s) { s.stats.records_capped = 7; },
         "more records capped than pushed"},
        {"batch-cost statistics of the wrong count",
         [](balancer_snapshot& s) { s.stats.batch_cost = stats_of(2); },
         "batch-cost statistics of 2 batches for 1 full batches handed out"},
        {"more gaps than rounds",
         [](balancer_snapshot& s) { s.stats.gap_to_lower_bound = stats_of(2); },
         "more gaps than windows"},
        {"delay statistics of the wrong count",
         [](balancer_snapshot& s) { s.stats.delay_batches = stats_of(5); },
         "delay statistics of 5 records for 4"},
        {"a delay above the bound", [](balancer_snapshot& s) { s.stats.max_delay_batches = 1000; },
         "a delay above the delay bound"},
        {"a histogram counting one delay too many",
         [](balancer_snapshot& s) { s.stats.delay_histogram.front() += 1; },
         "a delay histogram that does not match the delays"},
        {"a histogram with an empty last bucket",
         [](balancer_snapshot& s) {
             // Its delays moved to the first bucket: the count still matches, the maximum not.
             REQUIRE(s.stats.delay_histogram.size() >= 2);
             s.stats.delay_histogram.front() += s.stats.delay_histogram.back();
             s.stats.delay_histogram.back() = 0;
         },
         "a delay histogram that does not match the delays"},
        {"a negative mean in the statistics",
         [](balancer_snapshot& s) { s.stats.batch_cost = stats_of(1, -1.0); },
         "invalid running statistics"},
        {"an infinite peak memory",
         [](balancer_snapshot& s) { s.stats.peak_batch_memory = HUGE_VAL; },
         "an invalid peak batch memory"},
        {"heavy slots that saw a round more than ran",
         [](balancer_snapshot& s) { s.heavy_seen = s.learned.rounds + s.stats.windows + 1; },
         "heavy slots that saw more rounds than ran"},
        {"a sketch that counted costs without a quantile cap",
         [](balancer_snapshot& s) { s.sketch.add(1.0); },
         "a quantile sketch of 1 costs for 0 records"},
    };
    for (const breach& b : breaches) {
        INFO(b.what);
        balancer_snapshot s = base();
        b.apply(s);
        CHECK_THAT(refusal(s), Contains("bcl") && Contains(b.message));
    }
}

TEST_CASE("snapshot_check: a calibration's counts must fit its balancer's, each refused by name",
          "[state][snapshot-check][errors]") {
    bcl::detail::calibration_snapshot c;
    const auto refused = [&](std::size_t horizon, std::uint64_t batches, std::uint64_t all,
                             std::uint64_t records, std::size_t waiting) -> std::string {
        try {
            bcl::detail::check_calibration_counts(c, horizon, batches, all, records, waiting);
        } catch (const bcl::error& e) {
            return e.what();
        }
        return "<accepted>";
    };
    // No calibration (0 features): nothing to fit, whatever the counts.
    CHECK(refused(4, 100, 100, 1000, 3) == "<accepted>");
    // Two features, 3 batches waiting (6 sums), 10 of this epoch's batches, horizon 4: a ledger
    // of min(10, 4) = 4 batches; the fit counted at most 50 records and 12 batches in all.
    c.features = 2;
    c.waiting_sums.assign(6, 1.0);
    c.ledger_state.assign(4, 1);
    c.counts.feature_records = 50;
    c.counts.observed = 12;
    CHECK(refused(4, 10, 12, 50, 3) == "<accepted>");
    CHECK_THAT(refused(4, 10, 12, 50, 2), Contains("calibration fields of the wrong size"));
    CHECK_THAT(refused(4, 10, 12, 49, 3), Contains("calibration counts that do not fit"));
    CHECK_THAT(refused(4, 10, 11, 50, 3), Contains("calibration counts that do not fit"));
    CHECK_THAT(refused(5, 10, 12, 50, 3), Contains("a calibration ledger of the wrong size"));
    CHECK_THAT(refused(4, 3, 12, 50, 3), Contains("a calibration ledger of the wrong size"));
    c.ledger_state.assign(3, 1); // min(3, 4) after 3 batches
    CHECK(refused(4, 3, 12, 50, 3) == "<accepted>");
}

TEST_CASE("snapshot_check: a state must fit the balancer it is loaded into: the first option that "
          "differs and matters is named, and so is the estimate one has and the other lacks",
          "[state][snapshot-check][errors]") {
    const bcl::options saved{.batch_size = 4, .lookahead = 3, .seed = 9};
    CHECK_NOTHROW(bcl::detail::require_same_options(saved, saved));
    bcl::options given = saved;
    given.lookahead = 5;
    given.seed = 1;
    CHECK_THROWS_WITH(bcl::detail::require_same_options(saved, given),
                      Contains("saved with options::lookahead = 3, not 5"));
    given.lookahead = 3;
    CHECK_THROWS_WITH(bcl::detail::require_same_options(saved, given),
                      Contains("options::seed = 9, not 1"));

    balancer_snapshot s = base();
    CHECK_NOTHROW(bcl::detail::require_same_estimates(s, true, 0));
    CHECK_THROWS_WITH(bcl::detail::require_same_estimates(s, false, 0),
                      Contains("estimator had memory estimate, unlike this one"));
    s.tracks_memory = false;
    CHECK_THROWS_WITH(bcl::detail::require_same_estimates(s, true, 0),
                      Contains("estimator had no memory estimate"));
    CHECK_THROWS_WITH(bcl::detail::require_same_estimates(s, false, 2),
                      Contains("did not calibrate, unlike this one (2 features)"));
    s.calibration.features = 3;
    CHECK_THROWS_WITH(bcl::detail::require_same_estimates(s, false, 0),
                      Contains("calibrated 3 features, unlike this one"));
}
