// --mean-cost epoch (bcl_runner.hpp, simulate.hpp): each epoch's balancers get the mean of
// their epoch's capped costs, as the samplers pass it, and that mean steers sliding as the same
// mean given by --mean-cost does. Expected numbers are derived in the comments, never copied
// from the code's output.
#include "bcl_runner.hpp"
#include "cost_and_cap.hpp"
#include "epoch_support.hpp"
#include "policy_runner.hpp"
#include "sim_test_support.hpp"
#include "simulate.hpp"
#include "workload.hpp"

#include <bcl/options.hpp>
#include <bcl/stream_mean_cost.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

using Catch::Matchers::Contains;

using bcl_sim::sim_config;
using bcl_sim_test::hand_source;
using namespace bcl_sim_test::epochs; // NOLINT(google-build-using-namespace): the shared helpers

TEST_CASE("epochs: --mean-cost epoch gives each epoch's balancers their epoch's capped mean",
          "[sim][epochs]") {
    // Two ranks, B = 2, K = 1, epochs of N = 2 steps: 4 records per rank per epoch, 8 in all
    // (a table source throws for a read past them, so neither epoch reads ahead). Cost = length.
    //   rank 0: 1 2 3 10 | 4 4 4 4      rank 1: 6 6 2 1 | 1 1 1 9
    // Uncapped means: rank 0 16/4 = 4 and 16/4 = 4; rank 1 15/4 = 3.75 and 12/4 = 3.
    // A fixed cap of 5 clips 10, 6, 6 and 9 to 5: rank 0 11/4 = 2.75 and 4; rank 1 13/4 = 3.25
    // and 8/4 = 2.
    // A p75 cap clips at each epoch's 3rd smallest of 4 (nearest rank, ceil(0.75 * 4)): rank 0
    // at 3 (1 2 3 3: 9/4 = 2.25) and 4 (4); rank 1 at 6 (15/4 = 3.75) and 1 (4/4 = 1).
    const std::vector<std::vector<double>> streams{{1, 2, 3, 10, 4, 4, 4, 4},
                                                   {6, 6, 2, 1, 1, 1, 1, 9}};
    bcl_sim::sim_context ctx;
    ctx.batch = 2;
    ctx.lookahead = 1;
    ctx.cost = bcl_sim::cost_model{0.0, 1.0, 0.0, {}};
    ctx.truth = bcl_sim::cost_schedule(ctx.cost, std::nullopt);
    ctx.epoch_steps = 2;
    ctx.mean_cost_epoch = true;

    // Runs `policy` for 4 steps; after steps 0 and 2, where epochs 0 and 1 start, rank r's
    // balancer has mean_cost expected[r][epoch], which is also bcl::stream_mean_cost of the
    // epoch's costs under the balancer's own cap.
    const auto check_means = [&](std::string_view policy, const bcl_sim::sim_context& c,
                                 const std::vector<std::vector<double>>& expected,
                                 double cost_factor) {
        hand_runner runner(policy, streams, c);
        for (std::size_t epoch = 0; epoch < 2; ++epoch) {
            runner.run(2 * epoch, 1);
            for (std::size_t r = 0; r < 2; ++r) {
                INFO("rank " << r << ", epoch " << epoch);
                const bcl::options& opt = runner.settings(r);
                CHECK(opt.mean_cost == Approx(expected[r][epoch]).epsilon(1e-12));
                std::vector<double> costs;
                for (std::size_t i = 4 * epoch; i < 4 * epoch + 4; ++i)
                    costs.push_back(cost_factor * streams[r][i]);
                CHECK(opt.mean_cost == bcl::stream_mean_cost(costs, opt.cap));
            }
            runner.run(2 * epoch + 1, 1);
        }
    };

    SECTION("no cap, fixed cap, quantile cap; carried or fresh") {
        // A carried balancer takes the mean through next_epoch(mean), a fresh one as its option.
        for (const char* policy : {"sliding", "tumbling"})
            for (const bcl_sim::epoch_boundary boundary : boundaries) {
                INFO(policy << ", " << bcl_sim::describe(boundary));
                ctx.epoch_start = boundary;
                ctx.cap = bcl::cap_options{};
                check_means(policy, ctx, {{4.0, 4.0}, {3.75, 3.0}}, 1.0);
                ctx.cap =
                    bcl_sim::bcl_cap(bcl_sim::parse_cap("5"), bcl::cap_action::clip, ctx.cost);
                check_means(policy, ctx, {{2.75, 4.0}, {3.25, 2.0}}, 1.0);
                ctx.cap =
                    bcl_sim::bcl_cap(bcl_sim::parse_cap("p75"), bcl::cap_action::clip, ctx.cost);
                check_means(policy, ctx, {{2.25, 4.0}, {3.75, 1.0}}, 1.0);
            }
    }

    SECTION("sliding_true takes the true cost in force when the epoch starts") {
        // True cost 2L, and 3L from step 2 on (epoch 1): twice and three times the means above.
        ctx.truth = bcl_sim::cost_schedule(bcl_sim::cost_model{0.0, 2.0, 0.0, {}},
                                           bcl_sim::drift_spec{2, {0.0, 3.0, 0.0, {}}});
        hand_runner runner("sliding_true", streams, ctx);
        runner.run(0, 1);
        CHECK(runner.settings(0).mean_cost == Approx(2.0 * 4.0));
        CHECK(runner.settings(1).mean_cost == Approx(2.0 * 3.75));
        runner.run(1, 1);
        runner.run(2, 1);
        CHECK(runner.settings(0).mean_cost == Approx(3.0 * 4.0));
        CHECK(runner.settings(1).mean_cost == Approx(3.0 * 3.0));
        // The calibrated policies start from the prior --cost (L), not the true cost.
        ctx.calibrate = true;
        check_means("sliding", ctx, {{4.0, 4.0}, {3.75, 3.0}}, 1.0);
    }

    SECTION("without --mean-cost epoch the balancers keep their running mean") {
        ctx.mean_cost_epoch = false;
        for (const bcl_sim::epoch_boundary boundary : boundaries) {
            INFO(bcl_sim::describe(boundary));
            ctx.epoch_start = boundary;
            hand_runner runner("sliding", streams, ctx);
            for (std::size_t s = 0; s < 4; ++s) {
                runner.run(s, 1);
                CHECK(runner.settings(0).mean_cost == 0.0);
                CHECK(runner.settings(1).mean_cost == 0.0);
            }
        }
    }
}

