// bcl/validate.hpp, as a specification. validate(options) accepts every setting in its documented
// range and throws bcl::error naming the first invalid option otherwise: B and K at least 1, a
// window B*K of at most max_window_records (checked without overflow), enumerators that name
// something, a mean cost in [0, max_estimate], a finite memory budget >= 0, the calibration's
// ranges, and the fields of the cap kind and the policy chosen (only those: a field that does not
// matter is not read). Every balancer constructor validates. For valid options,
// buffer_capacity(opt) is how many records a balancer takes before its first batch is ready, and
// max_delay_bound(opt) bounds how many batches any record waits beyond its unbalanced batch
// (reached, under tumbling, by costs that rise through a window).

#include "support/contract_checks.hpp"
#include "support/distributions.hpp"

#include <bcl/balance.hpp>
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
#include <string>
#include <vector>

namespace {

using bcl::validate;
using bcl_test::rec;
using Catch::Matchers::Contains;

constexpr double infinity = std::numeric_limits<double>::infinity();
const double not_a_number = std::nan("");

bcl::options tumbling_to_validate(std::size_t b, std::size_t k) {
    return {.batch_size = b, .lookahead = k, .policy = bcl::lookahead_policy::tumbling};
}

bcl::options sliding_to_validate(std::size_t b, std::size_t k, std::size_t windows,
                                 std::size_t age) {
    return {.batch_size = b,
            .lookahead = k,
            .policy = bcl::lookahead_policy::sliding,
            .buffer_windows = windows,
            .max_age = age};
}

/// The largest delay of any record: its batch index minus its unbalanced batch (arrival / B),
/// records that left early counting as 0.
std::size_t largest_delay(const bcl_test::batch_ids& batches, std::size_t b) {
    std::size_t largest = 0;
    for (std::size_t j = 0; j < batches.size(); ++j)
        for (const std::uint64_t id : batches[j]) {
            const auto unbalanced = static_cast<std::size_t>(id / b);
            if (j > unbalanced) largest = std::max(largest, j - unbalanced);
        }
    return largest;
}

} // namespace

TEST_CASE("validate: settings within their documented ranges pass", "[validate]") {
    CHECK_NOTHROW(validate({.batch_size = 1})); // every default, with a batch size
    CHECK_NOTHROW(validate(tumbling_to_validate(1, 1)));
    CHECK_NOTHROW(
        validate(sliding_to_validate(3, 2, 1, 0))); // max_age = buffer_windows - 1: the minimum
    bcl::options edges = tumbling_to_validate(4, 2);
    edges.mean_cost = bcl::max_estimate;
    edges.memory_budget = std::numeric_limits<double>::max();
    edges.calibration = {.forgetting = 1.0,
                         .prior_weight = 1e12,
                         .horizon = std::size_t{1} << 20,
                         .outlier_threshold = std::numeric_limits<double>::min()};
    CHECK_NOTHROW(validate(edges));
    edges.calibration = {.forgetting = std::numeric_limits<double>::min(),
                         .prior_weight = 0.0,
                         .horizon = 1,
                         .outlier_threshold = std::numeric_limits<double>::max()};
    edges.mean_cost = 0.0;
    edges.memory_budget = 0.0;
    CHECK_NOTHROW(validate(edges));
    for (const auto kind : {bcl::cap_kind::none, bcl::cap_kind::fixed, bcl::cap_kind::quantile}) {
        bcl::options capped = tumbling_to_validate(2, 2);
        capped.cap = {.kind = kind, .value = 1.0, .quantile = 0.5, .prior = 3.0};
        CHECK_NOTHROW(validate(capped));
    }
}

TEST_CASE("validate: a batch size or lookahead of 0 is an error naming it", "[validate]") {
    CHECK_THROWS_AS(validate(tumbling_to_validate(0, 1)), bcl::error);
    CHECK_THROWS_WITH(validate(tumbling_to_validate(0, 1)),
                      "bcl::options::batch_size must be at least 1 (got 0)");
    CHECK_THROWS_WITH(validate(tumbling_to_validate(1, 0)),
                      "bcl::options::lookahead must be at least 1 (got 0)");
    CHECK_THROWS_WITH(validate(tumbling_to_validate(0, 0)), Contains("batch_size")); // the first
}

