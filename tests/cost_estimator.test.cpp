// bcl::cost_estimator and bcl::max_estimate, as a specification. E is a cost estimator for Record
// if 1. it is move-constructible, 2. an lvalue of E is invocable with a const Record&, and 3. the
// result converts to double; it need not be const-callable, noexcept, copyable or
// default-constructible. One model satisfies it, one model per requirement fails exactly that
// one. max_estimate is 1e120, chosen so that no sum, mean or square the library keeps overflows:
// checked here by the arithmetic its comment gives. A balancer accepts estimates in [0,
// max_estimate] and refuses the rest naming the record.

#include <bcl/balancer.hpp>
#include <bcl/cost_estimator.hpp>
#include <bcl/error.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <concepts>
#include <cstddef>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

namespace {

using Catch::Matchers::Contains;

struct estimator_sample {
    std::size_t tokens = 0;
    double measured = 0.0;
    [[nodiscard]] double cost() const { return static_cast<double>(tokens); }
};

// The model: a plain function object.
struct token_count {
    double operator()(const estimator_sample& s) const { return static_cast<double>(s.tokens); }
};

// 1 fails alone: invocable, returns double, but cannot be moved (it holds a mutex).
struct locked_estimator {
    std::mutex lock;
    double operator()(const estimator_sample& s) { return static_cast<double>(s.tokens); }
};

// 2 fails alone: a callable that needs to modify the record.
struct normalizing_estimator {
    double operator()(estimator_sample& s) const { return s.measured = 1.0; }
};

// 2 fails alone: callable only on an rvalue of itself, not on the lvalue a balancer keeps.
struct one_shot_estimator {
    double operator()(const estimator_sample& s) && { return static_cast<double>(s.tokens); }
};

// 3 fails alone: the result converts to double only explicitly.
struct opaque_cost {
    explicit operator double() const { return 1.0; }
};
struct opaque_estimator {
    opaque_cost operator()(const estimator_sample&) const { return {}; }
};

// Not required: const-callable, noexcept, copyable, default-constructible, exactly double.
struct cost_with_unit {
    operator double() const { return value; } // converts implicitly: enough
    double value;
};
struct metered_estimator {
    explicit metered_estimator(std::unique_ptr<std::size_t> calls) : m_calls(std::move(calls)) {}
    cost_with_unit operator()(const estimator_sample& s) {
        ++*m_calls;
        return {static_cast<double>(s.tokens)};
    }
    std::unique_ptr<std::size_t> m_calls;
};

// A balancer whose estimator returns the record's own value, so any estimate can be pushed.
struct value_record {
    double value = 0.0;
};
struct value_of {
    double operator()(const value_record& r) const { return r.value; }
};

} // namespace

TEST_CASE("cost_estimator: a movable callable from const Record& to double is one",
          "[cost_estimator]") {
    STATIC_REQUIRE(bcl::cost_estimator<token_count, estimator_sample>);
    // Lambdas, function pointers, and member pointers through std::invoke.
    const auto lambda = [](const estimator_sample& s) { return s.cost(); };
    STATIC_REQUIRE(bcl::cost_estimator<decltype(lambda), estimator_sample>);
    STATIC_REQUIRE(bcl::cost_estimator<double (*)(const estimator_sample&), estimator_sample>);
    STATIC_REQUIRE(bcl::cost_estimator<double estimator_sample::*, estimator_sample>);
    STATIC_REQUIRE(bcl::cost_estimator<double (estimator_sample::*)() const, estimator_sample>);
}

TEST_CASE("cost_estimator: each requirement, broken alone, is refused", "[cost_estimator]") {
    SECTION("1. move-constructible") {
        STATIC_REQUIRE(std::invocable<locked_estimator&, const estimator_sample&>);
        STATIC_REQUIRE_FALSE(bcl::cost_estimator<locked_estimator, estimator_sample>);
    }
    SECTION("2. an lvalue invocable with a const Record&") {
        STATIC_REQUIRE(std::move_constructible<normalizing_estimator>);
        STATIC_REQUIRE_FALSE(bcl::cost_estimator<normalizing_estimator, estimator_sample>);
        STATIC_REQUIRE(std::invocable<one_shot_estimator&&, const estimator_sample&>);
        STATIC_REQUIRE_FALSE(bcl::cost_estimator<one_shot_estimator, estimator_sample>);
        STATIC_REQUIRE_FALSE(bcl::cost_estimator<token_count, std::string>); // another record
    }
    SECTION("3. the result converts to double") {
        STATIC_REQUIRE(std::invocable<opaque_estimator&, const estimator_sample&>);
        STATIC_REQUIRE_FALSE(bcl::cost_estimator<opaque_estimator, estimator_sample>);
        const auto nothing = [](const estimator_sample&) {};
        STATIC_REQUIRE_FALSE(bcl::cost_estimator<decltype(nothing), estimator_sample>);
    }
}

