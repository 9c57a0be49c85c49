// bcl::detail::cost_fit and bcl::detail::nonnegative_minimum, as a specification: the fit is the
// non-negative weighted least-squares solution of theta . x ~ y, each time weighted by
// 1 / (predicted time)^2 (the time itself before a fit), so it minimizes relative error; a time
// far off a fit is down-weighted (Huber); older times fade by `forgetting`; refit() hands out the
// fit rescaled so that a record of the long-run mean features costs what the prior says, and only
// when times came since the last refit and the fit can be expressed in the prior's units.

#include <bcl/detail/calibration/cost_fit.hpp>
#include <bcl/options.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <random>
#include <utility>

namespace {

using vec1 = std::array<double, 1>;
using vec2 = std::array<double, 2>;
using vec3 = std::array<double, 3>;

/// Options with no prior pull to speak of (its floor of 1e-12 batches) and no forgetting, so a
/// fit is the plain weighted least-squares solution.
bcl::calibration_options plain() {
    bcl::calibration_options o;
    o.forgetting = 1.0;
    o.prior_weight = 0.0;
    return o;
}

bool near(double got, double want, double tolerance = 1e-9) {
    return std::abs(got - want) <= tolerance * std::max(1.0, std::abs(want));
}

} // namespace

TEST_CASE("cost_fit: the non-negative minimum of small problems, worked by hand",
          "[calibration][cost_fit]") {
    using bcl::detail::nonnegative_minimum;
    // m = [[2, 1], [1, 2]], m^-1 = [[2, -1], [-1, 2]] / 3.
    const std::array<double, 4> m{2.0, 1.0, 1.0, 2.0};
    // g = (1, 1): m^-1 g = (1/3, 1/3), feasible, so it is the answer.
    const auto inside = nonnegative_minimum<2>(m, {1.0, 1.0});
    CHECK(near(inside[0], 1.0 / 3.0));
    CHECK(near(inside[1], 1.0 / 3.0));
    // g = (1, -1): m^-1 g = (1, -1) is infeasible; on the support {0}, z0 = 1 / 2, and there the
    // gradient in z1, m10 z0 - g1 = 1/2 + 1 > 0, so z1 stays 0.
    const auto edge = nonnegative_minimum<2>(m, {1.0, -1.0});
    CHECK(near(edge[0], 0.5));
    CHECK(edge[1] == 0.0);
    // g <= 0: nothing beats z = 0.
    CHECK(nonnegative_minimum<2>(m, {-1.0, -2.0}) == std::array<double, 2>{0.0, 0.0});
    // A singular m = [[1, 1], [1, 1]], g = (1, 1): every z >= 0 with z0 + z1 = 1 is a minimum, of
    // objective -1; the full support is singular and skipped, a single-variable one is found.
    const auto flat = nonnegative_minimum<2>({1.0, 1.0, 1.0, 1.0}, {1.0, 1.0});
    CHECK(flat[0] >= 0.0);
    CHECK(flat[1] >= 0.0);
    CHECK(near(flat[0] + flat[1], 1.0));
}

TEST_CASE("cost_fit: exact times of a + bL + cL^2 recover a, b and c", "[calibration][cost_fit]") {
    // Three records of lengths 1, 2, 3, each timed alone, under a = 1, b = 2, c = 3: times 6, 17,
    // 34. Three independent equations in three unknowns: the least-squares solution is the model
    // whatever the weights.
    bcl::detail::cost_fit<3> fit(plain(), vec3{0.0, 1.0, 0.0});
    for (const double length : {1.0, 2.0, 3.0}) {
        const vec3 x{1.0, length, length * length};
        fit.count_record(x);
        fit.add(x, 1.0 + 2.0 * length + 3.0 * length * length);
    }
    vec3 applied{-1.0, -1.0, -1.0};
    REQUIRE(fit.refit(applied));
    const auto& n = fit.save();
    CHECK(n.has_fit);
    CHECK(near(n.fitted[0], 1.0, 1e-8));
    CHECK(near(n.fitted[1], 2.0, 1e-8));
    CHECK(near(n.fitted[2], 3.0, 1e-8));
    CHECK(n.observed == 3);
    CHECK(n.downweighted == 0);
}

