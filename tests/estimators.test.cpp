// The stock estimators: linear, affine-quadratic and table lookup, over a member pointer or any
// callable projection. Expected values are worked out by hand in the comments.

#include <bcl/balancer.hpp>
#include <bcl/cost_estimator.hpp>
#include <bcl/error.hpp>
#include <bcl/estimators.hpp>

#include <catch2/catch.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

using Catch::Matchers::Contains;

namespace {

struct text_sample {
    std::size_t tokens = 0;
    double seconds = 0.0;
    int bucket = 0;
    std::string text{};
};

} // namespace

TEST_CASE("linear(scale, projection) costs scale * L", "[estimators]") {
    SECTION("on plain numbers, with the identity projection") {
        const auto cost = bcl::linear(2.5);
        CHECK(cost(4) == 10.0);   // 2.5 * 4
        CHECK(cost(0.5) == 1.25); // 2.5 * 0.5
        CHECK(cost(0) == 0.0);
    }
    SECTION("over a member pointer") {
        const auto cost = bcl::linear(0.5, &text_sample::tokens);
        CHECK(cost(text_sample{.tokens = 10}) == 5.0); // 0.5 * 10
        CHECK(cost(text_sample{.tokens = 3}) == 1.5);  // 0.5 * 3
        STATIC_REQUIRE(bcl::cost_estimator<decltype(cost), text_sample>);
    }
    SECTION("over a callable") {
        const auto cost = bcl::linear(3.0, [](const text_sample& s) { return s.text.size(); });
        CHECK(cost(text_sample{.text = "abcd"}) == 12.0); // 3 * 4 characters
        CHECK(cost(text_sample{}) == 0.0);
        STATIC_REQUIRE(bcl::cost_estimator<decltype(cost), text_sample>);
    }
    SECTION("the default scale is 1") {
        const bcl::linear_cost<> cost{};
        CHECK(cost(7) == 7.0);
    }
}

TEST_CASE("affine_quadratic(a, b, c, projection) costs a + b*L + c*L^2", "[estimators]") {
    SECTION("on plain numbers") {
        const auto cost = bcl::affine_quadratic(1.0, 2.0, 0.5);
        CHECK(cost(4) == 17.0);  // 1 + 2*4 + 0.5*16 = 1 + 8 + 8
        CHECK(cost(0) == 1.0);   // just a
        CHECK(cost(10) == 71.0); // 1 + 20 + 50
    }
    SECTION("over a member pointer") {
        const auto cost = bcl::affine_quadratic(3.0, 0.0, 2.0, &text_sample::seconds);
        CHECK(cost(text_sample{.seconds = 1.5}) == 7.5); // 3 + 0 + 2*2.25
        STATIC_REQUIRE(bcl::cost_estimator<decltype(cost), text_sample>);
    }
    SECTION("over a callable") {
        const auto cost = bcl::affine_quadratic(0.0, 1.0, 0.25,
                                                [](const text_sample& s) { return s.tokens * 2; });
        CHECK(cost(text_sample{.tokens = 3}) == 15.0); // L = 6: 6 + 0.25*36 = 6 + 9
        STATIC_REQUIRE(bcl::cost_estimator<decltype(cost), text_sample>);
    }
    SECTION("the 7B FLOPs proxy: a = 0, b = 1, c = 1/24576") {
        const auto cost = bcl::affine_quadratic(0.0, 1.0, 1.0 / 24576, &text_sample::tokens);
        // L = 24576: 24576 + 24576^2/24576 = 2 * 24576 = 49152.
        CHECK(cost(text_sample{.tokens = 24576}) == Approx(49152.0).epsilon(1e-12));
        // L = 2048: 2048 + 2048^2/24576 = 2048 + 170.666... = 2218.666...
        CHECK(cost(text_sample{.tokens = 2048}) == Approx(2048.0 + 2048.0 / 12.0).epsilon(1e-12));
    }
    SECTION("the defaults are a = 0, b = 1, c = 0: the length itself") {
        const bcl::affine_quadratic_cost<> cost{};
        CHECK(cost(9) == 9.0);
    }
}

