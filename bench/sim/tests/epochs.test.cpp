// --epoch-steps, --epoch-start and --mean-cost epoch (bcl_runner.hpp, simulate.hpp): the bcl
// policies start an epoch per rank every N steps, as the samplers do, holding exactly that
// epoch's N*B records, either carrying the rank's drained balancer into it (next_epoch, the
// default) or starting a fresh one; --mean-cost epoch hands each epoch the mean of its capped
// costs. The other policies ignore epochs, and --epoch-steps 0 is the run without them. Expected
// numbers are derived in the comments, never copied from the code's output.

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

TEST_CASE("epochs: each epoch's N*B records are read and emitted in its own steps, once each",
          "[sim][epochs]") {
    // R = 3, B = 4, K = 3, epochs of N = 5 steps (20 records per rank; not a whole number of
    // windows, so each epoch ends with a short round that finish() drains), 17 steps: epochs 0,
    // 1 and 2 whole, epoch 3 cut off by the end of the run after 2 of its 5 steps. Rank r's
    // record at stream index i has id i*R + r and belongs to epoch i / 20. In every step, rank r
    // emits only records of the step's epoch (step / 5) and has read no record of a later one.
    // The whole epochs emit each of their records exactly once; the cut-off one emits 2*B.
    const std::size_t R = 3;
    const std::size_t B = 4;
    const std::size_t N = 5;
    const std::uint64_t per_epoch = N * B;
    sim_config cfg;
    cfg.dist = bcl_sim::parse_dist("pareto:xm=50,alpha=1.3");
    cfg.ranks = R;
    cfg.batch = B;
    cfg.lookahead = 3;
    cfg.steps = 17;
    cfg.seed = 11;
    // Calibration and sliding_true see a true cost other than the estimate, and a drift.
    cfg.true_cost = bcl_sim::cost_model{0.0, 1.0, 2e-4, {}};
    cfg.drift = bcl_sim::drift_spec{8, bcl_sim::cost_model{0.0, 1.0, 4e-4, {}}};

    // Runs one policy; returns how many emitted records broke the epoch rules above.
    const auto run = [&](const bcl_variant& v, std::size_t epoch_steps, bool mean_cost_epoch,
                         bcl_sim::epoch_boundary boundary,
                         std::map<std::pair<std::size_t, std::uint64_t>, int>& seen) {
        cfg.policies = {std::string(v.policy)};
        cfg.calibrate = v.calibrate;
        cfg.epoch_steps = epoch_steps;
        cfg.mean_cost_epoch = mean_cost_epoch;
        cfg.epoch_start = boundary;
        counting_source* source = nullptr;
        const auto make_source = [&]() -> std::unique_ptr<bcl_sim::record_source> {
            auto s = std::make_unique<counting_source>(cfg.dist, R, cfg.seed);
            source = s.get(); // the last one made is the policy's (none's reference run is first)
            return s;
        };
        std::size_t broken = 0;
        const auto res = bcl_sim::simulate(
            cfg, make_source, [&](std::size_t step, std::size_t rank, std::uint64_t id) {
                const std::uint64_t index = id / R;
                const std::uint64_t epoch = step / N;
                ++seen[{rank, index}];
                const bool in_epoch = id % R == rank && index / per_epoch == epoch;
                const bool read_ahead = source->read(rank) > (epoch + 1) * per_epoch;
                broken += !in_epoch || read_ahead ? 1 : 0;
            });
        CHECK(only(res).metrics.efficiency > 0.0);
        return broken;
    };

    for (const bcl_variant& v : bcl_variants)
        for (const bool mean_cost_epoch : {false, true})
            for (const bcl_sim::epoch_boundary boundary : boundaries)
                DYNAMIC_SECTION(v.policy << (v.calibrate ? " calibrated" : "")
                                         << (mean_cost_epoch ? ", mean cost epoch" : "") << ", "
                                         << bcl_sim::describe(boundary)) {
                    std::map<std::pair<std::size_t, std::uint64_t>, int> seen;
                    CHECK(run(v, N, mean_cost_epoch, boundary, seen) == 0);
                    CHECK(seen.size() == cfg.steps * R * B);
                    CHECK(std::all_of(seen.begin(), seen.end(),
                                      [](const auto& kv) { return kv.second == 1; }));
                    for (std::size_t r = 0; r < R; ++r) {
                        for (std::uint64_t i = 0; i < 3 * per_epoch; ++i) // epochs 0, 1, 2 whole
                            CHECK(seen.count({r, i}) == 1);
                        std::size_t last_epoch = 0;
                        for (const auto& [key, count] : seen)
                            if (key.first == r && key.second >= 3 * per_epoch) ++last_epoch;
                        CHECK(last_epoch == 2 * B);
                    }
                }

    SECTION("the check is not vacuous: without epochs sliding crosses their boundaries") {
        // One balancer for the run holds records back across step 5's boundary and reads its
        // buffer ahead of it.
        std::map<std::pair<std::size_t, std::uint64_t>, int> seen;
        CHECK(run({"sliding", false}, 0, false, bcl_sim::epoch_boundary::carry, seen) > 0);
    }
}

