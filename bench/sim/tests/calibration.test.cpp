// Cost calibration in the simulator (calibration.hpp, --true-cost, --drift, --calibrate): the
// flags' values parse or are refused with a reason, a true cost equal to the estimate changes
// nothing, the metrics follow the true cost in force at each step, and a calibrated balancer fed
// noise-free times recovers the true model. Expected numbers are derived in the comments.

#include "calibration.hpp"

#include "cost_and_cap.hpp"
#include "sim_test_support.hpp"
#include "simulate.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

using Catch::Matchers::Contains;

using bcl_sim::cost_model;
using bcl_sim::sim_config;

namespace {

[[nodiscard]] cost_model affine(double a, double b, double c) {
    return {a, b, c, {}};
}

} // namespace

TEST_CASE("calibration: --drift and --true-cost values parse or say what is wrong",
          "[sim][calibration]") {
    const bcl_sim::drift_spec d = bcl_sim::parse_drift("1000:affine:a=2,b=1,c=8e-5");
    CHECK(d.step == 1000);
    CHECK(d.model.a == 2.0);
    CHECK(d.model.b == 1.0);
    CHECK(d.model.c == 8e-5);

    CHECK_THROWS_WITH(bcl_sim::parse_drift("affine:c=1"), Contains("the step is not a number"));
    CHECK_THROWS_WITH(bcl_sim::parse_drift("500"), Contains("--drift 500: no step"));
    CHECK_THROWS_WITH(bcl_sim::parse_drift("0:affine"), Contains("a whole number >= 1"));
    CHECK_THROWS_WITH(bcl_sim::parse_drift("12.5:affine"), Contains("a whole number >= 1"));
    CHECK_THROWS_WITH(bcl_sim::parse_drift("10:cubic:a=1"),
                      Contains("--drift cubic:a=1: unknown cost model 'cubic'"));
    CHECK_THROWS_WITH(bcl_sim::parse_drift("10:affine:c=-1"), Contains("must be >= 0"));
    CHECK_THROWS_WITH(bcl_sim::parse_cost("affine:d=1", "--true-cost"),
                      Contains("--true-cost affine:d=1"));
}

TEST_CASE("calibration: validate refuses a noise, drift or prior that cannot be",
          "[sim][calibration]") {
    sim_config cfg;
    cfg.steps = 100;
    cfg.time_noise = -0.1;
    CHECK_THROWS_WITH(bcl_sim::validate(cfg), Contains("--time-noise must be a number from 0"));
    cfg.time_noise = std::nan("");
    CHECK_THROWS_WITH(bcl_sim::validate(cfg), Contains("--time-noise"));
    cfg.time_noise = 0.05;
    cfg.drift = bcl_sim::drift_spec{100, affine(0, 1, 0)}; // steps are 0..99
    CHECK_THROWS_WITH(bcl_sim::validate(cfg), Contains("the run has only 100 steps"));
    cfg.drift->step = 99;
    CHECK_NOTHROW(bcl_sim::validate(cfg));
    cfg.calibrate = true;
    cfg.cost = affine(0, 0, 0);
    CHECK_THROWS_WITH(bcl_sim::validate(cfg), Contains("--calibrate: the prior"));
    cfg.calibrate = false;
    cfg.cost = affine(0, 1, 0);
    cfg.window = 101;
    CHECK_THROWS_WITH(bcl_sim::validate(cfg), Contains("--window 101"));
}

TEST_CASE("calibration: the schedule switches model at the drift step", "[sim][calibration]") {
    const bcl_sim::cost_schedule s(affine(0, 1, 0), bcl_sim::drift_spec{5, affine(0, 1, 0.01)});
    CHECK(s.at(0)(100.0) == 100.0);
    CHECK(s.at(4)(100.0) == 100.0);
    CHECK(s.at(5)(100.0) == 200.0); // 100 + 0.01 * 100^2
    CHECK(s.at(1000)(100.0) == 200.0);
    const bcl_sim::cost_schedule fixed(affine(1, 2, 0));
    CHECK(fixed.at(123456)(10.0) == 21.0);
}

