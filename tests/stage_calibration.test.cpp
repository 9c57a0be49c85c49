// bcl::stage_calibration (stage_calibration.hpp), as a specification: told each batch's summed
// features per stage and each stage's measured time, it fits every stage's coefficients on its
// own (the balancer's fit: non-negative, relative error, outliers down-weighted), so that times of
// one stage move that stage's fit and no other; exact times recover each stage's model and noisy
// ones come close. The coefficients in force are the fits times one scale, the same for both
// stages, so that the observed mean record costs, summed over stages, what the prior says: the
// ratio between the stages is the measured one. Until every stage has a fit the prior stays. The
// same reports in the same order give the same bits. Bad input is a bcl::error that leaves the
// object exactly as it was.

#include "support/case_count.hpp"
#include "support/distributions.hpp"
#include "support/error_message.hpp"

#include <bcl/calibrated_cost.hpp>
#include <bcl/error.hpp>
#include <bcl/multimodal_cost.hpp>
#include <bcl/options.hpp>
#include <bcl/stage_calibration.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace {

using bcl_test::bcl_error_message;
using Catch::Matchers::Contains;
using table = bcl::multimodal_cost::stage_table;
using times = bcl::stage_calibration::stage_times;

constexpr std::size_t vision = bcl::multimodal_cost::vision;
constexpr std::size_t language = bcl::multimodal_cost::language;

// A trainer's hidden per-stage model, in seconds: 2 ms an image, 2 us a patch, 0.2 ns a patch
// squared; 1 ms a record, 2 us a token, 0.1 ns a token squared. Each term is a fair share of a
// batch's time on the records below, so each is observable.
const table truth{{{2e-3, 2e-6, 2e-10}, {1e-3, 2e-6, 1e-10}}};

// The features of a micro-batch of `size` records of the docs/stages.md mix, roughly: 30% text
// alone, 55% one image (lognormal patches, median 1000), 15% two to four; text lognormal (median
// 300 tokens). Merge 4.
class workload {
public:
    explicit workload(std::uint64_t seed) : m_gen(seed) {}

    table next_batch(std::size_t size) {
        std::vector<std::vector<std::uint32_t>> patches(size);
        std::vector<bcl::multimodal_record> records(size);
        for (std::size_t i = 0; i < size; ++i) {
            const double u = bcl_test::unit_interval(m_gen);
            const std::uint64_t images =
                u < 0.3 ? 0 : (u < 0.85 ? 1 : bcl_test::uniform_integer(m_gen, 2, 4));
            for (std::uint64_t k = 0; k < images; ++k)
                patches[i].push_back(static_cast<std::uint32_t>(std::clamp(
                    1000.0 * std::exp(0.8 * bcl_test::standard_normal(m_gen)), 64.0, 16384.0)));
            const double text = 300.0 * std::exp(bcl_test::standard_normal(m_gen));
            records[i] = {static_cast<std::uint64_t>(std::clamp(text, 1.0, 16384.0)), patches[i]};
        }
        return bcl::multimodal_cost{}.batch_features(records);
    }

    // Lognormal multiplicative noise of relative size `sigma` (0: exact).
    double noisy(double seconds, double sigma) {
        return sigma > 0.0 ? seconds * std::exp(sigma * bcl_test::standard_normal(m_gen)) : seconds;
    }

private:
    std::mt19937_64 m_gen;
};

times true_times(const table& model, const table& x) {
    return bcl::multimodal_cost::price(model, x);
}

bcl::calibration_options remembering() {
    bcl::calibration_options o;
    o.forgetting = 0.999; // a model that does not drift: remember about a thousand batches
    return o;
}

double relative_error(double got, double want) {
    return std::abs(got - want) / std::abs(want);
}

// Every number the object reports, bit for bit.
bool same_state(const bcl::stage_calibration& a, const bcl::stage_calibration& b) {
    const auto sa = a.summary();
    const auto sb = b.summary();
    for (std::size_t s = 0; s < 2; ++s)
        if (sa[s].fitted != sb[s].fitted || sa[s].applied != sb[s].applied ||
            sa[s].times_observed != sb[s].times_observed ||
            sa[s].times_downweighted != sb[s].times_downweighted || sa[s].has_fit != sb[s].has_fit)
            return false;
    return a.estimator().coefficients() == b.estimator().coefficients() &&
           a.estimator().merge() == b.estimator().merge();
}

} // namespace