TEST_CASE("table(costs, projection) looks the cost up by an integral key", "[estimators]") {
    const auto cost = bcl::table({0.5, 2.0, 8.0}, &text_sample::bucket);
    STATIC_REQUIRE(bcl::cost_estimator<decltype(cost), text_sample>);

    SECTION("a key inside the table") {
        CHECK(cost(text_sample{.bucket = 0}) == 0.5);
        CHECK(cost(text_sample{.bucket = 1}) == 2.0);
        CHECK(cost(text_sample{.bucket = 2}) == 8.0);
    }
    SECTION("a key past the end is a bcl::error naming the key") {
        CHECK_THROWS_AS(cost(text_sample{.bucket = 3}), bcl::error);
        CHECK_THROWS_WITH(cost(text_sample{.bucket = 3}), Contains("key 3"));
        CHECK_THROWS_WITH(cost(text_sample{.bucket = 1234}), Contains("1234"));
    }
    SECTION("a negative key is a bcl::error naming the key") {
        CHECK_THROWS_AS(cost(text_sample{.bucket = -1}), bcl::error);
        CHECK_THROWS_WITH(cost(text_sample{.bucket = -1}), Contains("-1"));
    }
    SECTION("unsigned and 64-bit keys") {
        const auto by_size = bcl::table({1.0, 4.0}, &text_sample::tokens);
        CHECK(by_size(text_sample{.tokens = 1}) == 4.0);
        CHECK_THROWS_WITH(by_size(text_sample{.tokens = 2}), Contains("2"));
        const auto wide = bcl::table(std::vector<double>{6.0});
        CHECK(wide(std::int64_t{0}) == 6.0);
        CHECK_THROWS_AS(wide(std::int64_t{-5'000'000'000}), bcl::error);
    }
    SECTION("an empty table rejects every key") {
        const auto empty = bcl::table(std::vector<double>{});
        CHECK_THROWS_AS(empty(0), bcl::error);
    }
    SECTION("a non-integral, bool or character key is rejected at compile time") {
        STATIC_REQUIRE_FALSE(std::invocable<const bcl::table_cost<>&, double>);
        STATIC_REQUIRE_FALSE(std::invocable<const bcl::table_cost<>&, bool>);
        STATIC_REQUIRE_FALSE(std::invocable<const bcl::table_cost<>&, char>);
        STATIC_REQUIRE_FALSE(std::invocable<const bcl::table_cost<>&, char8_t>);
        STATIC_REQUIRE_FALSE(std::invocable<const bcl::table_cost<>&, wchar_t>);
        STATIC_REQUIRE_FALSE(
            bcl::cost_estimator<bcl::table_cost<decltype(&text_sample::seconds)>, text_sample>);
    }
    SECTION("small integer keys, std::uint8_t and std::int8_t included") {
        const auto cost8 = bcl::table({1.5, 2.5});
        CHECK(cost8(std::uint8_t{1}) == 2.5);
        CHECK(cost8(short{0}) == 1.5);
        CHECK_THROWS_WITH(cost8(std::int8_t{-3}), Contains("-3"));
    }
    SECTION("a key error from the table reaches the user through a balancer unchanged") {
        bcl::balancer<text_sample, bcl::table_cost<int text_sample::*>> b{
            cost, {.batch_size = 2, .lookahead = 2}};
        b.push(text_sample{.bucket = 1});
        CHECK_THROWS_WITH(b.push(text_sample{.bucket = 7}), Contains("key 7"));
        CHECK(b.buffered() == 1);
    }
}

TEST_CASE("The stock estimators drive a balancer: the batch cost is the sum of the estimates",
          "[estimators]") {
    // Four samples of 1, 2, 3, 4 tokens with cost 1 + L^2: 2, 5, 10, 17; one window of K=1 batch
    // of B=4, so the single batch costs 2 + 5 + 10 + 17 = 34.
    bcl::balancer<text_sample, bcl::affine_quadratic_cost<std::size_t text_sample::*>> b{
        bcl::affine_quadratic(1.0, 0.0, 1.0, &text_sample::tokens),
        {.batch_size = 4, .lookahead = 1, .policy = bcl::lookahead_policy::tumbling}};
    for (std::size_t l = 1; l <= 4; ++l) b.push(text_sample{.tokens = l});
    auto batch = b.pop();
    REQUIRE(batch);
    CHECK(batch->size() == 4);
    CHECK(b.last_batch_cost() == 34.0);
}
