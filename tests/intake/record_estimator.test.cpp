// bcl::detail::record_estimator: one record's estimate, as balancing sees it. Every value the
// user's estimator returns is checked (NaN, negative, infinite or above bcl::max_estimate is a
// bcl::error naming the record position and the value); a cap clips the estimate, or truncates
// the record, estimates it again and clips what is still above; a record whose memory alone is
// over the budget is an error naming it; options the estimator cannot serve are an error at
// construction.

#include <bcl/cost_estimator.hpp>
#include <bcl/detail/intake/outlier_cap.hpp>
#include <bcl/detail/intake/record_estimator.hpp>
#include <bcl/error.hpp>
#include <bcl/options.hpp>
#include <bcl/record_model.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <utility>

namespace {

using Catch::Matchers::Contains;

/// A sequence: its cost is twice its length and its memory its length, unless a test says
/// otherwise; truncation cuts its length.
struct intake_sequence {
    double length = 0.0;
    std::optional<double> cost{};
    std::optional<double> memory{};
};

struct intake_cost {
    double operator()(const intake_sequence& s) const { return s.cost ? *s.cost : 2.0 * s.length; }
};

struct intake_memory {
    double operator()(const intake_sequence& s) const { return s.memory ? *s.memory : s.length; }
};

/// Cuts a sequence to `keep` times the length the cap allows, counting its calls.
struct cut {
    double keep = 1.0;
    int* calls = nullptr;
    void operator()(intake_sequence& s, double cap) const {
        ++*calls;
        s.length = keep * cap / 2.0;
    }
};

template <class Estimator>
using estimator_of = bcl::detail::record_estimator<intake_sequence, Estimator>;

const double nan_cost = std::numeric_limits<double>::quiet_NaN();

bcl::options options_with_fixed_cap(double value, bcl::cap_action action) {
    return {.batch_size = 4,
            .cap = {.kind = bcl::cap_kind::fixed, .value = value, .action = action}};
}

} // namespace

TEST_CASE("A cost estimate that is NaN, negative, infinite or above bcl::max_estimate is a "
          "bcl::error naming the record position and the value",
          "[record-estimator]") {
    // Each bad value and how it is written, by hand.
    const std::pair<double, const char*> bad[] = {{nan_cost, "nan"},
                                                  {-1.5, "-1.5"},
                                                  {-HUGE_VAL, "-inf"},
                                                  {HUGE_VAL, "inf"},
                                                  {2e120, "2e+120"}};
    // The path without cap or memory, a capped path, and one with a memory estimate.
    const bcl::options plain{.batch_size = 4};
    const bcl::options capped = options_with_fixed_cap(100.0, bcl::cap_action::clip);
    for (const auto& [value, text] : bad) {
        INFO(text);
        intake_sequence s{.length = 3.0, .cost = value};
        const bcl::detail::outlier_cap none(plain.cap);
        const bcl::detail::outlier_cap fixed(capped.cap);
        const std::string value_text = "cost estimate " + std::string(text);
        estimator_of<intake_cost> cost_only(intake_cost{}, plain);
        CHECK_THROWS_AS(cost_only(s, none, 17), bcl::error);
        CHECK_THROWS_WITH(cost_only(s, none, 17), Contains("record 17 ") && Contains(value_text));
        estimator_of<intake_cost> with_cap(intake_cost{}, capped);
        CHECK_THROWS_WITH(with_cap(s, fixed, 17), Contains("record 17 ") && Contains(value_text));
        auto with_memory = bcl::with_memory(intake_cost{}, intake_memory{});
        estimator_of<decltype(with_memory)> tracked(with_memory, plain);
        CHECK_THROWS_WITH(tracked(s, none, 17), Contains("record 17 ") && Contains(value_text));
    }
}

