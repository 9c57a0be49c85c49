// balancer::next_epoch(): one balancer over the epochs of a stream. Each epoch keeps the whole
// contract on its own; what the balancer learned (the quantile cap's sketch, the heavy slots, a
// calibration's fit, the running mean) carries over; a state saved in any epoch resumes exactly.

#include "support/contract_checks.hpp"
#include "support/distributions.hpp"

#include <bcl/balancer.hpp>
#include <bcl/calibrated_cost.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

using namespace bcl_test;

namespace {

using epoch_balancer = bcl::balancer<rec, cost_of>;

// Feeds one epoch's records (ids restart at 0 each epoch) and drains it; returns its batches.
batch_ids run_epoch(epoch_balancer& b, const cost_list& costs) {
    batch_ids out;
    for (std::size_t i = 0; i < costs.size(); ++i) {
        b.push(rec{i, costs[i]});
        while (auto batch = b.pop()) out.push_back(ids_of(*batch));
    }
    b.finish();
    while (auto batch = b.pop()) out.push_back(ids_of(*batch));
    return out;
}

cost_list epoch_costs(std::size_t n, std::uint64_t epoch) {
    return pareto_costs(n, 1000 + epoch);
}

} // namespace

TEST_CASE("next_epoch: every epoch of one balancer keeps the contract on its own, and its "
          "statistics count that epoch",
          "[next_epoch]") {
    for (const bool sliding : {true, false})
        for (const bool drop_last : {false, true}) {
            bcl::options opt{.batch_size = 8, .lookahead = 4, .drop_last = drop_last};
            opt.policy = sliding ? bcl::lookahead_policy::sliding : bcl::lookahead_policy::tumbling;
            opt.cap = {.kind = bcl::cap_kind::quantile, .quantile = 0.9, .warmup = 50};
            epoch_balancer b(cost_of{}, opt);
            for (std::uint64_t epoch = 0; epoch < 4; ++epoch) {
                const std::size_t n = 300 + 13 * epoch;
                if (epoch > 0) b.next_epoch();
                const batch_ids batches = run_epoch(b, epoch_costs(n, epoch));
                INFO("sliding " << sliding << ", drop_last " << drop_last << ", epoch " << epoch);
                CHECK(check_cardinality(batches, n, 8, drop_last).empty());
                CHECK(check_exactly_once(batches, n, 8, drop_last).empty());
                CHECK(b.stats().records_in == n);
                CHECK(b.stats().batches == batches.size());
                CHECK(b.stats().max_delay_batches <= bcl::max_delay_bound(opt));
            }
        }
}

TEST_CASE("next_epoch: the quantile cap carries over, with no second warm-up", "[next_epoch]") {
    bcl::options opt{.batch_size = 8, .lookahead = 4};
    opt.cap = {.kind = bcl::cap_kind::quantile, .quantile = 0.9, .warmup = 200};
    epoch_balancer carried(cost_of{}, opt);
    run_epoch(carried, epoch_costs(400, 0));
    carried.next_epoch();
    epoch_balancer fresh(cost_of{}, opt);
    // The next epoch's first 100 records, all within a fresh balancer's warm-up.
    const cost_list costs = epoch_costs(100, 1);
    for (std::size_t i = 0; i < costs.size(); ++i) {
        carried.push(rec{i, costs[i]});
        fresh.push(rec{i, costs[i]});
        while (carried.pop()) {
        }
        while (fresh.pop()) {
        }
    }
    CHECK(fresh.stats().records_capped == 0);   // still warming up
    CHECK(carried.stats().records_capped > 0);  // the cap of the epoch before applies at once
    CHECK(carried.stats().records_capped < 30); // about a tenth above the 90th percentile
}