TEST_CASE("stage_calibration: before any time, the prior is in force", "[stage_calibration]") {
    const bcl::multimodal_cost prior{{.vision_per_image = 1.0, .merge = 2}};
    const bcl::stage_calibration cal{prior};
    CHECK(cal.estimator().coefficients() == prior.coefficients());
    CHECK(cal.estimator().merge() == 2);
    CHECK(cal.prior().coefficients() == prior.coefficients());
    for (std::size_t s = 0; s < 2; ++s) {
        const auto summary = cal.summary()[s];
        CHECK_FALSE(summary.has_fit);
        CHECK(summary.times_observed == 0);
        CHECK(summary.fitted == std::array<double, 3>{});
        CHECK(summary.applied == prior.coefficients()[s]);
    }
}

TEST_CASE("stage_calibration: exact times of each stage's model recover its coefficients",
          "[stage_calibration]") {
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
        workload w(seed);
        bcl::stage_calibration cal{bcl::multimodal_cost{}, remembering()};
        for (int b = 0; b < 1000; ++b) {
            const table x = w.next_batch(4);
            cal.observe(x, true_times(truth, x));
        }
        const auto summary = cal.summary();
        for (std::size_t s = 0; s < 2; ++s) {
            CHECK(summary[s].has_fit);
            CHECK(summary[s].times_observed == 1000);
            CHECK(summary[s].times_downweighted == 0);
            for (std::size_t j = 0; j < 3; ++j) {
                INFO("seed " << seed << ", stage " << s << ", coefficient " << j);
                // The prior's pull (0.001 batches' worth) is all that keeps it from exact.
                CHECK(relative_error(summary[s].fitted[j], truth[s][j]) < 1e-3);
            }
        }
    }
}

TEST_CASE("stage_calibration: noisy times recover every coefficient within 10% and predict "
          "batches within 1%",
          "[stage_calibration]") {
    // 2% lognormal timing noise, 3000 micro-batches of 4 records. Measured over seeds 1-5: the
    // largest error 3.4% (the language model's quadratic term, the smallest share of its time).
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
        workload w(seed);
        bcl::stage_calibration cal{bcl::multimodal_cost{}, remembering()};
        const std::size_t batches = bcl_test::random_cases(3000);
        for (std::size_t b = 0; b < batches; ++b) {
            const table x = w.next_batch(4);
            const times y = true_times(truth, x);
            cal.observe(x, {w.noisy(y[vision], 0.02), w.noisy(y[language], 0.02)});
        }
        const auto summary = cal.summary();
        for (std::size_t s = 0; s < 2; ++s)
            for (std::size_t j = 0; j < 3; ++j) {
                INFO("seed " << seed << ", stage " << s << ", coefficient " << j);
                CHECK(relative_error(summary[s].fitted[j], truth[s][j]) < 0.10);
            }
        // Fresh batches, priced by the fit against the truth.
        std::array<double, 2> error{};
        for (int b = 0; b < 500; ++b) {
            const table x = w.next_batch(4);
            const times want = true_times(truth, x);
            const times got =
                bcl::multimodal_cost::price({summary[0].fitted, summary[1].fitted}, x);
            for (std::size_t s = 0; s < 2; ++s)
                if (want[s] > 0.0) error[s] += relative_error(got[s], want[s]) / 500.0;
        }
        INFO("seed " << seed);
        CHECK(error[vision] < 0.01);
        CHECK(error[language] < 0.01);
    }
}

