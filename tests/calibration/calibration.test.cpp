// Online calibration: a balancer over a calibrated cost fits the cost model to the batch times it
// is told, applies the fit at round boundaries, survives bad times and resumes exactly.

#include "support/contract_checks.hpp"
#include "support/distributions.hpp"

#include <bcl/balancer.hpp>
#include <bcl/calibrated_cost.hpp>
#include <bcl/detail/calibration/cost_fit.hpp>
#include <bcl/error.hpp>
#include <bcl/estimators.hpp>
#include <bcl/options.hpp>
#include <bcl/statistics.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

using namespace bcl_test;

namespace {

using Catch::Matchers::Contains;

/// A record is a length; its true time is a + b L + c L^2.
struct time_model {
    double a = 0.0;
    double b = 0.0;
    double c = 0.0;
    [[nodiscard]] double operator()(double length) const { return a + length * (b + c * length); }
};

using calibrated_estimator = decltype(bcl::calibrated_affine_quadratic(0.0, 1.0, 0.0));
using calibrating_balancer = bcl::balancer<double, calibrated_estimator>;

std::vector<double> lognormal_lengths(std::size_t n, std::uint64_t seed) {
    std::mt19937_64 gen(seed);
    std::lognormal_distribution<double> length(6.0, 1.0);
    std::vector<double> out(n);
    for (double& x : out) x = std::round(length(gen)) + 1.0;
    return out;
}

/// What a calibrated run emitted and learned.
struct calibrated_run {
    std::vector<std::vector<double>> batches;
    bcl::calibration_summary<3> summary;
};

/// Feeds `lengths` through a calibrating balancer whose prior is `prior`, reporting every batch's
/// true time (times exp(noise * N(0,1)), and `spike` times every `spike_every`-th) right after
/// it is emitted.
struct run_settings {
    time_model prior{0.0, 1.0, 0.0};
    time_model truth{};
    double noise = 0.0;
    std::size_t spike_every = 0;
    double spike = 1.0;
    bool inverted = false; // report 1 / time: times that fall as the work grows
    bool silent = false;   // report no time at all
    bcl::options opt{.batch_size = 16, .lookahead = 8};
};

calibrated_run run_calibrated(const std::vector<double>& lengths, const run_settings& s) {
    calibrating_balancer b{bcl::calibrated_affine_quadratic(s.prior.a, s.prior.b, s.prior.c),
                           s.opt};
    std::mt19937_64 gen(99);
    std::normal_distribution<double> normal;
    calibrated_run out;
    auto take = [&](std::span<double> batch) {
        double t = 0.0;
        for (const double length : batch) t += s.truth(length);
        t *= std::exp(s.noise * normal(gen));
        const std::uint64_t index = out.batches.size();
        if (s.spike_every != 0 && index % s.spike_every == s.spike_every - 1) t *= s.spike;
        out.batches.emplace_back(batch.begin(), batch.end());
        if (!s.silent) b.observe(index, s.inverted ? 1.0 / t : t);
    };
    for (const double length : lengths) {
        b.push(length);
        while (auto batch = b.pop()) take(*batch);
    }
    b.finish();
    while (auto batch = b.pop()) take(*batch);
    out.summary = b.calibration();
    return out;
}

double relative_error(double got, double want) {
    return std::abs(got - want) / std::abs(want);
}

} // namespace

TEST_CASE("A calibrated cost prices a record as its coefficients times its features, and "
          "refuses a prior that prices nothing or is not a number",
          "[calibration]") {
    const auto cost = bcl::calibrated_affine_quadratic(2.0, 3.0, 0.5);
    CHECK(cost(4.0) == 2.0 + 3.0 * 4.0 + 0.5 * 16.0);
    CHECK(cost.features(4.0) == std::array<double, 3>{1.0, 4.0, 16.0});
    CHECK(cost.prior() == std::array<double, 3>{2.0, 3.0, 0.5});
    CHECK_THROWS_WITH(bcl::calibrated_affine_quadratic(0.0, 0.0, 0.0), Contains("every prior"));
    CHECK_THROWS_WITH(bcl::calibrated_affine_quadratic(0.0, -1.0, 1.0), Contains("coefficient 1"));
    CHECK_THROWS_AS(bcl::calibrated_affine_quadratic(std::nan(""), 1.0, 0.0), bcl::error);
    STATIC_REQUIRE(bcl::calibratable_estimator<calibrated_estimator, double>);
    STATIC_REQUIRE_FALSE(bcl::calibratable_estimator<cost_of, rec>);
}