TEST_CASE("validate: a window above max_window_records is an error, however large the factors",
          "[validate]") {
    const std::size_t limit = bcl::max_window_records; // 2^26
    CHECK_NOTHROW(validate(tumbling_to_validate(std::size_t{1} << 13, std::size_t{1} << 13)));
    CHECK_NOTHROW(validate(tumbling_to_validate(limit, 1)));
    CHECK_NOTHROW(validate(tumbling_to_validate(1, limit)));
    CHECK_THROWS_WITH(validate(tumbling_to_validate(limit + 1, 1)),
                      Contains("batch_size * lookahead = 67108865 * 1 exceeds the largest window "
                               "of 67108864 records"));
    CHECK_THROWS_WITH(
        validate(tumbling_to_validate(std::size_t{1} << 13, (std::size_t{1} << 13) + 1)),
        Contains("exceeds the largest window"));
    // Products that wrap around in 64 bits: 2^32 * 2^32 is 0 and 2^63 * 2 is 0 modulo 2^64.
    CHECK_THROWS_WITH(validate(tumbling_to_validate(std::size_t{1} << 32, std::size_t{1} << 32)),
                      Contains("exceeds the largest window"));
    CHECK_THROWS_WITH(validate(tumbling_to_validate(std::size_t{1} << 63, 2)),
                      Contains("exceeds the largest window"));
    const std::size_t most = std::numeric_limits<std::size_t>::max();
    CHECK_THROWS_WITH(validate(tumbling_to_validate(most, most)),
                      Contains("exceeds the largest window"));
}

TEST_CASE("validate: an enumerator that names nothing is an error naming the option and value",
          "[validate]") {
    bcl::options o = tumbling_to_validate(2, 2);
    o.policy = static_cast<bcl::lookahead_policy>(7);
    CHECK_THROWS_WITH(validate(o), "bcl::options::policy has no such lookahead policy (7)");
    o = tumbling_to_validate(2, 2);
    o.emission = static_cast<bcl::emission_order>(5);
    CHECK_THROWS_WITH(validate(o), "bcl::options::emission has no such order (5)");
    o = tumbling_to_validate(2, 2);
    o.batching = static_cast<bcl::batch_cost>(9);
    CHECK_THROWS_WITH(validate(o), "bcl::options::batching has no such batch cost (9)");
    o = tumbling_to_validate(2, 2);
    o.cap.kind = static_cast<bcl::cap_kind>(3);
    CHECK_THROWS_WITH(validate(o), "bcl::options::cap.kind has no such kind (3)");
    o = tumbling_to_validate(2, 2);
    o.cap = {.kind = bcl::cap_kind::fixed, .value = 1.0};
    o.cap.action = static_cast<bcl::cap_action>(2);
    CHECK_THROWS_WITH(validate(o), "bcl::options::cap.action has no such action (2)");
}

TEST_CASE("validate: mean_cost, memory_budget and the calibration outside their ranges are "
          "errors naming them",
          "[validate]") {
    const auto with = [](auto change) {
        bcl::options o = tumbling_to_validate(2, 2);
        change(o);
        return o;
    };
    for (const double bad :
         {-1e-300, not_a_number, std::nextafter(bcl::max_estimate, infinity), infinity})
        CHECK_THROWS_WITH(validate(with([&](bcl::options& o) { o.mean_cost = bad; })),
                          Contains("bcl::options::mean_cost must be >= 0 and at most"));
    for (const double bad : {-1.0, not_a_number, infinity})
        CHECK_THROWS_WITH(validate(with([&](bcl::options& o) { o.memory_budget = bad; })),
                          Contains("bcl::options::memory_budget must be finite and >= 0"));
    for (const double bad : {0.0, -0.5, std::nextafter(1.0, 2.0), not_a_number})
        CHECK_THROWS_WITH(validate(with([&](bcl::options& o) { o.calibration.forgetting = bad; })),
                          Contains("bcl::options::calibration.forgetting must be in (0, 1]"));
    for (const double bad : {-1.0, std::nextafter(1e12, infinity), not_a_number})
        CHECK_THROWS_WITH(
            validate(with([&](bcl::options& o) { o.calibration.prior_weight = bad; })),
            Contains("bcl::options::calibration.prior_weight"));
    for (const std::size_t bad : {std::size_t{0}, (std::size_t{1} << 20) + 1})
        CHECK_THROWS_WITH(validate(with([&](bcl::options& o) { o.calibration.horizon = bad; })),
                          Contains("bcl::options::calibration.horizon must be from 1 to 1048576 "
                                   "(got " +
                                   std::to_string(bad) + ")"));
    for (const double bad : {0.0, -1.0, infinity, not_a_number})
        CHECK_THROWS_WITH(
            validate(with([&](bcl::options& o) { o.calibration.outlier_threshold = bad; })),
            Contains("bcl::options::calibration.outlier_threshold"));
}