TEST_CASE("cost_estimator: not required are const calls, noexcept, copies, a default "
          "constructor or exactly double; such an estimator drives a balancer",
          "[cost_estimator]") {
    STATIC_REQUIRE(bcl::cost_estimator<metered_estimator, estimator_sample>);
    STATIC_REQUIRE_FALSE(std::copy_constructible<metered_estimator>);
    STATIC_REQUIRE_FALSE(std::default_initializable<metered_estimator>);
    const auto mutable_lambda = [n = 0](const estimator_sample& s) mutable {
        return ++n + s.cost();
    };
    STATIC_REQUIRE(
        bcl::cost_estimator<std::remove_const_t<decltype(mutable_lambda)>, estimator_sample>);

    // B = 2, K = 1: tokens 3 and 4 make one batch whose estimated cost is 3 + 4 = 7.
    auto calls = std::make_unique<std::size_t>(0);
    std::size_t* const seen = calls.get();
    bcl::balancer<estimator_sample, metered_estimator> b{
        metered_estimator{std::move(calls)},
        {.batch_size = 2, .lookahead = 1, .policy = bcl::lookahead_policy::tumbling}};
    b.push(estimator_sample{3});
    b.push(estimator_sample{4});
    REQUIRE(b.pop());
    CHECK(b.last_batch_cost() == 7.0);
    CHECK(*seen == 2); // each record estimated once, by the balancer's own (moved) estimator
}

TEST_CASE("cost_estimator: max_estimate is 1e120, far enough from the largest double that the "
          "sums and squares the library keeps stay finite",
          "[cost_estimator]") {
    STATIC_REQUIRE(bcl::max_estimate == 1e120);
    // The comment's bound: 2^64 records (a count), windows of 2^26 records, each at the largest
    // estimate. A window's sum, the stream's sum, a batch cost's square summed over 2^64 batches.
    constexpr double records = 0x1p64;
    constexpr double window = 0x1p26;
    constexpr double largest = std::numeric_limits<double>::max();
    STATIC_REQUIRE(window * bcl::max_estimate < largest);
    STATIC_REQUIRE(records * window * bcl::max_estimate < largest);
    STATIC_REQUIRE(records * (window * bcl::max_estimate) * (window * bcl::max_estimate) < largest);
}

TEST_CASE("cost_estimator: a balancer takes estimates from 0 to max_estimate and refuses NaN, "
          "negative or larger ones, naming the record",
          "[cost_estimator]") {
    const double inf = std::numeric_limits<double>::infinity();
    bcl::balancer<value_record, value_of> b{
        value_of{}, {.batch_size = 4, .lookahead = 1, .policy = bcl::lookahead_policy::tumbling}};
    b.push(value_record{0.0});
    b.push(value_record{-0.0}); // not negative: -0.0 == 0
    b.push(value_record{std::numeric_limits<double>::denorm_min()});
    b.push(value_record{bcl::max_estimate});
    // Records 0..3 are held; the next position is 4, and a refused record keeps it.
    CHECK_THROWS_WITH(b.push(value_record{std::nextafter(bcl::max_estimate, inf)}),
                      Contains("record 4"));
    CHECK_THROWS_WITH(b.push(value_record{std::nan("")}), Contains("record 4"));
    CHECK_THROWS_WITH(b.push(value_record{-1e-300}), Contains("record 4"));
    CHECK_THROWS_WITH(b.push(value_record{-inf}), Contains("record 4"));
    CHECK_THROWS_AS(b.push(value_record{inf}), bcl::error);
    CHECK(b.buffered() == 4);
    auto batch = b.pop();
    REQUIRE(batch);
    CHECK(batch->size() == 4);
    CHECK(b.last_batch_cost() == bcl::max_estimate); // the others add nothing at this scale
}
