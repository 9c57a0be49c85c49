// bcl/calibrated_cost.hpp, as a specification. calibratable_estimator: E has 1. a
// feature_count from 1 to max_calibration_features, 2. features(record) as an array of that many
// doubles, 3. coefficients(), prior() and set_coefficients(c) (4., cost = coefficients . features,
// is semantic). calibrated_cost<N, FeatureMap> is the stock one: it prices a record as the dot
// product of its coefficients and FeatureMap's features, starts from a prior that must be finite,
// >= 0 and not all zero (else a bcl::error naming the coefficient and its value), and lets the
// balancer replace the coefficients while the prior stays. quadratic_features gives {1, L, L^2} of
// a projected length, so calibrated_affine_quadratic(a, b, c, proj) costs a + b*L + c*L^2. A
// balancer over a calibratable estimator, and only over one, takes times and reports what it
// learned; before any time it prices with the prior.

#include <bcl/balancer.hpp>
#include <bcl/calibrated_cost.hpp>
#include <bcl/cost_estimator.hpp>
#include <bcl/error.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <utility>
#include <vector>

namespace {

using Catch::Matchers::Contains;

struct text_image_item {
    std::size_t tokens = 0;
    std::size_t patches = 0;
};

// The features of a text-and-image record: {1, L, L^2, P, P^2}.
struct text_and_image {
    std::array<double, 5> operator()(const text_image_item& r) const {
        const auto l = static_cast<double>(r.tokens);
        const auto p = static_cast<double>(r.patches);
        return {1.0, l, l * l, p, p * p};
    }
};

// --- calibratable_estimator: one model, one per requirement broken -----------------------------
template <std::size_t N>
struct calibratable_model {
    static constexpr std::size_t feature_count = N;
    std::array<double, N> c{};
    std::array<double, N> features(const text_image_item&) const { return {}; }
    std::array<double, N> coefficients() const { return c; }
    std::array<double, N> prior() const { return c; }
    void set_coefficients(const std::array<double, N>& x) { c = x; }
};
struct no_feature_count { // 1: missing
    std::array<double, 2> features(const text_image_item&) const { return {}; }
    std::array<double, 2> coefficients() const { return {}; }
    std::array<double, 2> prior() const { return {}; }
    void set_coefficients(const std::array<double, 2>&) {}
};
struct features_as_vector : calibratable_model<2> { // 2: not an array
    std::vector<double> features(const text_image_item&) const { return {}; }
};
struct features_of_wrong_size : calibratable_model<2> { // 2: three features for a count of 2
    std::array<double, 3> features(const text_image_item&) const { return {}; }
};
struct features_mutate : calibratable_model<2> { // 2: not callable on a const estimator
    std::array<double, 2> features(const text_image_item&) { return {}; }
};
struct no_prior { // 3: no prior()
    static constexpr std::size_t feature_count = 2;
    std::array<double, 2> features(const text_image_item&) const { return {}; }
    std::array<double, 2> coefficients() const { return {}; }
    void set_coefficients(const std::array<double, 2>&) {}
};
struct no_set_coefficients { // 3: cannot be refitted
    static constexpr std::size_t feature_count = 2;
    std::array<double, 2> features(const text_image_item&) const { return {}; }
    std::array<double, 2> coefficients() const { return {}; }
    std::array<double, 2> prior() const { return {}; }
};
struct tokens_only {
    double operator()(const text_image_item& r) const { return static_cast<double>(r.tokens); }
};

template <class Balancer>
concept takes_times = requires(Balancer& b) {
    b.observe(std::uint64_t{0}, 1.0);
    b.calibration();
};

bcl::options tumbling_for_calibration(std::size_t b, std::size_t k) {
    return {.batch_size = b, .lookahead = k, .policy = bcl::lookahead_policy::tumbling};
}

} // namespace

TEST_CASE("calibrated_cost: calibratable_estimator asks for a feature count, features, and "
          "coefficients to read and replace",
          "[calibrated_cost]") {
    STATIC_REQUIRE(bcl::calibratable_estimator<calibratable_model<1>, text_image_item>);
    STATIC_REQUIRE(bcl::calibratable_estimator<calibratable_model<bcl::max_calibration_features>,
                                               text_image_item>);
    SECTION("1. a feature count from 1 to max_calibration_features") {
        STATIC_REQUIRE_FALSE(bcl::calibratable_estimator<calibratable_model<0>, text_image_item>);
        STATIC_REQUIRE_FALSE(
            bcl::calibratable_estimator<calibratable_model<bcl::max_calibration_features + 1>,
                                        text_image_item>);
        STATIC_REQUIRE_FALSE(bcl::calibratable_estimator<no_feature_count, text_image_item>);
    }
    SECTION("2. features(record) on a const estimator, an array of exactly that many doubles") {
        STATIC_REQUIRE_FALSE(bcl::calibratable_estimator<features_as_vector, text_image_item>);
        STATIC_REQUIRE_FALSE(bcl::calibratable_estimator<features_of_wrong_size, text_image_item>);
        STATIC_REQUIRE_FALSE(bcl::calibratable_estimator<features_mutate, text_image_item>);
    }
    SECTION("3. coefficients(), prior() and set_coefficients()") {
        STATIC_REQUIRE_FALSE(bcl::calibratable_estimator<no_prior, text_image_item>);
        STATIC_REQUIRE_FALSE(bcl::calibratable_estimator<no_set_coefficients, text_image_item>);
    }
    SECTION("a plain cost estimator is not one") {
        STATIC_REQUIRE_FALSE(bcl::calibratable_estimator<tokens_only, text_image_item>);
    }
}