TEST_CASE("calibration: time noise is exp(N(0, sigma)), repeatable, per rank",
          "[sim][calibration]") {
    CHECK(bcl_sim::time_noise_factor(1, 0, 7, 0.0) == 1.0);
    CHECK(bcl_sim::time_noise_factor(1, 3, 7, 0.2) == bcl_sim::time_noise_factor(1, 3, 7, 0.2));
    CHECK(bcl_sim::time_noise_factor(1, 3, 7, 0.2) != bcl_sim::time_noise_factor(1, 4, 7, 0.2));
    // The log of the factor is normal with mean 0 and standard deviation sigma: over n = 20000
    // draws the sample mean is within 4 standard errors (4 * 0.2 / sqrt(n) = 0.0057) of 0, and
    // the sample deviation within 3% of sigma.
    constexpr std::size_t n = 20000;
    double sum = 0.0;
    double squares = 0.0;
    for (std::uint64_t i = 0; i < n; ++i) {
        const double x = std::log(bcl_sim::time_noise_factor(9, 2, i, 0.2));
        sum += x;
        squares += x * x;
    }
    const double mean = sum / n;
    CHECK(std::abs(mean) < 0.0057);
    CHECK(std::sqrt(squares / n - mean * mean) == Approx(0.2).epsilon(0.03));
}

TEST_CASE("calibration: a true cost equal to the estimate changes nothing", "[sim][calibration]") {
    sim_config cfg;
    cfg.dist = bcl_sim::parse_dist("pareto:xm=50,alpha=1.3");
    cfg.cost = affine(3, 1, 1e-4);
    cfg.ranks = 4;
    cfg.batch = 8;
    cfg.lookahead = 4;
    cfg.steps = 60;
    const bcl_sim::sim_result plain = bcl_sim::simulate(cfg);
    cfg.true_cost = cfg.cost;
    const bcl_sim::sim_result same = bcl_sim::simulate(cfg);
    REQUIRE(plain.policies.size() == same.policies.size());
    for (std::size_t i = 0; i < plain.policies.size(); ++i) {
        INFO(plain.policies[i].name);
        CHECK(plain.policies[i].metrics.efficiency == same.policies[i].metrics.efficiency);
        CHECK(plain.policies[i].metrics.cv == same.policies[i].metrics.cv);
        CHECK(plain.policies[i].step_max == same.policies[i].step_max);
        CHECK(plain.policies[i].step_mean == same.policies[i].step_mean);
        CHECK_FALSE(same.policies[i].extras.calibration);
    }
    // And a different true cost does change what none spends (the check above can fail).
    cfg.true_cost = affine(3, 1, 2e-4);
    const bcl_sim::sim_result other = bcl_sim::simulate(cfg);
    CHECK(other.policies.front().step_mean != plain.policies.front().step_mean);
}

TEST_CASE("calibration: every policy is charged the true cost in force at each step",
          "[sim][calibration]") {
    // Two ranks of records of 100 tokens, B = 2: whatever a policy does, a rank's step holds two
    // of them. The estimate (--cost) is L; the truth is L until step 4, then L + 0.01 L^2 = 200
    // per record. So every rank spends 2 * 100 = 200 in steps 0..3 and 2 * 200 = 400 from step 4.
    const std::vector<std::vector<double>> streams(2, std::vector<double>(200, 100.0));
    sim_config cfg;
    cfg.ranks = 2;
    cfg.batch = 2;
    cfg.lookahead = 2;
    cfg.steps = 10;
    cfg.cost = affine(0, 1, 0);
    cfg.drift = bcl_sim::drift_spec{4, affine(0, 1, 0.01)};
    cfg.policies = {"none", "verl_kk", "tumbling", "sliding", "sliding_true"};
    const auto make = [&streams]() -> std::unique_ptr<bcl_sim::record_source> {
        return std::make_unique<bcl_sim_test::hand_source>(streams, std::nullopt, std::nullopt);
    };
    const bcl_sim::sim_result res = bcl_sim::simulate(cfg, make);
    REQUIRE(res.policies.size() == 5);
    for (const bcl_sim::policy_result& p : res.policies) {
        INFO(p.name);
        REQUIRE(p.step_max.size() == 10);
        for (std::size_t s = 0; s < 10; ++s) {
            CHECK(p.step_max[s] == (s < 4 ? 200.0 : 400.0));
            CHECK(p.step_mean[s] == (s < 4 ? 200.0 : 400.0));
        }
    }
    // Without the drift, --true-cost alone: 400 in every step.
    cfg.drift.reset();
    cfg.true_cost = affine(0, 1, 0.01);
    cfg.policies = {"none"};
    const bcl_sim::sim_result flat = bcl_sim::simulate(cfg, make);
    CHECK(flat.policies.front().step_max == std::vector<double>(10, 400.0));
}