TEST_CASE("The non-negative minimum satisfies the optimality conditions on random problems",
          "[calibration]") {
    // z >= 0 minimizes z^T m z - 2 g^T z exactly when, with the gradient 2(m z - g): every
    // positive z_i has a zero gradient and every zero one a gradient >= 0.
    std::mt19937_64 gen(5);
    std::normal_distribution<double> normal;
    for (int trial = 0; trial < 500; ++trial) {
        constexpr std::size_t v = 4;
        std::array<double, v * v> root{};
        for (double& x : root) x = normal(gen);
        std::array<double, v * v> m{};
        for (std::size_t i = 0; i < v; ++i)
            for (std::size_t j = 0; j < v; ++j)
                for (std::size_t k = 0; k < v; ++k)
                    m[i * v + j] += root[k * v + i] * root[k * v + j];
        for (std::size_t i = 0; i < v; ++i) m[i * v + i] += 0.1;
        std::array<double, v> g{};
        for (double& x : g) x = normal(gen);
        const std::array<double, v> z = bcl::detail::nonnegative_minimum<v>(m, g);
        for (std::size_t i = 0; i < v; ++i) {
            INFO("trial " << trial << ", variable " << i);
            double gradient = -g[i];
            for (std::size_t j = 0; j < v; ++j) gradient += m[i * v + j] * z[j];
            CHECK(z[i] >= 0.0);
            if (z[i] > 0.0)
                CHECK(std::abs(gradient) < 1e-8 * (1.0 + std::abs(g[i])));
            else
                CHECK(gradient > -1e-8 * (1.0 + std::abs(g[i])));
        }
    }
}

TEST_CASE("Exact times of a known model: the fit recovers the model, whatever the prior",
          "[calibration]") {
    const std::vector<double> lengths = lognormal_lengths(40000, 1);
    const time_model truth{3.0, 1e-3, 2e-6};
    for (const time_model prior :
         {time_model{0.0, 1.0, 0.0}, time_model{0.0, 1.0, 1.0 / 24576}, time_model{1, 0, 0}}) {
        run_settings s;
        s.prior = prior;
        s.truth = truth;
        const bcl::calibration_summary<3> fit = run_calibrated(lengths, s).summary;
        INFO("prior " << prior.a << " " << prior.b << " " << prior.c);
        REQUIRE(fit.has_fit);
        CHECK(relative_error(fit.fitted[0], truth.a) < 0.01);
        CHECK(relative_error(fit.fitted[1], truth.b) < 0.01);
        CHECK(relative_error(fit.fitted[2], truth.c) < 0.01);
        CHECK(fit.times_observed == (lengths.size() + 15) / 16);
        CHECK(fit.times_downweighted == 0);
    }
}

TEST_CASE("A term the truth lacks is fitted as zero, never negative", "[calibration]") {
    const std::vector<double> lengths = lognormal_lengths(20000, 2);
    run_settings s;
    s.prior = {0.0, 1.0, 1e-3}; // attention-heavy prior
    s.truth = {0.0, 1e-3, 0.0}; // linear truth
    s.noise = 0.05;
    const bcl::calibration_summary<3> fit = run_calibrated(lengths, s).summary;
    for (const double c : fit.fitted) CHECK(c >= 0.0);
    for (const double c : fit.applied) CHECK(c >= 0.0);
    // The quadratic term's share of a typical record's cost is negligible.
    CHECK(fit.fitted[2] * 400.0 < 0.02 * fit.fitted[1]);
    CHECK(relative_error(fit.fitted[1], 1e-3) < 0.1);
}