TEST_CASE("epochs: --epoch-steps 0 is the run without epochs, and other policies ignore epochs",
          "[sim][epochs]") {
    sim_config cfg;
    cfg.dist = bcl_sim::parse_dist("lognormal:mu=6,sigma=1.2");
    cfg.ranks = 4;
    cfg.batch = 4;
    cfg.lookahead = 3;
    cfg.steps = 40;
    cfg.seed = 5;
    cfg.cap = bcl_sim::parse_cap("p95");
    cfg.true_cost = bcl_sim::cost_model{0.0, 1.0, 2e-4, {}};
    const auto same = [](const bcl_sim::policy_result& a, const bcl_sim::policy_result& b) {
        CHECK(a.step_max == b.step_max);
        CHECK(a.step_mean == b.step_mean);
        CHECK(a.extras.max_delay_batches == b.extras.max_delay_batches);
        CHECK(a.extras.capped == b.extras.capped);
        CHECK(a.extras.mean_gap_to_lb == b.extras.mean_gap_to_lb);
        CHECK(a.peak_batch_tokens == b.peak_batch_tokens);
    };

    SECTION("an epoch longer than the run is the run without epochs") {
        // With N = 1000 the one epoch holds 4000 records per rank, more than 40 steps of B = 4
        // can push (160, plus a sliding buffer of 2*K*B = 24): the runner builds each rank's
        // balancer with the same options at step 0 and never reaches finish(), exactly as with
        // one balancer per rank for the run. So --epoch-steps 0 and 1000 agree in every number.
        for (const bcl_variant& v : bcl_variants)
            for (const bcl_sim::epoch_boundary boundary : boundaries)
                DYNAMIC_SECTION(v.policy << (v.calibrate ? " calibrated" : "") << ", "
                                         << bcl_sim::describe(boundary)) {
                    cfg.policies = {std::string(v.policy)};
                    cfg.calibrate = v.calibrate;
                    cfg.epoch_steps = 0;
                    cfg.epoch_start = bcl_sim::epoch_boundary::carry;
                    const auto without = bcl_sim::simulate(cfg);
                    cfg.epoch_steps = 1000;
                    cfg.epoch_start = boundary;
                    const auto one_epoch = bcl_sim::simulate(cfg);
                    same(only(without), only(one_epoch));
                    if (v.calibrate) {
                        REQUIRE(only(without).extras.calibration);
                        REQUIRE(only(one_epoch).extras.calibration);
                        CHECK(only(without).extras.calibration->fitted ==
                              only(one_epoch).extras.calibration->fitted);
                    }
                }
    }

    SECTION("the other policies run as without epochs") {
        for (const char* name : {"none", "length_grouped", "mffd", "verl_kk", "global"})
            DYNAMIC_SECTION(name) {
                cfg.policies = {name};
                cfg.epoch_steps = 0;
                const auto without = bcl_sim::simulate(cfg);
                cfg.epoch_steps = 7;
                cfg.mean_cost_epoch = true;
                const auto with = bcl_sim::simulate(cfg);
                same(only(without), only(with));
            }
    }

    SECTION("epochs change the bcl policies' run") {
        // The control of the two sections above: epochs of 7 steps (not a multiple of K = 3)
        // cut sliding's buffer and tumbling's windows, so their step costs change, whether the
        // balancer is carried into each epoch or started afresh.
        for (const char* name : {"tumbling", "sliding"})
            for (const bcl_sim::epoch_boundary boundary : boundaries)
                DYNAMIC_SECTION(name << ", " << bcl_sim::describe(boundary)) {
                    cfg.policies = {name};
                    cfg.epoch_steps = 0;
                    cfg.epoch_start = bcl_sim::epoch_boundary::carry;
                    const auto without = bcl_sim::simulate(cfg);
                    cfg.epoch_steps = 7;
                    cfg.epoch_start = boundary;
                    const auto with = bcl_sim::simulate(cfg);
                    CHECK(only(without).step_max != only(with).step_max);
                }
    }
}