TEST_CASE("next_epoch: an epoch under way is an error that changes nothing; an untouched one "
          "may start again",
          "[next_epoch]") {
    const bcl::options opt{.batch_size = 4, .lookahead = 2};
    epoch_balancer b(cost_of{}, opt);
    b.next_epoch(); // nothing pushed yet: allowed
    b.next_epoch(2.5);
    CHECK(b.settings().mean_cost == 2.5);
    const cost_list costs = lognormal_costs(50, 2);
    for (std::size_t i = 0; i < 20; ++i) b.push(rec{i, costs[i]});
    const std::string before = b.save().to_bytes();
    CHECK_THROWS_WITH(b.next_epoch(), Catch::Contains("the epoch is under way") &&
                                          Catch::Contains("finish() not called"));
    b.finish();
    CHECK_THROWS_WITH(b.next_epoch(), Catch::Contains("records still held"));
    CHECK(b.save().to_bytes() != before); // finish() changed it, next_epoch() did not:
    const std::string finished = b.save().to_bytes();
    CHECK_THROWS_AS(b.next_epoch(-1.0), bcl::error);
    CHECK(b.save().to_bytes() == finished);
    while (b.pop()) {
    }
    CHECK_THROWS_WITH(b.next_epoch(std::nan("")), Catch::Contains("mean_cost"));
    CHECK(b.save().to_bytes() == b.save().to_bytes());
    b.next_epoch();
    CHECK(b.stats().records_in == 0);
    CHECK_FALSE(b.finished());
}

TEST_CASE("next_epoch: a state saved in a later epoch, or right after next_epoch(), resumes "
          "exactly",
          "[next_epoch]") {
    bcl::options opt{.batch_size = 8, .lookahead = 3};
    opt.cap = {.kind = bcl::cap_kind::quantile, .quantile = 0.95, .warmup = 100};
    const cost_list first = epoch_costs(500, 0);
    const cost_list second = epoch_costs(333, 1);
    epoch_balancer reference(cost_of{}, opt);
    run_epoch(reference, first);
    reference.next_epoch(7.0);
    const batch_ids expected = run_epoch(reference, second);
    for (const std::size_t save_after :
         {std::size_t{0}, std::size_t{1}, std::size_t{150}, std::size_t{333}}) {
        epoch_balancer b(cost_of{}, opt);
        run_epoch(b, first);
        b.next_epoch(7.0);
        batch_ids got;
        for (std::size_t i = 0; i < save_after; ++i) {
            b.push(rec{i, second[i]});
            while (auto batch = b.pop()) got.push_back(ids_of(*batch));
        }
        const epoch_balancer::state saved = b.save();
        bcl::options restored_opt = opt;
        restored_opt.mean_cost = 7.0;
        epoch_balancer restored(cost_of{}, restored_opt,
                                epoch_balancer::state::from_bytes(saved.to_bytes(), saved.pending));
        for (std::size_t i = save_after; i < second.size(); ++i) {
            restored.push(rec{i, second[i]});
            while (auto batch = restored.pop()) got.push_back(ids_of(*batch));
        }
        restored.finish();
        while (auto batch = restored.pop()) got.push_back(ids_of(*batch));
        INFO("saved after " << save_after << " pushes");
        CHECK(got == expected);
    }
}

TEST_CASE("next_epoch: a calibration's fit carries over, and batches are counted from 0 again",
          "[next_epoch][calibration]") {
    using estimator = decltype(bcl::calibrated_affine_quadratic(0.0, 1.0, 0.0));
    bcl::balancer<double, estimator> b(bcl::calibrated_affine_quadratic(0.0, 1.0, 0.0),
                                       bcl::options{.batch_size = 4, .lookahead = 2});
    const cost_list lengths = uniform_costs(400, 8);
    std::uint64_t emitted = 0;
    auto take = [&](std::span<double> batch) {
        double t = 0.0;
        for (const double length : batch) t += 2.0 + length * length;
        b.observe(emitted++, t);
    };
    for (const double length : lengths) {
        b.push(length * 100.0);
        while (auto batch = b.pop()) take(*batch);
    }
    b.finish();
    while (auto batch = b.pop()) take(*batch);
    const auto learned = b.calibration();
    REQUIRE(learned.has_fit);
    b.next_epoch();
    CHECK(b.calibration().applied == learned.applied);
    CHECK(b.calibration().times_observed == learned.times_observed);
    CHECK_THROWS_AS(b.observe(0, 1.0), bcl::error); // no batch of this epoch handed out yet
    for (std::size_t i = 0; i < 16; ++i) b.push(lengths[i] * 100.0); // a full buffer
    REQUIRE(b.pop());
    CHECK_NOTHROW(b.observe(0, 5.0));
    const std::string bytes = b.save().to_bytes();
    CHECK_NOTHROW(decltype(b)::state::from_bytes(bytes, b.save().pending));
}