TEST_CASE("The applied coefficients keep the prior's units: a record of mean features costs what "
          "the prior says",
          "[calibration]") {
    const std::vector<double> lengths = lognormal_lengths(20000, 3);
    run_settings s;
    s.prior = {0.0, 1.0, 0.0};
    s.truth = {3.0, 1e-3, 2e-6}; // seconds: a different unit altogether
    const bcl::calibration_summary<3> fit = run_calibrated(lengths, s).summary;
    double mean_length = 0.0;
    double mean_square = 0.0;
    for (const double x : lengths) {
        mean_length += x / static_cast<double>(lengths.size());
        mean_square += x * x / static_cast<double>(lengths.size());
    }
    const double applied_mean =
        fit.applied[0] + fit.applied[1] * mean_length + fit.applied[2] * mean_square;
    CHECK(relative_error(applied_mean, mean_length) < 1e-9);
    // And the shape is the fit's.
    CHECK(relative_error(fit.applied[2] / fit.applied[1], fit.fitted[2] / fit.fitted[1]) < 1e-9);
}

TEST_CASE("A few outlier times (a pause, a checkpoint) barely move the fit", "[calibration]") {
    const std::vector<double> lengths = lognormal_lengths(40000, 4);
    run_settings s;
    s.truth = {3.0, 1e-3, 2e-6};
    s.noise = 0.02;
    s.opt.calibration.forgetting = 1.0;
    s.spike_every = 50; // every 50th batch takes 20 times as long
    s.spike = 20.0;
    const bcl::calibration_summary<3> robust = run_calibrated(lengths, s).summary;
    CHECK(robust.times_downweighted >= robust.times_observed / 50 - 2);
    CHECK(relative_error(robust.fitted[2], s.truth.c) < 0.1);
    CHECK(relative_error(robust.fitted[1], s.truth.b) < 0.3);
    // Without down-weighting (a threshold no error reaches), the spikes drag the fit far off.
    s.opt.calibration.outlier_threshold = 1e9;
    const bcl::calibration_summary<3> plain = run_calibrated(lengths, s).summary;
    CHECK(plain.times_downweighted == 0);
    CHECK(relative_error(plain.fitted[0] + plain.fitted[1] * 400 + plain.fitted[2] * 160000,
                         s.truth(400.0)) > 0.2);
}

TEST_CASE("Calibrated batches keep the contract, and the same records and times give the same "
          "batches",
          "[calibration]") {
    for (const auto& dist : all_distributions())
        for (const auto policy : {bcl::lookahead_policy::tumbling, bcl::lookahead_policy::sliding})
            for (const auto batching : {bcl::batch_cost::packed, bcl::batch_cost::padded}) {
                INFO(dist.name << " policy " << static_cast<int>(policy) << " batching "
                               << static_cast<int>(batching));
                const cost_list costs = dist.generate(1000, 7);
                run_settings s;
                s.truth = {1.0, 1.0, 0.01};
                s.noise = 0.1;
                s.opt = bcl::options{.batch_size = 7, .lookahead = 4, .policy = policy};
                s.opt.batching = batching;
                const calibrated_run a = run_calibrated(costs, s);
                const calibrated_run again = run_calibrated(costs, s);
                CHECK(a.batches == again.batches);
                // Every record exactly once (as a multiset of values), every batch of B but the
                // last.
                std::vector<double> out;
                for (std::size_t j = 0; j < a.batches.size(); ++j) {
                    CHECK(a.batches[j].size() == (j + 1 < a.batches.size() ? 7U : 1000 % 7));
                    out.insert(out.end(), a.batches[j].begin(), a.batches[j].end());
                }
                std::vector<double> in = costs;
                std::sort(in.begin(), in.end());
                std::sort(out.begin(), out.end());
                CHECK(in == out);
            }
}