TEST_CASE("stage_calibration: the coefficients in force are both fits times one scale, so the "
          "observed mean record costs in all what the prior says",
          "[stage_calibration]") {
    workload w(3);
    const bcl::multimodal_cost prior;
    bcl::stage_calibration cal{prior};
    table totals{}; // the features of every observed batch, summed here
    for (int b = 0; b < 300; ++b) {
        const table x = w.next_batch(4);
        for (std::size_t s = 0; s < 2; ++s)
            for (std::size_t j = 0; j < 3; ++j) totals[s][j] += x[s][j];
        const times y = true_times(truth, x);
        cal.observe(x, {w.noisy(y[vision], 0.05), w.noisy(y[language], 0.05)});

        const auto summary = cal.summary();
        REQUIRE(summary[vision].has_fit);
        const double scale = summary[language].applied[1] / summary[language].fitted[1];
        for (std::size_t s = 0; s < 2; ++s)
            for (std::size_t j = 0; j < 3; ++j)
                REQUIRE(summary[s].applied[j] ==
                        Approx(summary[s].fitted[j] * scale).epsilon(1e-12).margin(1e-300));
        const times priced_prior = bcl::multimodal_cost::price(prior.coefficients(), totals);
        const times priced_applied =
            bcl::multimodal_cost::price(cal.estimator().coefficients(), totals);
        REQUIRE(priced_applied[0] + priced_applied[1] ==
                Approx(priced_prior[0] + priced_prior[1]).epsilon(1e-12));
    }
}

TEST_CASE("stage_calibration: the ratio between the stages is the measured one",
          "[stage_calibration]") {
    // The times follow the prior's shape in each stage, but the encoder is 3 times dearer against
    // the language model than the prior says. The coefficients in force keep the shapes and
    // learn the 3 (a rescaling per stage would hold each stage to the prior's share).
    const bcl::multimodal_cost prior;
    table model = prior.coefficients();
    for (double& c : model[vision]) c *= 3e-6;
    for (double& c : model[language]) c *= 1e-6;
    workload w(8);
    bcl::stage_calibration cal{prior, remembering()};
    for (int b = 0; b < 200; ++b) {
        const table x = w.next_batch(4);
        cal.observe(x, true_times(model, x));
    }
    const table& in_force = cal.estimator().coefficients();
    const double language_scale = in_force[language][1] / prior.coefficients()[language][1];
    CHECK(in_force[language][2] / prior.coefficients()[language][2] ==
          Approx(language_scale).epsilon(1e-3));
    for (const std::size_t j : {std::size_t{1}, std::size_t{2}}) {
        CHECK(in_force[vision][j] / prior.coefficients()[vision][j] ==
              Approx(3.0 * language_scale).epsilon(1e-3));
    }
    // Terms the prior and the times lack stay (near) 0.
    CHECK(in_force[vision][0] < 1e-6 * in_force[vision][1]);
    CHECK(in_force[language][0] < 1e-6 * in_force[language][1]);
}

TEST_CASE("stage_calibration: one stage's times move that stage's fit and no other",
          "[stage_calibration]") {
    // Three runs on the same batches and the same encoder times; the language model's times from
    // the truth, from a model with four times its attention term, and from the truth with a 20x
    // spike every 50th batch (a checkpoint step).
    table other = truth;
    other[language][2] *= 4.0;
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
        workload w(seed);
        bcl::stage_calibration base{bcl::multimodal_cost{}, remembering()};
        bcl::stage_calibration changed = base;
        bcl::stage_calibration spiked = base;
        for (int b = 0; b < 1500; ++b) {
            const table x = w.next_batch(4);
            const double encoder = w.noisy(true_times(truth, x)[vision], 0.02);
            const double lm_noise = w.noisy(1.0, 0.02);
            const double lm = true_times(truth, x)[language] * lm_noise;
            base.observe(x, {encoder, lm});
            changed.observe(x, {encoder, true_times(other, x)[language] * lm_noise});
            spiked.observe(x, {encoder, b % 50 == 49 ? 20.0 * lm : lm});
        }
        INFO("seed " << seed);
        const auto a = base.summary();
        for (const auto& run : {changed.summary(), spiked.summary()}) {
            // The encoder's fit: the same bits.
            CHECK(run[vision].fitted == a[vision].fitted);
            CHECK(run[vision].times_downweighted == a[vision].times_downweighted);
            // Its coefficients in force differ only by the one scale both stages share.
            const double ratio = run[vision].applied[1] / a[vision].applied[1];
            CHECK(run[vision].applied[2] / a[vision].applied[2] == Approx(ratio).epsilon(1e-12));
        }
        CHECK(relative_error(changed.summary()[language].fitted[2], other[language][2]) < 0.1);
        CHECK(relative_error(a[language].fitted[2], truth[language][2]) < 0.1);
        // The spikes are down-weighted: the fit stays near the truth.
        CHECK(spiked.summary()[language].times_downweighted >= 30);
        for (std::size_t j = 0; j < 3; ++j)
            CHECK(relative_error(spiked.summary()[language].fitted[j], truth[language][j]) < 0.1);
    }
}