TEST_CASE("cost_fit: inexact times give the relative least-squares solution of the normal "
          "equations",
          "[calibration][cost_fit]") {
    // Features (1, L); times (L = 1, y = 2), (2, 2), (3, 6). Before any fit each time weighs
    // 1 / y^2, so the fit minimizes sum (theta . u - 1)^2 with u = x / y: u = (1/2, 1/2),
    // (1/2, 1), (1/6, 1/2). Normal equations: sum u u^T = [[19/36, 5/6], [5/6, 3/2]], sum u =
    // (7/6, 2); determinant 7/72; theta0 = (3/2 * 7/6 - 5/6 * 2) * 72/7 = 6/7, theta1 =
    // (19/36 * 2 - 5/6 * 7/6) * 72/7 = 6/7. Both positive: the constraint is not active.
    bcl::detail::cost_fit<2> fit(plain(), vec2{0.0, 1.0});
    for (const auto& [length, time] : {std::pair{1.0, 2.0}, {2.0, 2.0}, {3.0, 6.0}}) {
        fit.count_record({1.0, length});
        fit.add({1.0, length}, time);
    }
    vec2 applied{};
    REQUIRE(fit.refit(applied));
    CHECK(near(fit.save().fitted[0], 6.0 / 7.0, 1e-8));
    CHECK(near(fit.save().fitted[1], 6.0 / 7.0, 1e-8));
    // Applied: rescaled so the mean record (1, 2) costs what the prior (0, 1) says, 2: theta
    // prices it 18/7, so applied = theta * 7/9 = (2/3, 2/3).
    CHECK(near(applied[0], 2.0 / 3.0, 1e-8));
    CHECK(near(applied[1], 2.0 / 3.0, 1e-8));
}

TEST_CASE("cost_fit: a coefficient the times would make negative is fitted as zero",
          "[calibration][cost_fit]") {
    // (L = 1, y = 1) and (2, 4): the exact line is -2 + 3L. With theta0 = 0 the relative fit of
    // theta1 alone over u1 = (1, 1/2) is (1 + 1/2) / (1 + 1/4) = 6/5, and there the gradient in
    // theta0, sum u0 (u . theta - 1) = 1 * 1/5 + 1/4 * (-2/5) = 1/10, is positive: the optimum.
    bcl::detail::cost_fit<2> fit(plain(), vec2{1.0, 1.0});
    fit.count_record({1.0, 1.0});
    fit.count_record({1.0, 2.0});
    fit.add({1.0, 1.0}, 1.0);
    fit.add({1.0, 2.0}, 4.0);
    vec2 applied{};
    REQUIRE(fit.refit(applied));
    CHECK(fit.save().fitted[0] == Approx(0.0).margin(1e-9));
    CHECK(near(fit.save().fitted[1], 1.2, 1e-8));
    CHECK(applied[0] >= 0.0);
}

TEST_CASE("cost_fit: each time adds its weighted terms to the faded sums",
          "[calibration][cost_fit]") {
    bcl::calibration_options o = plain();
    o.forgetting = 0.5;
    bcl::detail::cost_fit<1> fit(o, vec1{1.0});
    // No fit yet, so each weight is 1 / y^2. (x 2, y 4): A = 4/16 = 1/4, b = 2 * 4 / 16 = 1/2.
    fit.add({2.0}, 4.0);
    CHECK(fit.save().normal_matrix[0] == 0.25);
    CHECK(fit.save().normal_vector[0] == 0.5);
    CHECK(fit.save().effective_count == 1.0);
    // (x 3, y 1), the old sums halved: A = 1/8 + 9, b = 1/4 + 3, count 1/2 + 1.
    fit.add({3.0}, 1.0);
    CHECK(fit.save().normal_matrix[0] == 9.125);
    CHECK(fit.save().normal_vector[0] == 3.25);
    CHECK(fit.save().effective_count == 1.5);
    CHECK(fit.save().observed == 2);
    CHECK(fit.save().stale);
}