TEST_CASE("Refitted coefficients apply from the next round on, never within a round",
          "[calibration]") {
    const bcl::options opt{
        .batch_size = 4, .lookahead = 4, .policy = bcl::lookahead_policy::tumbling};
    calibrating_balancer b{bcl::calibrated_affine_quadratic(0.0, 1.0, 0.0), opt};
    const std::vector<double> lengths = lognormal_lengths(64, 6);
    std::size_t pushed = 0;
    for (; pushed < 16; ++pushed) b.push(double{lengths[pushed]});
    std::uint64_t emitted = 0;
    while (auto batch = b.pop()) {
        double t = 0.0;
        for (const double x : *batch) t += x * x; // purely quadratic truth
        b.observe(emitted++, t);
        // Within the round the coefficients in force are the prior's.
        CHECK(b.calibration().applied == std::array<double, 3>{0.0, 1.0, 0.0});
    }
    CHECK_FALSE(b.calibration().has_fit);
    // The next round runs (the buffer fills) and the fit applies once it has.
    for (; pushed < 32; ++pushed) b.push(double{lengths[pushed]});
    REQUIRE(b.pop());
    CHECK(b.calibration().has_fit);
    CHECK(b.calibration().applied[2] > 0.0);
}

TEST_CASE("Bad times are a bcl::error that changes nothing", "[calibration]") {
    bcl::options opt{.batch_size = 4, .lookahead = 2};
    opt.calibration.horizon = 3;
    calibrating_balancer b{bcl::calibrated_affine_quadratic(0.0, 1.0, 0.0), opt};
    const std::vector<double> lengths = lognormal_lengths(200, 8);
    std::uint64_t emitted = 0;
    for (const double x : lengths) {
        b.push(double{x});
        while (b.pop()) ++emitted;
    }
    REQUIRE(emitted >= 6);
    b.observe(emitted - 1, 1.0);
    const std::string before = b.save().to_bytes();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double inf = std::numeric_limits<double>::infinity();
    CHECK_THROWS_WITH(b.observe(emitted - 2, -1.0), Contains("finite and >= 0"));
    CHECK_THROWS_WITH(b.observe(emitted - 2, nan), Contains("finite and >= 0"));
    CHECK_THROWS_WITH(b.observe(emitted - 2, inf), Contains("finite and >= 0"));
    CHECK_THROWS_WITH(b.observe(emitted, 1.0), Contains("has not been emitted"));
    CHECK_THROWS_WITH(b.observe(emitted + 1000, 1.0), Contains("has not been emitted"));
    CHECK_THROWS_WITH(b.observe(emitted - 4, 1.0), Contains("older than the calibration horizon"));
    CHECK_THROWS_WITH(b.observe(emitted - 1, 1.0), Contains("already observed"));
    CHECK(b.save().to_bytes() == before);
    // A good time is still taken afterwards, late and out of order.
    b.observe(emitted - 3, 2.0);
    b.observe(emitted - 2, 0.0);
    CHECK(b.calibration().times_observed == 3);
}

TEST_CASE("A calibrating balancer resumes exactly mid-fit, with times still to come",
          "[calibration]") {
    const std::vector<double> lengths = lognormal_lengths(3000, 9);
    const time_model truth{1.0, 1e-3, 3e-6};
    for (const auto policy : {bcl::lookahead_policy::tumbling, bcl::lookahead_policy::sliding})
        for (const std::size_t save_after : {0UL, 5UL, 130UL, 1000UL, 2999UL}) {
            INFO("policy " << static_cast<int>(policy) << ", saved after " << save_after);
            const bcl::options opt{.batch_size = 8, .lookahead = 4, .policy = policy};
            // Times arrive two batches late, so some are always pending at the save.
            auto drive = [&](calibrating_balancer& b, std::size_t from, std::size_t to,
                             std::vector<std::vector<double>>& out, std::vector<double>& times) {
                auto emit = [&](std::span<double> batch) {
                    double t = 0.0;
                    for (const double x : batch) t += truth(x);
                    out.emplace_back(batch.begin(), batch.end());
                    times.push_back(t);
                    if (out.size() >= 3) b.observe(out.size() - 3, times[out.size() - 3]);
                };
                for (std::size_t i = from; i < to; ++i) {
                    b.push(double{lengths[i]});
                    while (auto batch = b.pop()) emit(*batch);
                }
                if (to == lengths.size()) {
                    b.finish();
                    while (auto batch = b.pop()) emit(*batch);
                }
            };
            const auto cost = bcl::calibrated_affine_quadratic(0.0, 1.0, 0.0);
            std::vector<std::vector<double>> whole;
            std::vector<double> whole_times;
            calibrating_balancer uninterrupted{cost, opt};
            drive(uninterrupted, 0, lengths.size(), whole, whole_times);

            std::vector<std::vector<double>> parts;
            std::vector<double> part_times;
            calibrating_balancer first{cost, opt};
            drive(first, 0, save_after, parts, part_times);
            const calibrating_balancer::state saved = first.save();
            const auto again =
                calibrating_balancer::state::from_bytes(saved.to_bytes(), saved.pending);
            calibrating_balancer second{cost, opt, again};
            CHECK(second.save().to_bytes() == saved.to_bytes());
            drive(second, save_after, lengths.size(), parts, part_times);
            CHECK(parts == whole);
            CHECK(second.calibration().fitted == uninterrupted.calibration().fitted);
            CHECK(second.calibration().applied == uninterrupted.calibration().applied);
        }
}