TEST_CASE("stage_calibration: until every stage has a fit, the prior stays in force",
          "[stage_calibration]") {
    // Batches of text alone: no encoder features and no encoder time. The language model is
    // fitted, the encoder cannot be, and nothing is applied (the two stages share one scale).
    const bcl::multimodal_cost prior;
    bcl::stage_calibration cal{prior};
    for (int b = 0; b < 20; ++b) {
        const table x{{{0.0, 0.0, 0.0}, {4.0, 1000.0 + b, 400000.0 + 10.0 * b}}};
        cal.observe(x, true_times(truth, x));
    }
    CHECK(cal.summary()[language].has_fit);
    CHECK_FALSE(cal.summary()[vision].has_fit);
    CHECK(cal.summary()[vision].times_observed == 20);
    CHECK(cal.estimator().coefficients() == prior.coefficients());
    // The first batch with an image fits the encoder, and the fits apply.
    const table x{{{1.0, 1000.0, 1e6}, {4.0, 1250.0, 450000.0}}};
    cal.observe(x, true_times(truth, x));
    CHECK(cal.summary()[vision].has_fit);
    CHECK(cal.estimator().coefficients() != prior.coefficients());
}

TEST_CASE("stage_calibration: the same reports in the same order give the same bits",
          "[stage_calibration]") {
    // What lets every rank compute the same global plan: each observes every rank's reports.
    workload w(12);
    bcl::stage_calibration a{bcl::multimodal_cost{}};
    bcl::stage_calibration b{bcl::multimodal_cost{}};
    for (int i = 0; i < 200; ++i) {
        const table x = w.next_batch(3);
        const times y = true_times(truth, x);
        const times noisy{w.noisy(y[0], 0.1), w.noisy(y[1], 0.1)};
        a.observe(x, noisy);
        b.observe(x, noisy);
        REQUIRE(same_state(a, b));
    }
}

TEST_CASE("stage_calibration: the span form takes 6 features and 2 times, as the array form",
          "[stage_calibration]") {
    workload w(4);
    bcl::stage_calibration by_array{bcl::multimodal_cost{}};
    bcl::stage_calibration by_span{bcl::multimodal_cost{}};
    for (int i = 0; i < 50; ++i) {
        const table x = w.next_batch(4);
        const times y = true_times(truth, x);
        by_array.observe(x, y);
        const std::vector<double> flat{x[0][0], x[0][1], x[0][2], x[1][0], x[1][1], x[1][2]};
        const std::vector<double> seconds{y[0], y[1]};
        by_span.observe(flat, seconds);
    }
    CHECK(same_state(by_array, by_span));
}