TEST_CASE("epochs: the epoch's mean steers sliding as the same mean given by --mean-cost does",
          "[sim][epochs]") {
    // One rank, B = 4, K = 2, epochs of N = 8 steps: 32 records, light first and heavy last
    // (lengths 1..32 squared), the same in each of 3 epochs. The epoch's mean is then one number
    // m, bit for bit (the same costs in the same order), so --mean-cost epoch must steer every
    // round as --mean-cost m does: the same step costs. The running mean, far below m while the
    // light records come in, steers differently: if the epoch's mean did not reach the balancer,
    // the first two runs would differ and the last two agree.
    std::vector<double> epoch;
    for (int i = 1; i <= 32; ++i) epoch.push_back(static_cast<double>(i * i));
    std::vector<double> stream;
    for (int e = 0; e < 3; ++e) stream.insert(stream.end(), epoch.begin(), epoch.end());
    const double m = bcl::stream_mean_cost(epoch, bcl::cap_options{});
    CHECK(m == Approx(11440.0 / 32.0)); // sum of i^2 for i = 1..32 is 32*33*65/6 = 11440

    sim_config cfg;
    cfg.cost = bcl_sim::cost_model{0.0, 1.0, 0.0, {}};
    cfg.ranks = 1;
    cfg.batch = 4;
    cfg.lookahead = 2;
    cfg.steps = 24;
    cfg.epoch_steps = 8;
    cfg.policies = {"sliding"};
    const auto source = [&] {
        return std::make_unique<hand_source>(std::vector<std::vector<double>>{stream}, std::nullopt,
                                             std::nullopt);
    };
    cfg.mean_cost_epoch = true;
    const auto by_epoch = bcl_sim::simulate(cfg, source);
    cfg.mean_cost_epoch = false;
    cfg.mean_cost = m;
    const auto given = bcl_sim::simulate(cfg, source);
    cfg.mean_cost.reset();
    const auto running = bcl_sim::simulate(cfg, source);
    CHECK(only(by_epoch).step_max == only(given).step_max);
    CHECK(only(by_epoch).step_max != only(running).step_max);
    // Every epoch is the same records under the same options: the same 8 step costs each time.
    const std::vector<double>& steps = only(by_epoch).step_max;
    CHECK(std::vector<double>(steps.begin(), steps.begin() + 8) ==
          std::vector<double>(steps.begin() + 8, steps.begin() + 16));
}