TEST_CASE("A state is refused by a balancer that calibrates differently", "[calibration]") {
    const bcl::options opt{.batch_size = 2, .lookahead = 2};
    calibrating_balancer calibrating{bcl::calibrated_affine_quadratic(0.0, 1.0, 0.0), opt};
    calibrating.push(3.0);
    bcl::balancer<double, bcl::affine_quadratic_cost<std::identity>> plain{
        bcl::affine_quadratic(0, 1, 0), opt};
    plain.push(3.0);
    const auto from_calibrating = calibrating.save();
    const auto from_plain = plain.save();
    using plain_t = decltype(plain);
    CHECK_THROWS_WITH(
        plain_t(bcl::affine_quadratic(0, 1, 0), opt,
                plain_t::state::from_bytes(from_calibrating.to_bytes(), from_calibrating.pending)),
        Contains("calibrated 3 features"));
    CHECK_THROWS_WITH(calibrating_balancer(bcl::calibrated_affine_quadratic(0.0, 1.0, 0.0), opt,
                                           calibrating_balancer::state::from_bytes(
                                               from_plain.to_bytes(), from_plain.pending)),
                      Contains("did not calibrate"));
}

TEST_CASE("Calibration from a wrong prior balances the true cost as well as the true model does",
          "[calibration]") {
    // Lengths whose true cost is mostly attention, balanced with a tokens-only prior. Shuffled
    // emission, so every batch aims at the same cost and the spread of true batch costs (its
    // coefficient of variation after the first thousand batches) measures the balance.
    std::mt19937_64 gen(10);
    std::lognormal_distribution<double> length(6.0, 0.7);
    std::vector<double> lengths(60000);
    for (double& x : lengths) x = std::round(length(gen)) + 1.0;
    const time_model truth{0.0, 1.0, 1e-2};
    auto spread = [&](const std::vector<std::vector<double>>& batches) {
        double sum = 0.0;
        double square = 0.0;
        std::size_t n = 0;
        for (std::size_t j = 1000; j + 1 < batches.size(); ++j) {
            double t = 0.0;
            for (const double x : batches[j]) t += truth(x);
            sum += t;
            square += t * t;
            ++n;
        }
        const double mean = sum / static_cast<double>(n);
        return std::sqrt(square / static_cast<double>(n) - mean * mean) / mean;
    };
    bcl::options opt{.batch_size = 16, .lookahead = 8, .emission = bcl::emission_order::shuffled};
    opt.policy = bcl::lookahead_policy::tumbling;
    auto balanced_by = [&](auto cost) {
        bcl::balancer<double, decltype(cost)> b{cost, opt};
        std::vector<std::vector<double>> batches;
        for (const double x : lengths) {
            b.push(double{x});
            while (auto batch = b.pop()) batches.emplace_back(batch->begin(), batch->end());
        }
        return spread(batches);
    };
    run_settings calibrated;
    calibrated.truth = truth;
    calibrated.noise = 0.05;
    calibrated.opt = opt;
    const double with_fit = spread(run_calibrated(lengths, calibrated).batches);
    const double prior_only = balanced_by(bcl::affine_quadratic(0.0, 1.0, 0.0));
    const double true_model = balanced_by(bcl::affine_quadratic(truth.a, truth.b, truth.c));
    CHECK(true_model < 0.9 * prior_only); // the shape matters here
    CHECK(std::abs(with_fit - true_model) < 0.02 * true_model);
}