TEST_CASE("validate: a cap's fields are checked under the kind that reads them, and only there",
          "[validate]") {
    bcl::options o = tumbling_to_validate(2, 2);
    for (const double bad : {0.0, -1.0, infinity, not_a_number}) {
        o.cap = {.kind = bcl::cap_kind::fixed, .value = bad};
        CHECK_THROWS_WITH(validate(o), Contains("bcl::options::cap.value must be finite and > 0"));
        o.cap.kind = bcl::cap_kind::none; // the value is not read
        CHECK_NOTHROW(validate(o));
        o.cap.kind = bcl::cap_kind::quantile;
        CHECK_NOTHROW(validate(o));
    }
    for (const double bad : {0.0, 1.0, -0.5, 2.0, not_a_number}) {
        o.cap = {.kind = bcl::cap_kind::quantile, .quantile = bad};
        CHECK_THROWS_WITH(validate(o), Contains("bcl::options::cap.quantile must be in (0, 1)"));
        o.cap.kind = bcl::cap_kind::none;
        CHECK_NOTHROW(validate(o));
        o.cap = {.kind = bcl::cap_kind::fixed, .value = 1.0, .quantile = bad};
        CHECK_NOTHROW(validate(o));
    }
    for (const double bad : {-1.0, infinity, not_a_number}) {
        o.cap = {.kind = bcl::cap_kind::quantile, .prior = bad};
        CHECK_THROWS_WITH(validate(o), Contains("bcl::options::cap.prior must be finite and >= 0"));
        o.cap.kind = bcl::cap_kind::none;
        CHECK_NOTHROW(validate(o));
    }
}

TEST_CASE("validate: sliding settings are checked under the sliding policy, and only there",
          "[validate]") {
    CHECK_THROWS_WITH(validate(sliding_to_validate(2, 2, 0, 2)),
                      "bcl::options::buffer_windows must be at least 1 (got 0)");
    CHECK_THROWS_WITH(validate(sliding_to_validate(2, 2, 3, 1)),
                      Contains("bcl::options::max_age must be at least buffer_windows - 1 = 2 "
                               "(got 1)"));
    // (max_age + 1) * K must stay at most max_delay_limit = 2^20 batches: with K = 2^10,
    // max_age = 2^10 - 1 is the largest allowed.
    const std::size_t k = 1024;
    CHECK_NOTHROW(validate(sliding_to_validate(1, k, 1, bcl::max_delay_limit / k - 1)));
    CHECK_THROWS_WITH(validate(sliding_to_validate(1, k, 1, bcl::max_delay_limit / k)),
                      Contains("bcl::options::max_age is too large (1024)"));
    // A buffer of buffer_windows * B * K records must fit the largest window, without overflow.
    CHECK_THROWS_WITH(validate(sliding_to_validate(1 << 13, 1 << 13, 2, 2)),
                      Contains("exceeds the largest buffer"));
    CHECK_THROWS_WITH(
        validate(sliding_to_validate(1, 1, std::numeric_limits<std::size_t>::max(), 2)),
        Contains("exceeds the largest buffer"));
    // The same settings under tumbling are not read.
    for (bcl::options o : {sliding_to_validate(2, 2, 0, 2), sliding_to_validate(2, 2, 3, 1),
                           sliding_to_validate(1 << 13, 1 << 13, 2, 2),
                           sliding_to_validate(1, 1, 1, std::numeric_limits<std::size_t>::max())}) {
        o.policy = bcl::lookahead_policy::tumbling;
        CHECK_NOTHROW(validate(o));
    }
}

// max_age + 1 would wrap at the largest max_age: that is too large, never too small.
TEST_CASE("validate: the largest max_age is refused as too large, not as too small", "[validate]") {
    for (const std::size_t windows : {1U, 2U, 3U})
        CHECK_THROWS_WITH(
            validate(sliding_to_validate(1, 1, windows, std::numeric_limits<std::size_t>::max())),
            Contains("max_age is too large"));
}