TEST_CASE("A memory estimate that is NaN, negative, infinite or above bcl::max_estimate is a "
          "bcl::error naming the record position and the value",
          "[record-estimator]") {
    const std::pair<double, const char*> bad[] = {
        {nan_cost, "nan"}, {-2.0, "-2"}, {-HUGE_VAL, "-inf"}, {HUGE_VAL, "inf"}, {1e121, "1e+121"}};
    const bcl::options opt{.batch_size = 4};
    const bcl::detail::outlier_cap cap(opt.cap);
    auto with_memory = bcl::with_memory(intake_cost{}, intake_memory{});
    estimator_of<decltype(with_memory)> estimate(with_memory, opt);
    for (const auto& [value, text] : bad) {
        INFO(text);
        intake_sequence s{.length = 3.0, .memory = value};
        CHECK_THROWS_WITH(estimate(s, cap, 9),
                          Contains("record 9 ") &&
                              Contains("memory estimate " + std::string(text)));
    }
}

TEST_CASE("Estimates of 0 and of exactly bcl::max_estimate are accepted", "[record-estimator]") {
    const bcl::options opt{.batch_size = 4};
    const bcl::detail::outlier_cap cap(opt.cap);
    auto with_memory = bcl::with_memory(intake_cost{}, intake_memory{});
    estimator_of<decltype(with_memory)> estimate(with_memory, opt);
    intake_sequence zero{.length = 0.0};
    CHECK(estimate(zero, cap, 0).cost == 0.0);
    CHECK(estimate(zero, cap, 0).memory == 0.0);
    intake_sequence largest{.length = 1.0, .cost = bcl::max_estimate, .memory = bcl::max_estimate};
    CHECK(estimate(largest, cap, 0).cost == bcl::max_estimate);
    CHECK(estimate(largest, cap, 0).memory == bcl::max_estimate);
}

TEST_CASE("Without a cap or a memory estimator the estimate is the cost, uncapped",
          "[record-estimator]") {
    const bcl::options opt{.batch_size = 4};
    const bcl::detail::outlier_cap cap(opt.cap);
    estimator_of<intake_cost> estimate(intake_cost{}, opt);
    intake_sequence s{.length = 21.0};
    const auto e = estimate(s, cap, 3);
    CHECK(e.cost == 42.0);
    CHECK(e.uncapped == 42.0);
    CHECK(e.memory == 0.0);
    CHECK(e.cap == HUGE_VAL);
    CHECK_FALSE(e.capped);
}

TEST_CASE("A clipping cap balances with min(estimate, cap) and leaves the record untouched",
          "[record-estimator]") {
    const bcl::options opt = options_with_fixed_cap(10.0, bcl::cap_action::clip);
    const bcl::detail::outlier_cap cap(opt.cap);
    auto with_memory = bcl::with_memory(intake_cost{}, intake_memory{});
    estimator_of<decltype(with_memory)> estimate(with_memory, opt);
    // (length, cost, capped) by hand: cost = 2 * length, capped when above 10.
    const struct {
        double length, cost;
        bool capped;
    } cases[] = {{3.0, 6.0, false}, {5.0, 10.0, false}, {5.5, 10.0, true}, {40.0, 10.0, true}};
    for (const auto& c : cases) {
        INFO("length " << c.length);
        intake_sequence s{.length = c.length};
        const auto e = estimate(s, cap, 0);
        CHECK(e.cost == c.cost);
        CHECK(e.uncapped == 2.0 * c.length);
        CHECK(e.cap == 10.0);
        CHECK(e.capped == c.capped);
        CHECK(e.memory == c.length);
        CHECK(s.length == c.length);
    }
}

TEST_CASE("A truncating cap truncates a record above it once, estimates it again and clips what is "
          "still above",
          "[record-estimator]") {
    const bcl::options opt = options_with_fixed_cap(10.0, bcl::cap_action::truncate);
    const bcl::detail::outlier_cap cap(opt.cap);
    // keep: the share of the allowed length the truncation leaves (cost after = keep * 10).
    for (const double keep : {0.5, 1.0, 3.0}) {
        INFO("truncation keeps " << keep << " of the allowed length");
        int calls = 0;
        auto truncating = bcl::with_truncation(bcl::with_memory(intake_cost{}, intake_memory{}),
                                               cut{keep, &calls});
        estimator_of<decltype(truncating)> estimate(truncating, opt);

        intake_sequence small{.length = 4.0}; // cost 8: not above the cap, not truncated
        const auto kept = estimate(small, cap, 0);
        CHECK(calls == 0);
        CHECK(kept.cost == 8.0);
        CHECK_FALSE(kept.capped);
        CHECK(small.length == 4.0);

        intake_sequence large{.length = 30.0}; // cost 60
        const auto e = estimate(large, cap, 1);
        CHECK(calls == 1);
        CHECK(large.length == keep * 5.0);            // truncated toward cost 10
        CHECK(e.cost == std::min(keep * 10.0, 10.0)); // estimated again, then clipped
        CHECK(e.uncapped == 60.0);
        CHECK(e.capped);
        CHECK(e.memory == keep * 5.0); // the memory of the truncated record
    }
}