TEST_CASE("epochs: tumbling carried over epochs of whole rounds is one balancer's run; fresh "
          "balancers learn again",
          "[sim][epochs]") {
    // Epochs of N = 12 steps, a multiple of K = 3: each epoch is 4 whole tumbling windows of
    // K*B = 12 records, the same windows one balancer for the run forms, and the epoch's last
    // window is full, so it is partitioned as any other (its drain has nothing left to do). A
    // carried balancer keeps the quantile cap's sketch, the heavy slots and the running mean, so
    // every window is partitioned and ordered as one balancer's: the same run in every step.
    // A p90 cap warms up over ceil(10 / 0.1) = 100 records (bcl::cap_warmup), more than an
    // epoch's N*B = 48: a fresh balancer per epoch never caps a record, while a carried one (and
    // one for the run) caps from its 101st record on.
    sim_config cfg;
    cfg.dist = bcl_sim::parse_dist("pareto:xm=50,alpha=1.3");
    cfg.ranks = 4;
    cfg.batch = 4;
    cfg.lookahead = 3;
    cfg.steps = 60; // 5 epochs, 240 records per rank
    cfg.seed = 3;
    cfg.cap = bcl_sim::parse_cap("p90");
    cfg.policies = {"tumbling"};
    REQUIRE(bcl::cap_warmup(bcl_sim::bcl_cap(cfg.cap, cfg.cap_action, cfg.cost)) == 100);
    const auto one = bcl_sim::simulate(cfg);
    cfg.epoch_steps = 12;
    const auto carried = bcl_sim::simulate(cfg);
    cfg.epoch_start = bcl_sim::epoch_boundary::fresh;
    const auto fresh = bcl_sim::simulate(cfg);

    CHECK(only(carried).step_max == only(one).step_max);
    CHECK(only(carried).step_mean == only(one).step_mean);
    CHECK(only(carried).extras.capped == only(one).extras.capped);
    CHECK(only(carried).extras.max_delay_batches == only(one).extras.max_delay_batches);
    CHECK(only(carried).peak_batch_tokens == only(one).peak_batch_tokens);
    REQUIRE(only(one).extras.mean_gap_to_lb);
    REQUIRE(only(carried).extras.mean_gap_to_lb);
    // Summed per epoch, then over epochs: the same gaps, added in another order.
    CHECK(*only(carried).extras.mean_gap_to_lb ==
          Approx(*only(one).extras.mean_gap_to_lb).epsilon(1e-9));
    CHECK(only(one).extras.capped > 0);
    CHECK(only(fresh).extras.capped == 0);
    CHECK(only(fresh).step_max != only(one).step_max);
}

TEST_CASE("epochs: sliding's first epoch is the same carried or fresh; later epochs differ",
          "[sim][epochs]") {
    // Until the first boundary both runs hold one balancer per rank built with the same options,
    // fed the same records: the same steps. From the second epoch on, the carried balancer aims
    // at the running mean of everything it has seen (and keeps the p95 cap, past its warm-up of
    // 200 records within the first epoch of N*B = 320), while a fresh one starts both again.
    sim_config cfg;
    cfg.dist = bcl_sim::parse_dist("pareto:xm=50,alpha=1.3");
    cfg.ranks = 4;
    cfg.batch = 8;
    cfg.lookahead = 4;
    cfg.steps = 120;
    cfg.seed = 7;
    cfg.cap = bcl_sim::parse_cap("p95");
    cfg.epoch_steps = 40;
    cfg.policies = {"sliding"};
    const auto carried = bcl_sim::simulate(cfg);
    cfg.epoch_start = bcl_sim::epoch_boundary::fresh;
    const auto fresh = bcl_sim::simulate(cfg);
    const auto epoch = [](const std::vector<double>& steps, std::size_t e) {
        return std::vector<double>(steps.begin() + static_cast<std::ptrdiff_t>(40 * e),
                                   steps.begin() + static_cast<std::ptrdiff_t>(40 * (e + 1)));
    };
    const std::vector<double>& c = only(carried).step_max;
    const std::vector<double>& f = only(fresh).step_max;
    CHECK(epoch(c, 0) == epoch(f, 0));
    CHECK(epoch(c, 1) != epoch(f, 1));
    CHECK(epoch(c, 2) != epoch(f, 2));
    // The fresh balancers warm the cap up again every epoch: fewer records capped.
    CHECK(only(fresh).extras.capped < only(carried).extras.capped);
}