TEST_CASE("validate: of several invalid options, the first checked is named", "[validate]") {
    bcl::options o = tumbling_to_validate(2, 2);
    o.emission = static_cast<bcl::emission_order>(5);
    o.memory_budget = -1.0;
    o.calibration.horizon = 0;
    CHECK_THROWS_WITH(validate(o), Contains("emission") && !Contains("memory_budget"));
    o.emission = bcl::emission_order::shuffled;
    CHECK_THROWS_WITH(validate(o), Contains("memory_budget") && !Contains("horizon"));
    o.memory_budget = 0.0;
    CHECK_THROWS_WITH(validate(o), Contains("calibration.horizon"));
}

TEST_CASE("validate: every balancer constructor refuses what validate refuses, with its message",
          "[validate]") {
    using balancer_t = bcl::balancer<rec, bcl_test::cost_of>;
    const std::vector<bcl::options> bad{tumbling_to_validate(0, 1), tumbling_to_validate(1, 0),
                                        sliding_to_validate(2, 2, 3, 1), [] {
                                            bcl::options o = tumbling_to_validate(2, 2);
                                            o.mean_cost = -1.0;
                                            return o;
                                        }()};
    for (const bcl::options& o : bad) {
        std::string expected;
        try {
            validate(o);
        } catch (const bcl::error& e) {
            expected = e.what();
        }
        REQUIRE_FALSE(expected.empty());
        CHECK_THROWS_WITH((balancer_t{bcl_test::cost_of{}, o}), expected);
        CHECK_THROWS_WITH(bcl::balance(std::vector<rec>{}, bcl_test::cost_of{}, o), expected);
    }
}

TEST_CASE("validate: buffer_capacity is the number of records taken before the first batch is "
          "ready",
          "[validate]") {
    const std::vector<bcl::options> all{
        tumbling_to_validate(1, 1),      tumbling_to_validate(3, 4),
        tumbling_to_validate(5, 1),      sliding_to_validate(2, 3, 1, 0),
        sliding_to_validate(2, 3, 2, 2), sliding_to_validate(4, 1, 3, 5),
        bcl::options{.batch_size = 7}};
    for (const bcl::options& opt : all) {
        const std::size_t capacity = bcl::buffer_capacity(opt);
        bcl::balancer<rec, bcl_test::cost_of> b{bcl_test::cost_of{}, opt};
        std::size_t pushed = 0;
        while (!b.pop()) {
            REQUIRE(pushed < 10'000);
            b.push(rec{pushed, 1.0 + static_cast<double>(pushed % 7)});
            ++pushed;
        }
        // Tumbling holds a window, K*B; sliding holds buffer_windows windows.
        const std::size_t windows =
            opt.policy == bcl::lookahead_policy::sliding ? opt.buffer_windows : 1;
        CHECK(pushed == windows * opt.lookahead * opt.batch_size);
        CHECK(capacity == pushed);
    }
}

TEST_CASE("validate: max_delay_bound bounds every record's delay, and tumbling reaches it",
          "[validate]") {
    // Tumbling, B = 1, K = 4, costs 1, 2, 3, 4: costliest first sends record 0 (the cheapest)
    // out last, in batch 3 of its window: a delay of 3 = K - 1 batches, the bound.
    const bcl::options four = tumbling_to_validate(1, 4);
    CHECK(bcl::max_delay_bound(four) == 3);
    const auto rising = bcl_test::run(bcl_test::driver::eager, {1.0, 2.0, 3.0, 4.0}, four);
    CHECK(largest_delay(rising.batches, 1) == 3);

    // Every record of every adversarial distribution, under both policies, stays within it.
    const std::vector<bcl::options> all{tumbling_to_validate(3, 4), sliding_to_validate(2, 3, 1, 0),
                                        sliding_to_validate(2, 3, 2, 2),
                                        sliding_to_validate(3, 2, 3, 4),
                                        sliding_to_validate(1, 5, 2, 1)};
    std::uint64_t counter = 0;
    for (const bcl::options& opt : all)
        for (const bcl_test::distribution& dist : bcl_test::all_distributions()) {
            const std::size_t n = 10 * bcl::buffer_capacity(opt) + 1;
            const auto out =
                bcl_test::run(bcl_test::driver::eager, dist.generate(n, ++counter), opt);
            INFO(dist.name << ", B " << opt.batch_size << ", K " << opt.lookahead);
            REQUIRE(bcl_test::check_exactly_once(out.batches, n, opt.batch_size, false).empty());
            CHECK(largest_delay(out.batches, opt.batch_size) <= bcl::max_delay_bound(opt));
        }
}