TEST_CASE("calibration: a calibrated balancer fed noise-free times recovers the true model",
          "[sim][calibration]") {
    // The prior says cost = L; the ranks truly spend L + 1e-4 L^2 and report exactly that (noise
    // 0). Lognormal lengths (median e^7 = 1097, a long tail) make L and L^2 vary apart from batch
    // to batch, so 2000 steps determine the model: the fit must find b = 1 and c = 1e-4 within a
    // few percent, a close to 0 next to the cost of one record (>= 1), and predict the last half's
    // batch costs within 1%.
    sim_config cfg;
    cfg.dist = bcl_sim::parse_dist("lognormal:mu=7,sigma=1");
    cfg.ranks = 4;
    cfg.batch = 8;
    cfg.lookahead = 4;
    cfg.steps = 2000;
    cfg.cost = affine(0, 1, 0);
    cfg.true_cost = affine(0, 1, 1e-4);
    cfg.calibrate = true;
    cfg.time_noise = 0.0;
    cfg.policies = {"none", "tumbling", "sliding", "sliding_true"};
    const bcl_sim::sim_result res = bcl_sim::simulate(cfg);
    REQUIRE(res.policies.size() == 4);
    CHECK_FALSE(res.policies[0].extras.calibration); // none
    CHECK_FALSE(res.policies[3].extras.calibration); // sliding_true is never calibrated
    for (std::size_t i = 1; i <= 2; ++i) {
        const bcl_sim::policy_result& p = res.policies[i];
        INFO(p.name);
        REQUIRE(p.extras.calibration);
        const bcl_sim::calibration_report& c = *p.extras.calibration;
        CHECK(c.fitted[0] < 1.0);
        CHECK(c.fitted[1] == Approx(1.0).epsilon(0.05));
        CHECK(c.fitted[2] == Approx(1e-4).epsilon(0.05));
        REQUIRE(bcl_sim::calibration_error(c));
        CHECK(*bcl_sim::calibration_error(c) < 0.01);
        // Every rank's batch of every step was predicted: R per step.
        CHECK(c.step_batches == std::vector<std::uint32_t>(cfg.steps, 4));
    }
    // Calibrated, sliding balances the true cost about as well as sliding that knows it.
    CHECK(res.policies[2].metrics.efficiency ==
          Approx(res.policies[3].metrics.efficiency).margin(0.01));
}

TEST_CASE("calibration: relative_rms averages squared relative errors over batches",
          "[sim][calibration]") {
    bcl_sim::calibration_report c;
    // Step 0: two batches off by 10% and 30%; step 1: none; steps 2, 3: one batch off by 20%.
    c.step_squared_error = {0.01 + 0.09, 0.0, 0.04, 0.04};
    c.step_batches = {2, 0, 1, 1};
    CHECK(*bcl_sim::relative_rms(c, 0, 1) == Approx(std::sqrt(0.05)));
    CHECK_FALSE(bcl_sim::relative_rms(c, 1, 2));
    CHECK(*bcl_sim::relative_rms(c, 0, 4) == Approx(std::sqrt(0.18 / 4)));
    // The last half of 4 steps is steps 2 and 3.
    CHECK(*bcl_sim::calibration_error(c) == Approx(0.2));
}