TEST_CASE("calibrated_cost: the stock estimator is a cost estimator and a calibratable one",
          "[calibrated_cost]") {
    using text_image_cost = bcl::calibrated_cost<5, text_and_image>;
    STATIC_REQUIRE(text_image_cost::feature_count == 5);
    STATIC_REQUIRE(bcl::cost_estimator<text_image_cost, text_image_item>);
    STATIC_REQUIRE(bcl::calibratable_estimator<text_image_cost, text_image_item>);
    using affine =
        decltype(bcl::calibrated_affine_quadratic(0.0, 1.0, 0.0, &text_image_item::tokens));
    STATIC_REQUIRE(bcl::calibratable_estimator<affine, text_image_item>);
    STATIC_REQUIRE(
        bcl::calibratable_estimator<decltype(bcl::calibrated_affine_quadratic(1, 0, 0)), double>);
    STATIC_REQUIRE(noexcept(std::declval<text_image_cost&>().set_coefficients({})));
}

TEST_CASE("calibrated_cost: the cost is the coefficients times the features", "[calibrated_cost]") {
    // Worked by hand: L = 10, P = 4, coefficients {2, 0.5, 0.01, 3, 0.25}:
    // 2*1 + 0.5*10 + 0.01*100 + 3*4 + 0.25*16 = 2 + 5 + 1 + 12 + 4 = 24.
    const bcl::calibrated_cost<5, text_and_image> cost{text_and_image{},
                                                       {2.0, 0.5, 0.01, 3.0, 0.25}};
    const text_image_item r{10, 4};
    CHECK(cost.features(r) == std::array<double, 5>{1.0, 10.0, 100.0, 4.0, 16.0});
    CHECK(cost(r) == Approx(24.0).epsilon(1e-15));
    CHECK(cost(text_image_item{0, 0}) == 2.0); // only the constant term

    // Random integer coefficients and features, small enough that every sum is exact.
    std::mt19937_64 gen(7);
    for (int trial = 0; trial < 200; ++trial) {
        std::array<double, 5> c{};
        for (double& x : c) x = static_cast<double>(gen() % 100);
        c[0] += 1.0; // not all zero
        const text_image_item rec{static_cast<std::size_t>(gen() % 1000),
                                  static_cast<std::size_t>(gen() % 1000)};
        const bcl::calibrated_cost<5, text_and_image> priced{text_and_image{}, c};
        const std::uint64_t l = rec.tokens;
        const std::uint64_t p = rec.patches;
        const auto ci = [&](std::size_t j) { return static_cast<std::uint64_t>(c[j]); };
        const std::uint64_t expected =
            ci(0) + ci(1) * l + ci(2) * l * l + ci(3) * p + ci(4) * p * p;
        REQUIRE(priced(rec) == static_cast<double>(expected));
    }
}

TEST_CASE("calibrated_cost: quadratic_features and calibrated_affine_quadratic price "
          "a + b*L + c*L^2 of the projected length",
          "[calibrated_cost]") {
    const bcl::quadratic_features<std::size_t text_image_item::*> of_tokens{
        &text_image_item::tokens};
    CHECK(of_tokens(text_image_item{12, 99}) == std::array<double, 3>{1.0, 12.0, 144.0});
    const bcl::quadratic_features<> of_itself{};
    CHECK(of_itself(2.5) == std::array<double, 3>{1.0, 2.5, 6.25});
    CHECK(of_itself(std::uint32_t{3}) == std::array<double, 3>{1.0, 3.0, 9.0});

    // a = 100, b = 2, c = 1/64 at L = 32: 100 + 64 + 16 = 180.
    const auto cost =
        bcl::calibrated_affine_quadratic(100.0, 2.0, 1.0 / 64, &text_image_item::tokens);
    CHECK(cost(text_image_item{32, 0}) == 180.0);
    CHECK(cost(text_image_item{0, 0}) == 100.0);
    CHECK(cost.prior() == std::array<double, 3>{100.0, 2.0, 1.0 / 64});
    CHECK(cost.coefficients() == cost.prior());
    // A projection that is a lambda: patches count twice.
    const auto doubled = bcl::calibrated_affine_quadratic(
        0.0, 1.0, 0.0, [](const text_image_item& r) { return 2 * r.patches; });
    CHECK(doubled(text_image_item{5, 7}) == 14.0);
}