TEST_CASE("A truncating cap's second estimate is checked like the first", "[record-estimator]") {
    const bcl::options opt = options_with_fixed_cap(10.0, bcl::cap_action::truncate);
    const bcl::detail::outlier_cap cap(opt.cap);
    auto truncating =
        bcl::with_truncation(intake_cost{}, [](intake_sequence& s, double) { s.cost = nan_cost; });
    estimator_of<decltype(truncating)> estimate(truncating, opt);
    intake_sequence s{.length = 30.0};
    CHECK_THROWS_WITH(estimate(s, cap, 4), Contains("record 4 ") && Contains("nan"));
}

TEST_CASE("A clipping cap never truncates, even with an estimator that can", "[record-estimator]") {
    const bcl::options opt = options_with_fixed_cap(10.0, bcl::cap_action::clip);
    const bcl::detail::outlier_cap cap(opt.cap);
    int calls = 0;
    auto truncating = bcl::with_truncation(intake_cost{}, cut{0.5, &calls});
    estimator_of<decltype(truncating)> estimate(truncating, opt);
    intake_sequence s{.length = 30.0};
    CHECK(estimate(s, cap, 0).cost == 10.0);
    CHECK(calls == 0);
    CHECK(s.length == 30.0);
}

TEST_CASE("A record whose memory alone is over the budget is a bcl::error naming it",
          "[record-estimator]") {
    const bcl::options opt{.batch_size = 4, .memory_budget = 40.0};
    const bcl::detail::outlier_cap cap(opt.cap);
    auto with_memory = bcl::with_memory(intake_cost{}, intake_memory{});
    estimator_of<decltype(with_memory)> estimate(with_memory, opt);
    intake_sequence fits{.length = 40.0}; // exactly the budget: fits
    CHECK(estimate(fits, cap, 0).memory == 40.0);
    intake_sequence over{.length = 50.0};
    CHECK_THROWS_WITH(estimate(over, cap, 6),
                      Contains("record 6 ") && Contains("memory 50") && Contains("budget of 40"));
}

TEST_CASE("Options that need truncation or a memory estimate the estimator lacks are a bcl::error "
          "at construction",
          "[record-estimator]") {
    for (const bcl::cap_kind kind : {bcl::cap_kind::fixed, bcl::cap_kind::quantile}) {
        bcl::options truncate = options_with_fixed_cap(10.0, bcl::cap_action::truncate);
        truncate.cap.kind = kind;
        CHECK_THROWS_WITH(estimator_of<intake_cost>(intake_cost{}, truncate),
                          Contains("truncate") && Contains("bcl::with_truncation"));
    }
    const bcl::options budget{.batch_size = 4, .memory_budget = 5.0};
    CHECK_THROWS_WITH(estimator_of<intake_cost>(intake_cost{}, budget),
                      Contains("memory_budget") && Contains("bcl::with_memory"));

    // What the estimator has, or a setting that asks for nothing, is fine.
    int calls = 0;
    auto truncating = bcl::with_truncation(intake_cost{}, cut{1.0, &calls});
    CHECK_NOTHROW(estimator_of<decltype(truncating)>(
        truncating, options_with_fixed_cap(10.0, bcl::cap_action::truncate)));
    auto with_memory = bcl::with_memory(intake_cost{}, intake_memory{});
    CHECK_NOTHROW(estimator_of<decltype(with_memory)>(with_memory, budget));
    bcl::options no_cap{.batch_size = 4};
    no_cap.cap.action = bcl::cap_action::truncate; // no cap: nothing to truncate to
    CHECK_NOTHROW(estimator_of<intake_cost>(intake_cost{}, no_cap));
}