TEST_CASE("epochs: a carried calibrated balancer keeps its fit; a fresh one starts from the "
          "prior",
          "[sim][epochs]") {
    // One rank, B = 2, K = 2, epochs of N = 6 steps (12 records). The runner observes every
    // batch's time once, right after the batch is popped. After step 6, the first of epoch 1, a
    // carried balancer's fit has been told of all 7 batches of the run so far; a fresh one's
    // only of the one batch of its own epoch.
    std::vector<double> stream;
    for (int i = 0; i < 24; ++i) stream.push_back(100.0 + 37.0 * (i % 7));
    bcl_sim::sim_context ctx;
    ctx.batch = 2;
    ctx.lookahead = 2;
    ctx.cost = bcl_sim::cost_model{0.0, 1.0, 0.0, {}};
    ctx.truth = bcl_sim::cost_schedule(bcl_sim::cost_model{0.0, 2.0, 1e-3, {}}, std::nullopt);
    ctx.calibrate = true;
    ctx.epoch_steps = 6;
    for (const bcl_sim::epoch_boundary boundary : boundaries) {
        INFO(bcl_sim::describe(boundary));
        ctx.epoch_start = boundary;
        hand_runner runner("sliding", {stream}, ctx);
        for (std::size_t s = 0; s < 7; ++s) runner.run(s, 1);
        const auto& bal = calibrated_balancer(runner.runner(), 0);
        CHECK(bal.stats().batches == 1); // the epoch's own count either way
        CHECK(bal.calibration().times_observed ==
              (boundary == bcl_sim::epoch_boundary::carry ? 7U : 1U));
    }
}

TEST_CASE("epochs: epoch_bound is the stream's, the same for every policy that drains its epochs",
          "[sim][epochs]") {
    // none runs each rank's records in stream order, so its epoch blocks of N steps hold exactly
    // the rank's epochs; the bcl policies hand out each epoch within its steps (the first test
    // case), carried or fresh. Each rank then spends the same in each epoch under all of them,
    // and epoch_bound, a function of those totals alone, is the same (up to the order of the
    // additions); no policy's efficiency is above its own epoch_bound.
    sim_config cfg;
    cfg.dist = bcl_sim::parse_dist("lognormal:mu=6,sigma=1.5");
    cfg.ranks = 4;
    cfg.batch = 4;
    cfg.lookahead = 3;
    cfg.steps = 44; // 4 whole epochs of 11 steps (a cut-off one depends on what is emitted)
    cfg.seed = 2;
    cfg.epoch_steps = 11;
    cfg.policies = {"none", "tumbling", "sliding"};
    for (const bool mean_cost_epoch : {false, true})
        for (const bcl_sim::epoch_boundary boundary : boundaries) {
            INFO(bcl_sim::describe(boundary) << (mean_cost_epoch ? ", mean cost epoch" : ""));
            cfg.mean_cost_epoch = mean_cost_epoch;
            cfg.epoch_start = boundary;
            const auto res = bcl_sim::simulate(cfg);
            REQUIRE(res.policies.size() == 3);
            const double bound = res.policies[0].metrics.epoch_bound;
            CHECK(bound < 1.0);
            for (const bcl_sim::policy_result& p : res.policies) {
                INFO(p.name);
                CHECK(p.metrics.epoch_bound == Approx(bound).epsilon(1e-12));
                CHECK(p.metrics.efficiency <= p.metrics.epoch_bound);
            }
        }
    // Without epochs there is nothing to bound.
    cfg.epoch_steps = 0;
    cfg.mean_cost_epoch = false;
    cfg.epoch_start = bcl_sim::epoch_boundary::carry;
    for (const bcl_sim::policy_result& p : bcl_sim::simulate(cfg).policies)
        CHECK(p.metrics.epoch_bound == 1.0);
}