TEST_CASE("Times and priors at the edge of the double range never leave the fit non-finite, the "
          "coefficients all zero or a state that cannot be restored",
          "[calibration]") {
    // Found by bcl-fuzz-calibration: a tiny time once weighted by 1/time^2 = infinity; a
    // denormal prior once rescaled the fit to all zeros; a refit once pushed the remembered
    // heavy records above bcl::max_estimate.
    const std::vector<double> times = {1e-300, 5e-324, 1e-10, 1.0, 1e10, 1e300, 0.0};
    const std::vector<std::array<double, 3>> priors = {
        {1.0, 0.0, 0.0}, {5e-324, 0.0, 0.0}, {0.0, 1e100, 0.0}, {1e-300, 1e-300, 1e100}};
    for (const auto& prior : priors)
        for (const double time : times) {
            INFO("prior " << prior[0] << " " << prior[1] << " " << prior[2] << ", time " << time);
            const bcl::options opt{.batch_size = 1, .lookahead = 1};
            const auto cost = bcl::calibrated_affine_quadratic(prior[0], prior[1], prior[2]);
            calibrating_balancer b{cost, opt};
            std::uint64_t emitted = 0;
            for (const double length : {3.0, 1e6, 0.0, 7.0, 2.0}) {
                b.push(double{length});
                while (b.pop()) b.observe(emitted++, time);
            }
            const bcl::calibration_summary<3> fit = b.calibration();
            bool any = false;
            for (std::size_t j = 0; j < 3; ++j) {
                CHECK(std::isfinite(fit.fitted[j]));
                CHECK(fit.applied[j] >= 0.0);
                CHECK(fit.applied[j] <= 1e300);
                any = any || fit.applied[j] > 0.0;
            }
            CHECK(any);
            const calibrating_balancer::state saved = b.save();
            CHECK_NOTHROW(calibrating_balancer(
                cost, opt,
                calibrating_balancer::state::from_bytes(saved.to_bytes(), saved.pending)));
        }
}

namespace {

using fit3 = bcl::detail::cost_fit<3>;
using vec3 = std::array<double, 3>;

enum class update { ignored, refused, kept };

/// A time added to the fit's numbers the plain way: the whole set copied, the copy updated, and
/// the copy kept only if every number in it is finite. The rules restated from cost_fit's
/// documentation: weight 1 / (predicted time)^2 (the time itself while there is no fit), a Huber
/// factor beyond outlier_threshold typical errors (never below 1%), the typical error following
/// each time at rate 0.05 (an error counted at most twice the limit), everything faded by
/// `forgetting` per newer time.
update copy_update_keep_if_finite(fit3::numbers& n, const bcl::calibration_options& opt,
                                  const vec3& x, double y) {
    ++n.observed;
    double predicted = y;
    if (n.has_fit) {
        predicted = 0.0;
        for (std::size_t j = 0; j < 3; ++j) predicted += n.fitted[j] * x[j];
    }
    const double scale = predicted > 0.0 && predicted < HUGE_VAL ? predicted : y;
    if (!(scale > 0.0)) return update::ignored;
    double weight = 1.0 / (scale * scale);
    double error_scale = n.error_scale;
    bool outlier = false;
    if (n.has_fit) {
        const double error = std::abs(y - predicted) / scale;
        const double limit = opt.outlier_threshold * std::max(n.error_scale, 0.01);
        outlier = error > limit;
        if (outlier) weight *= limit / error;
        error_scale += 0.05 * (std::min(error, 2.0 * limit) - error_scale);
    }
    fit3::numbers next = n;
    bool finite = std::isfinite(weight) && std::isfinite(error_scale);
    for (std::size_t i = 0; i < 3; ++i) {
        for (std::size_t j = 0; j < 3; ++j) {
            double& a = next.normal_matrix[i * 3 + j];
            a = opt.forgetting * a + weight * x[i] * x[j];
            finite = finite && std::isfinite(a);
        }
        double& b = next.normal_vector[i];
        b = opt.forgetting * b + weight * y * x[i];
        finite = finite && std::isfinite(b);
    }
    next.effective_count = opt.forgetting * next.effective_count + 1.0;
    next.error_scale = error_scale;
    next.downweighted += outlier ? 1 : 0;
    next.stale = true;
    if (!finite) return update::refused;
    n = next;
    return update::kept;
}

/// The first number in which two fits differ in any bit, or "" when they are the same.
std::string first_fit_difference(const fit3::numbers& a, const fit3::numbers& b) {
    const auto same = [](double u, double v) {
        return std::bit_cast<std::uint64_t>(u) == std::bit_cast<std::uint64_t>(v);
    };
    for (std::size_t i = 0; i < 9; ++i)
        if (!same(a.normal_matrix[i], b.normal_matrix[i]))
            return "normal_matrix[" + std::to_string(i) + "]";
    for (std::size_t i = 0; i < 3; ++i) {
        if (!same(a.normal_vector[i], b.normal_vector[i]))
            return "normal_vector[" + std::to_string(i) + "]";
        if (!same(a.fitted[i], b.fitted[i])) return "fitted[" + std::to_string(i) + "]";
        if (!same(a.feature_totals[i], b.feature_totals[i]))
            return "feature_totals[" + std::to_string(i) + "]";
    }
    if (!same(a.effective_count, b.effective_count)) return "effective_count";
    if (!same(a.error_scale, b.error_scale)) return "error_scale";
    if (a.feature_records != b.feature_records) return "feature_records";
    if (a.observed != b.observed) return "observed";
    if (a.downweighted != b.downweighted) return "downweighted";
    if (a.has_fit != b.has_fit) return "has_fit";
    if (a.stale != b.stale) return "stale";
    return "";
}

} // namespace