TEST_CASE("calibrated_cost: set_coefficients changes the price, never the prior",
          "[calibrated_cost]") {
    auto cost = bcl::calibrated_affine_quadratic(1.0, 1.0, 0.0, &text_image_item::tokens);
    CHECK(cost(text_image_item{10, 0}) == 11.0);
    cost.set_coefficients({0.0, 0.0, 2.0}); // 2 * 10^2
    CHECK(cost(text_image_item{10, 0}) == 200.0);
    CHECK(cost.coefficients() == std::array<double, 3>{0.0, 0.0, 2.0});
    CHECK(cost.prior() == std::array<double, 3>{1.0, 1.0, 0.0});
}

TEST_CASE("calibrated_cost: a prior coefficient negative, above 1e300 or not finite, or an "
          "all-zero prior, is a bcl::error naming it",
          "[calibrated_cost]") {
    const double inf = std::numeric_limits<double>::infinity();
    CHECK_THROWS_AS(bcl::calibrated_affine_quadratic(-1.0, 1.0, 1.0), bcl::error);
    CHECK_THROWS_WITH(bcl::calibrated_affine_quadratic(-1.0, 1.0, 1.0),
                      Contains("bcl::calibrated_cost") && Contains("prior coefficient 0 is -1"));
    CHECK_THROWS_WITH(bcl::calibrated_affine_quadratic(1.0, -0.5, 1.0),
                      Contains("prior coefficient 1 is -0.5"));
    CHECK_THROWS_WITH(bcl::calibrated_affine_quadratic(1.0, 1.0, std::nan("")),
                      Contains("prior coefficient 2 is nan"));
    CHECK_THROWS_WITH(bcl::calibrated_affine_quadratic(1.0, inf, 1.0),
                      Contains("prior coefficient 1 is inf"));
    CHECK_THROWS_WITH(bcl::calibrated_affine_quadratic(1.0, 1.0, -inf),
                      Contains("prior coefficient 2 is -inf"));
    // The first bad coefficient is the one named.
    CHECK_THROWS_WITH(bcl::calibrated_affine_quadratic(1.0, -2.0, -3.0),
                      Contains("coefficient 1 is -2"));
    CHECK_THROWS_WITH(bcl::calibrated_affine_quadratic(0.0, 0.0, 0.0),
                      Contains("every prior coefficient is 0"));
    CHECK_THROWS_WITH(bcl::calibrated_affine_quadratic(-0.0, 0.0, -0.0),
                      Contains("every prior coefficient is 0"));
    CHECK_THROWS_WITH((bcl::calibrated_cost<5, text_and_image>{text_and_image{}, {}}),
                      Contains("every prior coefficient is 0"));
    // One positive coefficient is enough; the smallest and large finite ones are accepted.
    CHECK_NOTHROW(bcl::calibrated_affine_quadratic(0.0, 0.0, 1.0));
    CHECK_NOTHROW(
        bcl::calibrated_affine_quadratic(std::numeric_limits<double>::denorm_min(), 0.0, 0.0));
    CHECK_NOTHROW(bcl::calibrated_affine_quadratic(1e300, 0.0, 0.0));
    // Finite but above the largest a coefficient may be: the message gives the range.
    CHECK_THROWS_WITH(bcl::calibrated_affine_quadratic(1.0, 2e300, 0.0),
                      Contains("prior coefficient 1 is 2e+300") &&
                          Contains("coefficients must be from 0 to 1e300"));
}

TEST_CASE("calibrated_cost: a balancer over it prices with the prior until it learns, and only "
          "such a balancer takes times",
          "[calibrated_cost]") {
    using affine =
        decltype(bcl::calibrated_affine_quadratic(0.0, 1.0, 0.0, &text_image_item::tokens));
    STATIC_REQUIRE(takes_times<bcl::balancer<text_image_item, affine>>);
    STATIC_REQUIRE_FALSE(takes_times<bcl::balancer<text_image_item, tokens_only>>);

    const bcl::calibration_summary<3> none{};
    CHECK(none.fitted == std::array<double, 3>{});
    CHECK(none.applied == std::array<double, 3>{});
    CHECK(none.times_observed == 0);
    CHECK(none.times_downweighted == 0);
    CHECK_FALSE(none.has_fit);

    // Prior 1 + 2L; B = 2, K = 1. Tokens 3 and 5 cost 7 and 11: the batch, 18.
    bcl::balancer<text_image_item, affine> b{
        bcl::calibrated_affine_quadratic(1.0, 2.0, 0.0, &text_image_item::tokens),
        tumbling_for_calibration(2, 1)};
    const auto before = b.calibration();
    CHECK_FALSE(before.has_fit);
    CHECK(before.times_observed == 0);
    CHECK(before.applied == std::array<double, 3>{1.0, 2.0, 0.0});
    b.push(text_image_item{3, 0});
    b.push(text_image_item{5, 0});
    REQUIRE(b.pop());
    CHECK(b.last_batch_cost() == 18.0);
    b.observe(0, 0.25);
    CHECK(b.calibration().times_observed == 1);
}