TEST_CASE("stage_calibration: bad input is a bcl::error naming it, and changes nothing",
          "[stage_calibration]") {
    const double inf = std::numeric_limits<double>::infinity();
    const double nan = std::nan("");
    workload w(6);
    bcl::stage_calibration cal{bcl::multimodal_cost{}};
    for (int i = 0; i < 30; ++i) {
        const table x = w.next_batch(4);
        cal.observe(x, true_times(truth, x));
    }
    const bcl::stage_calibration before = cal;
    const table good = w.next_batch(4);
    const times fine = true_times(truth, good);

    const auto refused = [&](auto&& call) {
        const std::string message = bcl_error_message(call);
        CHECK(same_state(cal, before));
        return message;
    };
    SECTION("a time negative, not a number or infinite, naming the stage") {
        CHECK_THAT(refused([&] {
                       cal.observe(good, {-1.0, fine[1]});
                   }),
                   Contains("bcl::stage_calibration::observe: the vision encoder's time is -1") &&
                       Contains("a time must be finite and >= 0"));
        CHECK_THAT(refused([&] {
                       cal.observe(good, {fine[0], nan});
                   }),
                   Contains("the language model's time is nan"));
        CHECK_THAT(refused([&] {
                       cal.observe(good, {fine[0], inf});
                   }),
                   Contains("the language model's time is inf"));
        CHECK_THAT(refused([&] {
                       cal.observe(good, {-inf, fine[1]});
                   }),
                   Contains("the vision encoder's time is -inf"));
    }
    SECTION("a feature negative, not finite or above bcl::max_estimate, naming stage and feature") {
        table bad = good;
        bad[vision][2] = -4.0;
        CHECK_THAT(refused([&] { cal.observe(bad, fine); }),
                   Contains("the vision encoder's feature 2 is -4") &&
                       Contains("at most bcl::max_estimate"));
        bad = good;
        bad[language][1] = nan;
        CHECK_THAT(refused([&] { cal.observe(bad, fine); }),
                   Contains("the language model's feature 1 is nan"));
        bad = good;
        bad[language][0] = 1e121;
        CHECK_THAT(refused([&] { cal.observe(bad, fine); }),
                   Contains("the language model's feature 0 is 1e+121"));
    }
    SECTION("a bad language model after a good encoder: the encoder's fit is not touched either") {
        table bad = good;
        bad[language][2] = inf;
        CHECK_THAT(refused([&] { cal.observe(bad, fine); }),
                   Contains("the language model's feature 2 is inf"));
    }
    SECTION("features or times of the wrong stage count") {
        const std::vector<double> six(6, 1.0);
        const std::vector<double> two{1.0, 1.0};
        CHECK_THAT(refused([&] { cal.observe(std::vector<double>(3, 1.0), two); }),
                   Contains("3 features; a batch has 3 a stage, 6 for 2 stages"));
        CHECK_THAT(refused([&] { cal.observe(std::vector<double>(9, 1.0), two); }),
                   Contains("9 features"));
        CHECK_THAT(refused([&] { cal.observe(six, std::vector<double>{1.0}); }),
                   Contains("1 times for 2 stages"));
        CHECK_THAT(refused([&] { cal.observe(six, std::vector<double>(3, 1.0)); }),
                   Contains("3 times for 2 stages"));
        CHECK_THAT(refused([&] { cal.observe(std::span<const double>{}, two); }),
                   Contains("0 features"));
    }
    // After any of these, it goes on exactly as a copy that never saw them.
    bcl::stage_calibration twin = before;
    for (int i = 0; i < 20; ++i) {
        const table x = w.next_batch(4);
        const times y = true_times(truth, x);
        cal.observe(x, y);
        twin.observe(x, y);
    }
    CHECK(same_state(cal, twin));
}

TEST_CASE("stage_calibration: options out of range, or a prior stage that costs nothing, are a "
          "bcl::error",
          "[stage_calibration]") {
    const bcl::multimodal_cost prior;
    bcl::calibration_options o;
    o.forgetting = 0.0;
    CHECK_THAT(bcl_error_message([&] { (void)bcl::stage_calibration(prior, o); }),
               Contains("calibration.forgetting must be in (0, 1]"));
    o = {};
    o.outlier_threshold = -1.0;
    CHECK_THAT(bcl_error_message([&] { (void)bcl::stage_calibration(prior, o); }),
               Contains("calibration.outlier_threshold"));
    o = {};
    o.prior_weight = std::nan("");
    CHECK_THAT(bcl_error_message([&] { (void)bcl::stage_calibration(prior, o); }),
               Contains("calibration.prior_weight"));
    const bcl::multimodal_cost free_encoder{
        {.vision_per_image = 0.0, .vision_per_patch = 0.0, .vision_per_patch_squared = 0.0}};
    CHECK_THAT(bcl_error_message([&] { (void)bcl::stage_calibration(free_encoder); }),
               Contains("bcl::stage_calibration: the prior's vision encoder coefficients are all "
                        "0"));
    const bcl::multimodal_cost free_language{
        {.language_per_token = 0.0, .language_per_token_squared = 0.0}};
    CHECK_THAT(bcl_error_message([&] { (void)bcl::stage_calibration(free_language); }),
               Contains("the prior's language model coefficients are all 0"));
}