TEST_CASE("A time updates the fit bit for bit as copying, updating and keeping the copy only if "
          "finite would, and a time that would leave a number non-finite changes nothing",
          "[calibration]") {
    std::mt19937_64 gen(2718);
    std::lognormal_distribution<double> length(6.0, 1.0);
    std::lognormal_distribution<double> noise(0.0, 0.1);
    std::uniform_real_distribution<double> unit;
    const auto pick = [&gen](const auto& values) {
        return values[std::uniform_int_distribution<std::size_t>(0, values.size() - 1)(gen)];
    };
    constexpr double inf = std::numeric_limits<double>::infinity();
    constexpr double largest = std::numeric_limits<double>::max();
    const std::vector<double> edge_lengths = {1e-300, 1e150, 1e300};
    const std::vector<double> edge_times = {0.0, 5e-324, 1e-300, 1e300, largest};
    const std::vector<double> edge_features = {0.0, 5e-324, 1e-300, 1e150, 1e300, largest, inf};
    const std::vector<double> forgettings = {0.9, 0.99, 1.0};
    const std::vector<double> prior_weights = {0.0, 0.001, 1.0};
    const std::vector<double> thresholds = {0.5, 3.0};
    const std::vector<vec3> priors = {
        {0.0, 1.0, 0.0}, {1e-3, 2e-6, 1e-9}, {1e-300, 1e-300, 1e100}, {5e-324, 0.0, 0.0}};
    const time_model truth{1e-3, 2e-6, 1e-9};

    // Each sequence starts from a fresh fit, so tiny times meet a fit that has none yet (weight
    // 1 / time^2 overflows) as well as one that has.
    std::size_t refused_tiny = 0, refused_huge = 0, refused_other = 0, kept = 0, kept_fitted = 0;
    std::size_t refits = 0;
    for (int sequence = 0; sequence < 400; ++sequence) {
        bcl::calibration_options opt;
        opt.forgetting = pick(forgettings);
        opt.prior_weight = pick(prior_weights);
        opt.outlier_threshold = pick(thresholds);
        const vec3 prior = pick(priors);
        fit3 fit{opt, prior};
        fit3::numbers reference = fit.save();
        for (int step = 0; step < 200; ++step) {
            INFO("sequence " << sequence << ", step " << step);
            vec3 x{};
            for (int r = 0; r < 4; ++r) { // a batch of four records, each counted as pushed
                double l = std::round(length(gen)) + 1.0;
                if (unit(gen) < 0.01) l = pick(edge_lengths);
                const vec3 features{1.0, l, l * l};
                fit.count_record(features);
                for (std::size_t j = 0; j < 3; ++j) reference.feature_totals[j] += features[j];
                ++reference.feature_records;
                for (std::size_t j = 0; j < 3; ++j) x[j] += features[j];
            }
            double y = (truth.a * x[0] + truth.b * x[1] + truth.c * x[2]) * noise(gen);
            if (unit(gen) < 0.05)
                x[std::uniform_int_distribution<std::size_t>(0, 2)(gen)] = pick(edge_features);
            if (unit(gen) < 0.15) y = pick(edge_times);

            const bool had_fit = reference.has_fit;
            const update what = copy_update_keep_if_finite(reference, opt, x, y);
            fit.add(x, y);
            REQUIRE(first_fit_difference(fit.save(), reference) == "");
            if (what == update::refused) {
                if (y <= 1e-300)
                    ++refused_tiny;
                else if (y >= 1e300)
                    ++refused_huge;
                else
                    ++refused_other;
            }
            if (what == update::kept) ++(had_fit ? kept_fitted : kept);

            if (step % 8 == 7) { // a round boundary: both refit the same way
                fit3 refitted{opt, prior};
                refitted.restore(reference);
                vec3 want{-1.0, -1.0, -1.0}, got{-1.0, -1.0, -1.0};
                const bool reference_applied = refitted.refit(want);
                reference = refitted.save();
                REQUIRE(fit.refit(got) == reference_applied);
                refits += reference_applied ? 1 : 0;
                for (std::size_t j = 0; j < 3; ++j)
                    REQUIRE(std::bit_cast<std::uint64_t>(got[j]) ==
                            std::bit_cast<std::uint64_t>(want[j]));
                REQUIRE(first_fit_difference(fit.save(), reference) == "");
            }
        }
    }
    INFO("refused: " << refused_tiny << " tiny times, " << refused_huge << " huge times, "
                     << refused_other << " others; kept " << kept << " without a fit, "
                     << kept_fitted << " with one; " << refits << " refits applied");
    // The sequence reaches every branch: refusals of both kinds of edge times and of huge
    // features, and kept updates with and without a fit.
    CHECK(refused_tiny > 0);
    CHECK(refused_huge > 0);
    CHECK(refused_other > 0);
    CHECK(kept > 0);
    CHECK(kept_fitted > 0);
    CHECK(refits > 0);
}