TEST_CASE("epochs: bad --epoch-steps, and --mean-cost epoch without epochs, are bad input",
          "[sim][epochs][input]") {
    sim_config cfg;
    cfg.steps = 100;
    bcl_sim::parse_mean_cost("epoch", cfg);
    CHECK(cfg.mean_cost_epoch);
    CHECK_FALSE(cfg.mean_cost_exact);
    CHECK_FALSE(cfg.mean_cost);
    CHECK_THROWS_AS(bcl_sim::validate(cfg), bcl_sim::input_error);
    CHECK_THROWS_WITH(bcl_sim::validate(cfg),
                      Contains("--mean-cost epoch") && Contains("give --epoch-steps N > 0"));
    CHECK_THROWS_AS(bcl_sim::simulate(cfg), bcl_sim::input_error);
    cfg.epoch_steps = 30; // the last of 4 epochs cut off after 10 steps: fine
    CHECK_NOTHROW(bcl_sim::validate(cfg));
    cfg.epoch_steps = 200; // longer than the run: one epoch, cut off
    CHECK_NOTHROW(bcl_sim::validate(cfg));

    // Another --mean-cost value clears `epoch`; an unknown one names the choices.
    bcl_sim::parse_mean_cost("exact", cfg);
    CHECK_FALSE(cfg.mean_cost_epoch);
    // `running` (the default) is each rank's running mean: no level given, none computed.
    bcl_sim::parse_mean_cost("running", cfg);
    CHECK((!cfg.mean_cost && !cfg.mean_cost_exact && !cfg.mean_cost_epoch));
    CHECK_THROWS_WITH(bcl_sim::parse_mean_cost("none", cfg), Contains("expected running"));
    CHECK_THROWS_WITH(
        bcl_sim::parse_mean_cost("epochs", cfg),
        Contains("--mean-cost epochs: expected running, exact, epoch, or a cost > 0"));
    // Set through the API, epoch and a given mean contradict each other.
    cfg.mean_cost_exact = false;
    cfg.mean_cost = 5.0;
    cfg.mean_cost_epoch = true;
    CHECK_THROWS_WITH(bcl_sim::validate(cfg), Contains("--mean-cost: epoch is one choice"));

    // An epoch of more than 2^30 records per rank: B = 16 and N = 2^26 + 1.
    cfg.mean_cost.reset();
    cfg.batch = 16;
    cfg.epoch_steps = (std::size_t{1} << 26) + 1;
    CHECK_THROWS_WITH(bcl_sim::validate(cfg),
                      Contains("--epoch-steps * --batch must be at most 2^30 records"));
    cfg.epoch_steps = std::size_t{1} << 26; // exactly 2^30 records
    CHECK_NOTHROW(bcl_sim::validate(cfg));

    // --epoch-start: carry or fresh; fresh only with epochs (carry, the default, is harmless
    // without them: there is no boundary to carry a balancer over).
    CHECK(bcl_sim::parse_epoch_start("carry") == bcl_sim::epoch_boundary::carry);
    CHECK(bcl_sim::parse_epoch_start("fresh") == bcl_sim::epoch_boundary::fresh);
    CHECK_THROWS_WITH(bcl_sim::parse_epoch_start("restart"),
                      Contains("--epoch-start restart") && Contains("expected carry or fresh"));
    cfg.epoch_steps = 0;
    cfg.mean_cost_epoch = false;
    cfg.epoch_start = bcl_sim::epoch_boundary::fresh;
    CHECK_THROWS_WITH(bcl_sim::validate(cfg),
                      Contains("--epoch-start fresh") && Contains("give --epoch-steps N > 0"));
    cfg.epoch_steps = 10;
    CHECK_NOTHROW(bcl_sim::validate(cfg));
    cfg.epoch_start = static_cast<bcl_sim::epoch_boundary>(7); // through the API only
    CHECK_THROWS_WITH(bcl_sim::validate(cfg), Contains("--epoch-start: no such epoch start"));
    // Negative, fractional and non-numeric --epoch-steps are the command line's (bcl_cli's
    // whole_number check), tested as sim_cli_bad_*_epoch_steps in bench/sim/CMakeLists.txt.
}