TEST_CASE("cost_fit: a time far from the fit counts less, in proportion to how far",
          "[calibration][cost_fit]") {
    bcl::detail::cost_fit<1> fit(plain(), vec1{1.0});
    fit.count_record({1.0});
    fit.add({1.0}, 2.0);
    vec1 applied{};
    REQUIRE(fit.refit(applied));
    REQUIRE(near(fit.save().fitted[0], 2.0));
    const double a_before = fit.save().normal_matrix[0];
    // Predicted 2, measured 20: relative error 9 against the limit 3 * max(error scale 1, 1%)
    // = 3, so the weight 1 / 2^2 is scaled by 3 / 9; the typical error moves 5% toward
    // min(9, 2 * 3) = 6: 1 + 0.05 * 5 = 1.25.
    fit.add({1.0}, 20.0);
    CHECK(fit.save().downweighted == 1);
    CHECK(fit.save().normal_matrix[0] == Approx(a_before + 0.25 / 3.0).epsilon(1e-12));
    CHECK(fit.save().error_scale == Approx(1.25).epsilon(1e-12));
    // A time on the fit is no outlier.
    fit.add({1.0}, 2.0);
    CHECK(fit.save().downweighted == 1);
}

TEST_CASE("cost_fit: refit applies nothing without new times, without records, or for a time of "
          "zero",
          "[calibration][cost_fit]") {
    bcl::detail::cost_fit<2> fit(plain(), vec2{0.0, 1.0});
    vec2 applied{7.0, 7.0};
    CHECK_FALSE(fit.refit(applied)); // nothing yet
    // A zero time of a batch that nothing predicts: counted, but no evidence.
    fit.add({1.0, 5.0}, 0.0);
    CHECK(fit.save().observed == 1);
    CHECK_FALSE(fit.save().stale);
    CHECK_FALSE(fit.refit(applied));
    // A time but no record counted: no long-run mean to rescale to.
    fit.add({1.0, 5.0}, 3.0);
    CHECK_FALSE(fit.refit(applied));
    CHECK(applied == vec2{7.0, 7.0});
    CHECK_FALSE(fit.save().has_fit);
    // With a record counted and a new time, it applies; asked again with no new time, it does not.
    fit.count_record({1.0, 5.0});
    fit.add({1.0, 5.0}, 3.0);
    REQUIRE(fit.refit(applied));
    const vec2 first = applied;
    CHECK_FALSE(fit.refit(applied));
    CHECK(applied == first);
}

TEST_CASE("cost_fit: forgetting follows a changed cost; without it the old times still weigh",
          "[calibration][cost_fit]") {
    // Times of 1 per unit of L, then of 3 per unit: a fit that forgets by half a time ends at 3,
    // one that never forgets ends between.
    std::mt19937_64 gen(11);
    std::uniform_real_distribution<double> length(1.0, 100.0);
    const auto run = [&](double forgetting) {
        bcl::calibration_options o = plain();
        o.forgetting = forgetting;
        o.outlier_threshold = 1e9; // the change is not an outlier here
        bcl::detail::cost_fit<1> fit(o, vec1{1.0});
        vec1 applied{};
        for (int i = 0; i < 200; ++i) {
            const double l = length(gen);
            fit.count_record({l});
            fit.add({l}, (i < 100 ? 1.0 : 3.0) * l);
            (void)fit.refit(applied);
        }
        return fit.save().fitted[0];
    };
    CHECK(near(run(0.5), 3.0, 1e-6));
    const double remembered = run(1.0);
    CHECK(remembered > 1.5);
    CHECK(remembered < 2.9);
}