TEST_CASE("Times that fall as the work grows fit to a constant, which is not applied: the "
          "balancer keeps balancing with the coefficients it had",
          "[calibration]") {
    // What a rank reporting the wrong times (1 / its batch time) does to its own balancer: the
    // non-negative fit can only be a constant, which tells no records apart.
    const std::vector<double> lengths = lognormal_lengths(20000, 3);
    run_settings hostile;
    hostile.truth = time_model{0.0, 1.0, 1.0 / 2048};
    hostile.inverted = true;
    const calibrated_run got = run_calibrated(lengths, hostile);
    REQUIRE(got.summary.has_fit);
    CHECK(got.summary.fitted[1] == 0.0);
    CHECK(got.summary.fitted[2] == 0.0);
    // In force: still a cost that grows with the length (the first fits, drawn to the prior's
    // shape while times are few, were applied; the constant ones after them were not).
    CHECK(got.summary.applied[1] > 0.9);
    // So its true batch costs vary as those of a balancer never told a time (applying the
    // constant makes them vary 7% more: 1.69 against 1.58).
    const auto true_cv = [&](const calibrated_run& run) {
        bcl::running_stats cv;
        for (const auto& batch : run.batches)
            if (batch.size() == 16) {
                double t = 0.0;
                for (const double length : batch) t += hostile.truth(length);
                cv.add(t);
            }
        return cv.cv();
    };
    run_settings silent = hostile;
    silent.silent = true;
    CHECK(true_cv(got) <= 1.01 * true_cv(run_calibrated(lengths, silent)));
}
